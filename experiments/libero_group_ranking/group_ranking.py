"""Can a world model rank the rollouts of one GRPO group (same init state, different noise)?

GRPO normalises rewards within a group, so a world model helps it only by ordering a group's
rollouts: the gate is the within-group AUROC
(:func:`wmrl_core.experiments.stats.within_group_auroc`, ties 1/2) on held-out groups.

``collect`` runs the base policy (the small VLA, its sampling noise drawn as
``SmallVLAPolicy.generate`` draws it, from a seed per rollout) in groups of ``--group-size``
rollouts from one init state, every physics state kept, one ``.npz`` per group under
``--out`` (resumable: a group already on disk is skipped). Init states are *training* ones
(0-39): ``--fit-init`` groups refit the imagination world model, ``--eval-init`` groups (disjoint
from the fitting ones) are the held-out groups of the gate; LIBERO's held-out split 40-49 (the
transfer experiment's evaluation) is refused for both.

``analyse`` refits the imagination world model (dynamics ensemble and scorer) on the fitting
groups and scores every held-out group with: the refit imagination model, the shipped one, the
shipped progress scorer (``libero-progress``) on the full executed trajectory, and the progress
scorer on only the first fraction ``f`` of each episode's simulation (``--fractions``: the
simulation-saving alternative; saved simulation ``1 - sum(min(T_i, f H)) / sum(T_i)``). It writes
``group_ranking.json`` (and its table, ``group_ranking_table.md``) with each scorer's within-group AUROC, a bootstrap interval over groups,
mixed groups and pairs.

    python -m experiments.libero_group_ranking.group_ranking collect --out runs/libero_groups --tasks 0,4,6,8
    python -m experiments.libero_group_ranking.group_ranking analyse --out runs/libero_groups

Paths are relative to the working directory (the repository root: the shipped checkpoints are the
defaults). Results: ``docs/results/libero/group_ranking.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from wmrl_libero.world_models.progress import prefix_states, prefix_steps

from wmrl_core.experiments.report import parse_int_ranges
from wmrl_core.experiments.stats import within_group_auroc

__all__ = [
    "TRANSFER_HELDOUT",
    "GroupKey",
    "group_plan",
    "rollout_seed",
    "prefix_steps",
    "simulation_saved",
    "prefix_states",
    "bootstrap_group_interval",
    "mixed_groups",
    "main",
]

TRANSFER_HELDOUT = frozenset(range(40, 50))
HORIZON = 520  # LIBERO-10's episode limit
BASE = "plugins/libero/checkpoints/small_vla_dagger_t0-9_h1024.pt"
SHIPPED_WM = "plugins/libero/checkpoints/libero_wm_t0-9.pt"


@dataclass(frozen=True)
class GroupKey:
    task: int
    init_state: int
    role: str  # "fit" or "eval"

    @property
    def name(self) -> str:
        return f"t{self.task}_i{self.init_state}_{self.role}"


def group_plan(
    tasks: Sequence[int], fit_init: Sequence[int], eval_init: Sequence[int], fit_per_eval: int = 2
) -> list[GroupKey]:
    """The groups in the order they are simulated: round ``r`` takes, for every task,
    ``fit_per_eval`` fitting init states and one held-out one, so a run stopped early has both
    kinds in proportion.

    :raises ValueError: when an init state is in LIBERO's held-out split 40-49 or in both lists.
    """
    bad = sorted((set(fit_init) | set(eval_init)) & TRANSFER_HELDOUT)
    if bad:
        raise ValueError(
            f"init states {bad} are the transfer experiment's held-out split (40-49); "
            "pick fitting and held-out groups from the training init states 0-39"
        )
    both = sorted(set(fit_init) & set(eval_init))
    if both:
        raise ValueError(f"init states {both} are both fitting and held-out; the held-out groups must be unseen")
    fit, ev = list(fit_init), list(eval_init)
    plan: list[GroupKey] = []
    rounds = max(math.ceil(len(fit) / max(fit_per_eval, 1)), len(ev))
    for r in range(rounds):
        for t in tasks:
            for s in fit[r * fit_per_eval : (r + 1) * fit_per_eval]:
                plan.append(GroupKey(int(t), int(s), "fit"))
            if r < len(ev):
                plan.append(GroupKey(int(t), int(ev[r]), "eval"))
    return plan


def rollout_seed(seed: int, task: int, init_state: int, rollout: int) -> int:
    """The noise seed of one rollout: ``((seed * 100 + task) * 100 + init_state) * 1000 + rollout``
    (distinct for tasks and init states below 100 and rollouts below 1000)."""
    return ((seed * 100 + task) * 100 + init_state) * 1000 + rollout


def simulation_saved(lengths: Sequence[int], fraction: float, horizon: int = HORIZON) -> float:
    """Share of the full episodes' control steps not simulated: ``1 - sum_i min(T_i, ceil(f H)) / sum_i T_i``."""
    total = sum(int(n) for n in lengths)
    if total == 0:
        raise ValueError("no simulated steps to save")
    return 1.0 - sum(prefix_steps(n, fraction, horizon) for n in lengths) / total


def mixed_groups(groups: Sequence[str], labels: Sequence[bool]) -> dict[str, int]:
    """Counts of groups with both outcomes, only successes and only failures."""
    out = {"mixed": 0, "all_success": 0, "all_failure": 0}
    y = np.asarray(labels, dtype=bool)
    g = np.asarray(groups)
    for key in dict.fromkeys(groups):
        ys = y[g == key]
        out["mixed" if 0 < ys.sum() < ys.size else "all_success" if ys.all() else "all_failure"] += 1
    return out


def bootstrap_group_interval(
    groups: Sequence[str],
    labels: Sequence[bool],
    scores: Sequence[float],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the within-group AUROC, resampling the *mixed* groups
    with replacement (the group is the unit: its rollouts share an init state); NaN with none."""
    y = np.asarray(labels, dtype=bool)
    p = np.asarray(scores, dtype=np.float64)
    g = np.asarray(groups)
    wins, pairs = [], []
    for key in dict.fromkeys(groups):
        m = g == key
        pos, neg = p[m & y], p[m & ~y]
        if pos.size and neg.size:
            wins.append(float((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()))
            pairs.append(float(pos.size * neg.size))
    if not pairs:
        return (math.nan, math.nan)
    w, n = np.asarray(wins), np.asarray(pairs)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(w), size=(n_boot, len(w)))
    stats = w[idx].sum(1) / n[idx].sum(1)
    a = (1 - confidence) / 2
    return float(np.quantile(stats, a)), float(np.quantile(stats, 1 - a))


# --------------------------------------------------------------------------- collection


def _load_policy(path: str):
    from wmrl_libero.policies.small_vla import load_small_vla

    return load_small_vla(path)


def _controllers(model, instruction: str, seed: int, key: GroupKey, group_size: int, max_steps: int):
    import torch
    from wmrl_libero.policies.small_vla import _NoiseController

    out = []
    for r in range(group_size):
        gen = torch.Generator().manual_seed(rollout_seed(seed, key.task, key.init_state, r))
        out.append(_NoiseController(model, instruction, torch.randn(max_steps, 7, generator=gen)))
    return out


def collect(
    out: Path,
    plan: Sequence[GroupKey],
    *,
    group_size: int,
    base: str,
    workers: int,
    seed: int,
    max_steps: int = HORIZON,
    log: Callable[[str], None] = print,
) -> None:
    """Simulate every group of ``plan`` not yet in ``out`` and save it as ``<name>.npz``."""
    from wmrl_libero.environment import LiberoEnvironment

    out.mkdir(parents=True, exist_ok=True)
    todo = [k for k in plan if not (out / f"{k.name}.npz").exists()]
    log(f"{len(plan) - len(todo)} of {len(plan)} groups on disk; {len(todo)} to simulate ({group_size} rollouts each)")
    if not todo:
        return
    model = _load_policy(base)
    env = LiberoEnvironment(
        task_indices=sorted({k.task for k in plan}),
        num_workers=workers,
        max_episode_steps=max_steps,
        trajectory_states=max_steps + 1,  # every state: the dynamics ensemble learns from each step
    )
    by_index = {int(t.data["task_index"]): t for t in env.tasks("train")}
    start, done = time.time(), 0
    try:
        for key in todo:
            base_task = by_index[key.task]
            from wmrl_core.types import Task

            task = Task(
                id=f"{env.suite}/{key.task}/{key.init_state}",
                description=base_task.description,
                data={"suite": env.suite, "task_index": key.task, "init_state": key.init_state},
            )
            ctrls = _controllers(model, task.description, seed, key, group_size, max_steps)
            t0 = time.time()
            outcomes = env.execute([task] * group_size, ctrls)
            if any(o.status != "ok" for o in outcomes):
                log(
                    f"{key.name}: {sum(o.status != 'ok' for o in outcomes)} simulator failures; not saved, rerun resumes"
                )
                continue
            arrays: dict[str, np.ndarray] = {
                "task": np.asarray(key.task),
                "init_state": np.asarray(key.init_state),
                "role": np.asarray(key.role),
                "seed": np.asarray(seed),
                "max_steps": np.asarray(max_steps),  # the noise is drawn at this length: imagination redraws it
                "success": np.asarray([o.score == 1.0 for o in outcomes]),
                "steps": np.asarray([o.info["steps"] for o in outcomes]),
                "cpu_s": np.asarray([o.info["cost_s"] for o in outcomes]),
                "object_len": np.asarray(outcomes[0].info["trajectory"]["object_state"].shape[1]),
            }
            for r, (o, c) in enumerate(zip(outcomes, ctrls)):
                arrays[f"proprio_{r}"] = o.info["trajectory"]["proprio"]
                arrays[f"object_{r}"] = o.info["trajectory"]["object_state"]
                arrays[f"actions_{r}"] = np.stack([a.clamp(-1, 1).numpy() for a in c.actions]).astype(np.float32)
            tmp = out / f"{key.name}.tmp.npz"
            np.savez_compressed(tmp, **arrays)
            tmp.rename(out / f"{key.name}.npz")
            done += 1
            el = time.time() - start
            log(
                f"{key.name}: {int(arrays['success'].sum())}/{group_size} successes, steps "
                f"{int(arrays['steps'].mean())} mean, {time.time() - t0:.0f} s wall, "
                f"{float(arrays['cpu_s'].mean()):.1f} CPU-s/episode; {done}/{len(todo)} groups, "
                f"{el / done / group_size:.2f} s wall/episode"
            )
    finally:
        env.close()


# --------------------------------------------------------------------------- analysis


@dataclass
class Group:
    key: GroupKey
    success: np.ndarray
    steps: np.ndarray
    states: list[np.ndarray]  # (T_i + 1, D) per rollout
    actions: list[np.ndarray]  # (T_i, 7)
    object_len: int
    seed: int
    max_steps: int = HORIZON


def load_groups(out: Path, object_dim: int = 128) -> list[Group]:
    from wmrl_libero.world_models.features import state_vector

    groups = []
    for path in sorted(out.glob("t*_i*_*.npz")):
        if path.name.endswith(".tmp.npz"):
            continue
        z = np.load(path)
        n = len(z["success"])
        groups.append(
            Group(
                GroupKey(int(z["task"]), int(z["init_state"]), str(z["role"])),
                z["success"].astype(bool),
                z["steps"].astype(int),
                [state_vector(z[f"proprio_{r}"], z[f"object_{r}"], object_dim) for r in range(n)],
                [z[f"actions_{r}"] for r in range(n)],
                int(z["object_len"]),
                int(z["seed"]),
                int(z["max_steps"]) if "max_steps" in z.files else HORIZON,
            )
        )
    return groups


def _episodes(groups: Sequence[Group]):
    from wmrl_libero.world_models.features import Episode

    return [
        Episode(g.key.task, g.key.init_state, bool(g.success[r]), g.states[r], g.actions[r], g.object_len, r, "groups")
        for g in groups
        for r in range(len(g.success))
    ]


def refit_imagination(
    fit: Sequence[Group],
    path: Path,
    *,
    dynamics_iterations: int,
    scorer_iterations: int,
    rollout_chunks: int,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> Path:
    """The imagination world model (dynamics ensemble + scorer) fitted on the fitting groups
    only, with the shipped recipe's architecture, saved as a ``train-wm`` checkpoint."""
    from wmrl_libero.world_models.checkpoint import WorldModelBundle, save_bundle
    from wmrl_libero.world_models.dynamics import fit_dynamics
    from wmrl_libero.world_models.scorer import fit_scorer
    from wmrl_libero.world_models.training import initial_states_of

    eps = _episodes(fit)
    n_succ = sum(e.success for e in eps)
    log(f"refit on {len(eps)} episodes of {len(fit)} fitting groups ({n_succ} successes)")
    t0 = time.process_time()
    dynamics = fit_dynamics(
        eps,
        chunk=4,
        members=5,
        hidden=128,
        iterations=dynamics_iterations,
        rollout_chunks=rollout_chunks,
        seed=seed,
        log=log,
    )
    scorer = fit_scorer(eps, hidden=128, iterations=scorer_iterations, seed=seed, log=log)
    meta = dict(
        data="base-policy groups",
        train_episodes=len(eps),
        train_successes=n_succ,
        train_success_rate=n_succ / len(eps),
        fit_init_states=sorted({g.key.init_state for g in fit}),
        fit_groups=sorted(g.key.name for g in fit),
        cpu_seconds=time.process_time() - t0,
    )
    bundle = WorldModelBundle(
        dynamics, scorer, 128, "libero_10", initial_states_of(eps), {e.task_index: e.object_len for e in eps}, meta
    )
    log(f"refit took {meta['cpu_seconds']:.0f} CPU-s")
    return save_bundle(bundle, path)


def _refit_groups(path: Path) -> list[str] | None:
    """The fitting groups a cached refit was fitted on (a changed set refits)."""
    from wmrl_libero.world_models.checkpoint import load_bundle

    return load_bundle(path).meta.get("fit_groups")


def imagination_scores(checkpoint: str | Path, groups: Sequence[Group], base: str):
    """Each held-out rollout's imagined success probability: the same policy and the same noise
    (``eps``) act in the world model from the group's recorded start state (the state after
    reset: not an outcome)."""
    from wmrl_libero.suites import suite_tasks
    from wmrl_libero.world_models.imagination import ImaginationWorldModel

    from wmrl_core.types import Task

    wm = ImaginationWorldModel(checkpoint=str(checkpoint), horizon=max(g.max_steps for g in groups))
    model = _load_policy(base)
    infos = suite_tasks("libero_10")
    tasks, sols = [], []
    for g in groups:
        wm.bundle.initial_states.setdefault((g.key.task, g.key.init_state), g.states[0][0])
        task = Task(
            id=f"libero_10/{g.key.task}/{g.key.init_state}",
            description=infos[g.key.task].language,
            data={"suite": "libero_10", "task_index": g.key.task, "init_state": g.key.init_state},
        )
        ctrls = _controllers(model, task.description, g.seed, g.key, len(g.success), g.max_steps)
        tasks += [task] * len(ctrls)
        sols += ctrls
    return np.asarray([o.score for o in wm.predict(tasks, sols)], dtype=np.float64)


def progress_scores(checkpoint: str | Path, groups: Sequence[Group], fraction: float = 1.0, kept: int = 16):
    """The shipped progress scorer on each rollout's first ``ceil(f H)`` simulated steps, read as
    the environment keeps an executed trajectory (``kept`` evenly spaced states)."""
    from wmrl_libero.world_models.checkpoint import load_bundle
    from wmrl_libero.world_models.progress import prefix_progress

    scorer = load_bundle(checkpoint).scorer
    out = [
        prefix_progress(scorer, states, g.key.task, fraction, g.max_steps, kept=kept)
        for g in groups
        for states in g.states
    ]
    return np.asarray(out, dtype=np.float64)


def _row(name: str, groups: list[str], labels: np.ndarray, scores: np.ndarray, **extra) -> dict:
    w = within_group_auroc(groups, labels, scores)
    lo, hi = bootstrap_group_interval(groups, labels, scores)
    return dict(scorer=name, auroc=w.value, ci95=[lo, hi], mixed_groups=w.groups, pairs=w.n, **extra)


def table_markdown(result: dict) -> str:
    """The results page's table: one row per scorer."""
    lines = [
        "| scorer | within-group AUROC | 95% bootstrap over groups | mixed groups | pairs | simulation saved |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lo, hi = r["ci95"]
        lines.append(
            f"| {r['scorer']} | {r['auroc']:.3f} | [{lo:.2f}, {hi:.2f}] | {r['mixed_groups']} | {r['pairs']} | {r['saved']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _fit_and_eval_groups(groups: Sequence[Group], out: Path) -> tuple[list[Group], list[Group]]:
    """The fitting and held-out groups; an error when either is missing or a group is from the transfer split."""
    fit = [g for g in groups if g.key.role == "fit"]
    ev = [g for g in groups if g.key.role == "eval"]
    if not fit or not ev:
        raise ValueError(f"{len(fit)} fitting and {len(ev)} held-out groups in {out}; run `collect` first")
    for g in groups:
        if g.key.init_state in TRANSFER_HELDOUT:
            raise ValueError(f"{g.key.name} is from the transfer experiment's held-out split; remove it from {out}")
    return fit, ev


def _scorer_rows(
    ev: Sequence[Group],
    gnames: list[str],
    labels: np.ndarray,
    *,
    refit_path: Path,
    base: str,
    shipped: str,
    fractions: Sequence[float],
    log: Callable[[str], None],
) -> list[dict]:
    """One row per scorer of the held-out groups: imagination (refit, shipped), then progress (full, prefixes)."""
    lengths = np.concatenate([g.steps for g in ev])
    horizon = max(g.max_steps for g in ev)  # the episode limit the groups ran under
    rows = []
    t0 = time.process_time()
    rows.append(
        _row(
            "imagination, refit on the fitting groups",
            gnames,
            labels,
            imagination_scores(refit_path, ev, base),
            saved=1.0,
        )
    )
    log(f"refit imagination scored in {time.process_time() - t0:.0f} CPU-s")
    rows.append(_row("imagination, shipped", gnames, labels, imagination_scores(shipped, ev, base), saved=1.0))
    rows.append(_row("progress, full episode", gnames, labels, progress_scores(shipped, ev), saved=0.0))
    # the refit scorer on the real states: separates a scorer that cannot rank from dynamics that drift
    rows.append(
        _row("progress of the refit scorer, full episode", gnames, labels, progress_scores(refit_path, ev), saved=0.0)
    )
    for f in fractions:
        part = progress_scores(shipped, ev, f)
        saved = simulation_saved(lengths, f, horizon)
        rows.append(_row(f"progress, first {f:g} of the episode limit", gnames, labels, part, fraction=f, saved=saved))
        rows.append(
            _row(
                f"progress of the refit scorer, first {f:g}",
                gnames,
                labels,
                progress_scores(refit_path, ev, f),
                fraction=f,
                saved=saved,
            )
        )
        # an episode that ended inside the prefix ended in success (LIBERO stops only then)
        ended = np.asarray([n <= prefix_steps(n, f, horizon) and n < horizon for n in lengths])
        rows.append(
            _row(
                f"progress, first {f:g}, success known when it ended",
                gnames,
                labels,
                part + 2.0 * ended,
                fraction=f,
                saved=saved,
            )
        )
    return rows


def _data_summary(
    out: Path, groups: Sequence[Group], fit: Sequence[Group], ev: Sequence[Group], gnames: list[str], labels: np.ndarray
) -> dict:
    """The groups' counts, init states, successes and simulation cost, for ``group_ranking.json``."""
    return dict(
        fit_groups=len(fit),
        fit_episodes=int(sum(len(g.success) for g in fit)),
        fit_successes=int(sum(g.success.sum() for g in fit)),
        fit_init_states=sorted({g.key.init_state for g in fit}),
        eval_groups=len(ev),
        eval_episodes=int(labels.size),
        eval_successes=int(labels.sum()),
        eval_init_states=sorted({g.key.init_state for g in ev}),
        tasks=sorted({g.key.task for g in groups}),
        eval_group_counts=mixed_groups(gnames, labels),
        fit_group_counts=mixed_groups(
            [g.key.name for g in fit for _ in g.success], np.concatenate([g.success for g in fit])
        ),
        per_task_success={
            str(t): [
                int(sum(g.success.sum() for g in groups if g.key.task == t)),
                int(sum(len(g.success) for g in groups if g.key.task == t)),
            ]
            for t in sorted({g.key.task for g in groups})
        },
        cpu_s_per_episode=float(
            np.mean(np.concatenate([np.load(p)["cpu_s"] for p in sorted(out.glob("t*_i*_*.npz"))]))
        ),
        mean_steps=float(np.mean(np.concatenate([g.steps for g in groups]))),
    )


def analyse(
    out: Path,
    *,
    base: str,
    shipped: str,
    fractions: Sequence[float],
    dynamics_iterations: int,
    scorer_iterations: int,
    rollout_chunks: int,
    gate: float = 0.65,
    log: Callable[[str], None] = print,
) -> dict:
    groups = load_groups(out)
    fit, ev = _fit_and_eval_groups(groups, out)
    gnames = [g.key.name for g in ev for _ in g.success]
    labels = np.concatenate([g.success for g in ev])
    refit_path = out / "refit_wm.pt"
    fit_names = sorted(g.key.name for g in fit)
    if not refit_path.exists() or _refit_groups(refit_path) != fit_names:
        refit_imagination(
            fit,
            refit_path,
            dynamics_iterations=dynamics_iterations,
            scorer_iterations=scorer_iterations,
            rollout_chunks=rollout_chunks,
            log=log,
        )
    rows = _scorer_rows(
        ev, gnames, labels, refit_path=refit_path, base=base, shipped=shipped, fractions=fractions, log=log
    )
    result = dict(**_data_summary(out, groups, fit, ev, gnames, labels), gate=gate, rows=rows)
    result["gate_passed"] = bool(rows[0]["auroc"] >= gate)
    (out / "group_ranking.json").write_text(json.dumps(result, indent=1))
    (out / "group_ranking_table.md").write_text(table_markdown(result))
    for r in rows:
        log(
            f"{r['scorer']}: AUROC {r['auroc']:.3f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] ({r['mixed_groups']} groups, {r['pairs']} pairs), saved {r['saved']:.2f}"
        )
    return result


# --------------------------------------------------------------------------- command line


def _logger(path: str | None) -> Callable[[str], None]:
    def log(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        if path:
            with open(path, "a") as fh:
                fh.write(line + "\n")

    return log


def main(argv: Sequence[str] | None = None, prog: str = "wmrl experiment libero-group-ranking") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="simulate the base policy's groups, one .npz per group (resumable)")
    c.add_argument("--out", default="runs/libero_groups", help="folder of the groups (default %(default)s)")
    c.add_argument("--tasks", default="0,4,6,8", help="LIBERO-10 tasks (default %(default)s: base success 40-60%%)")
    c.add_argument("--fit-init", default="0-29", help="init states of the fitting groups (default %(default)s)")
    c.add_argument("--eval-init", default="30-39", help="init states of the held-out groups (default %(default)s)")
    c.add_argument("--fit-per-eval", type=int, default=2, help="fitting groups per held-out group in each round")
    c.add_argument("--group-size", type=int, default=8, help="rollouts per group (the transfer run's GRPO group)")
    c.add_argument("--max-groups", type=int, default=0, help="simulate at most this many groups of the plan (0: all)")
    c.add_argument("--max-steps", type=int, default=HORIZON, help="episode limit (LIBERO-10: 520)")
    c.add_argument("--base", default=BASE, help="the base policy (default the shipped one)")
    c.add_argument("--workers", type=int, default=2, help="simulator worker processes")
    c.add_argument("--seed", type=int, default=0, help="noise seed of the rollouts")
    c.add_argument("--log", default=None, help="also append progress lines to this file")
    a = sub.add_parser(
        "analyse", help="refit imagination on the fitting groups; AUROC of every scorer on held-out groups"
    )
    a.add_argument("--out", default="runs/libero_groups")
    a.add_argument("--base", default=BASE)
    a.add_argument("--wm", default=SHIPPED_WM, help="the shipped world model (imagination and progress scorer)")
    a.add_argument("--fractions", default="0.25,0.5,0.75", help="simulated fractions of the episode limit")
    a.add_argument("--dynamics-iterations", type=int, default=1000)
    a.add_argument("--scorer-iterations", type=int, default=1500)
    a.add_argument("--rollout-chunks", type=int, default=8)
    a.add_argument("--log", default=None)
    args = ap.parse_args(argv)
    log = _logger(args.log)
    try:
        if args.cmd == "collect":
            plan = group_plan(
                parse_int_ranges(args.tasks),
                parse_int_ranges(args.fit_init),
                parse_int_ranges(args.eval_init),
                args.fit_per_eval,
            )
            if args.max_groups:
                plan = plan[: args.max_groups]
            collect(
                Path(args.out),
                plan,
                group_size=args.group_size,
                base=args.base,
                workers=args.workers,
                seed=args.seed,
                max_steps=args.max_steps,
                log=log,
            )
        else:
            analyse(
                Path(args.out),
                base=args.base,
                shipped=args.wm,
                fractions=[float(x) for x in args.fractions.split(",")],
                dynamics_iterations=args.dynamics_iterations,
                scorer_iterations=args.scorer_iterations,
                rollout_chunks=args.rollout_chunks,
                log=log,
            )
    except (ValueError, FileNotFoundError) as exc:
        ap.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Quality of the LIBERO world models on held-out real episodes (``wmrl-libero wm-report``).

Measured: AUROC, calibration (expected calibration error, Brier) of the predicted success;
Spearman rank correlation within groups of rollouts from the same init state (what GRPO's
advantages need); the dynamics model's state error over the horizon with its ensemble
disagreement; speed (imagined against simulated episodes per second).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_libero.world_models.features import PROPRIO_DIM, Episode

__all__ = [
    "auroc",
    "auroc_interval",
    "expected_calibration_error",
    "brier_score",
    "within_group_spearman",
    "within_task_auroc",
    "horizon_errors",
    "per_task",
    "quality_report",
    "report_markdown",
]


def auroc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """Area under the ROC curve (:func:`wmrl_core.experiments.stats.auroc`): ``P(score of a
    success > score of a failure)`` (ties 1/2); NaN with one class only."""
    from wmrl_core.experiments.stats import auroc as _auroc

    return _auroc(labels, scores)


def auroc_interval(
    labels: Sequence[bool], scores: Sequence[float], *, level: float = 0.95, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the AUROC over episodes: resample the episodes with
    replacement, ``AUROC*_b`` for each resample holding both classes, and return the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles; (NaN, NaN) with one class only.

    Episodes from the same init state are not independent, so with few groups the true
    uncertainty is wider still."""
    y, p = np.asarray(labels, dtype=bool), np.asarray(scores, dtype=np.float64)
    if y.all() or not y.any():
        return float("nan"), float("nan")
    from scipy.stats import rankdata

    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        i = rng.integers(0, len(y), len(y))
        yi, n_pos = y[i], int(y[i].sum())
        if 0 < n_pos < len(i):  # Mann-Whitney: AUROC = (rank sum of successes - n1(n1+1)/2) / (n1 n0)
            ranks = rankdata(p[i])
            draws.append((ranks[yi].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * (len(i) - n_pos)))
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def within_task_auroc(tasks: Sequence[Any], labels: Sequence[bool], scores: Sequence[float]) -> tuple[float, int]:
    """(``P(score of a success > score of a failure of the same task)``, ties 1/2; the number of
    such pairs): :func:`wmrl_core.experiments.stats.within_group_auroc`. What GRPO uses of a world
    model is its ranking within a task's group, so a model whose level differs between tasks can
    rank well here and poorly in the pooled AUROC; NaN without a task that has both classes."""
    from wmrl_core.experiments.stats import within_group_auroc

    res = within_group_auroc(tasks, labels, scores)
    return res.value, res.n


def add_within_task_auroc(report: dict[str, Any]) -> dict[str, Any]:
    """Add ``auroc_within_task`` to each model of a :func:`quality_report` from its ``per_episode``
    predictions (also for a report written before this field existed)."""
    episodes = report["per_episode"]
    tasks, y = [e["task"] for e in episodes], [e["success"] for e in episodes]
    for model in ("imagination", "scorer_on_real_final_state", "progress_scorer"):
        report[model]["auroc_within_task"] = within_task_auroc(tasks, y, [e[model] for e in episodes])
    return report


def expected_calibration_error(labels: Sequence[bool], probs: Sequence[float], bins: int = 10) -> float:
    """``ECE = sum_b (n_b / N) |mean(y in b) - mean(p in b)|`` over ``bins`` equal-width bins of p."""
    y, p = np.asarray(labels, dtype=np.float64), np.clip(np.asarray(probs, dtype=np.float64), 0, 1)
    which = np.minimum((p * bins).astype(int), bins - 1)
    return float(
        sum(
            abs(y[which == b].mean() - p[which == b].mean()) * (which == b).mean()
            for b in range(bins)
            if np.any(which == b)
        )
    )


def brier_score(labels: Sequence[bool], probs: Sequence[float]) -> float:
    """``mean((p - y)^2)``."""
    return float(np.mean((np.asarray(probs, dtype=np.float64) - np.asarray(labels, dtype=np.float64)) ** 2))


def within_group_spearman(groups: Sequence[Any], truth: Sequence[float], scores: Sequence[float]) -> tuple[float, int]:
    """(mean Spearman rho between ``scores`` and ``truth`` within each group, groups used):
    :func:`wmrl_core.experiments.stats.within_group_spearman`. Groups whose truth is constant are
    skipped (with binary success only groups mixing successes and failures count); constant
    scores in a mixed group count as rho 0 (they rank nothing)."""
    from wmrl_core.experiments.stats import within_group_spearman as _spearman

    res = _spearman(groups, scores, truth)
    return res.value, res.groups


def horizon_errors(
    imagined: np.ndarray,
    episodes: Sequence[Episode],
    chunk: int,
    state_std: np.ndarray,
    horizons: Sequence[int],
    disagreement: np.ndarray,
) -> list[dict[str, float]]:
    """Per horizon ``h`` (control steps): mean end-effector position error (m), mean normalised
    RMSE over the task's state dimensions, mean ensemble disagreement, over the episodes that
    last ``h`` steps. ``imagined`` is (B, C+1, D) at chunk boundaries."""
    rows = []
    for h in horizons:
        c = h // chunk
        eef, nrmse, dis, n = [], [], [], 0
        for i, e in enumerate(episodes):
            if c * chunk >= len(e.states) or c >= imagined.shape[1]:
                continue
            real, pred = e.states[c * chunk], imagined[i, c]
            d = PROPRIO_DIM + e.object_len
            eef.append(float(np.linalg.norm(pred[:3] - real[:3])))
            nrmse.append(float(np.sqrt(np.mean(((pred[:d] - real[:d]) / state_std[:d]) ** 2))))
            dis.append(float(disagreement[i, max(c - 1, 0)]))
            n += 1
        if n:
            rows.append(
                dict(
                    horizon=h,
                    episodes=n,
                    eef_error_m=float(np.mean(eef)),
                    state_nrmse=float(np.mean(nrmse)),
                    disagreement=float(np.mean(dis)),
                )
            )
    return rows


def per_task(
    task_of: Sequence[int],
    labels: Sequence[bool],
    groups: Sequence[Any],
    scores: dict[str, Sequence[float]],
) -> list[dict[str, Any]]:
    """Per task: episodes, successes, and for each named score its AUROC with a bootstrap
    interval (:func:`auroc_interval`) and its mean Spearman within groups (with the count)."""
    task_of, y = np.asarray(task_of), np.asarray(labels, dtype=bool)
    rows = []
    for t in sorted(set(task_of.tolist())):
        m = task_of == t
        row: dict[str, Any] = {"task": int(t), "episodes": int(m.sum()), "successes": int(y[m].sum())}
        for name, values in scores.items():
            v = np.asarray(values, dtype=np.float64)[m]
            row[name] = dict(
                auroc=auroc(y[m], v),
                auroc_interval=auroc_interval(y[m], v),
                spearman_within_group=within_group_spearman([g for g, k in zip(groups, m) if k], y[m], v),
            )
        rows.append(row)
    return rows


def _tasks_for(episodes: Sequence[Episode], suite: str):
    from wmrl_core.types import Task

    return [
        Task(
            id=f"{suite}/{e.task_index}/{e.init_state}",
            data={"suite": suite, "task_index": e.task_index, "init_state": e.init_state},
        )
        for e in episodes
    ]


def quality_report(
    checkpoint: str,
    heldout_paths: Sequence[str],
    *,
    horizons: Sequence[int] = (4, 20, 52, 100, 200, 300),
    sim_episodes: int = 2,
    vla_batch: int = 64,
    log=print,
) -> dict[str, Any]:
    """Every figure of the report, as a dict (see the module docstring)."""
    from wmrl_libero.world_models.imagination import ImaginationWorldModel

    wm = ImaginationWorldModel(checkpoint=checkpoint)
    bundle = wm.bundle
    episodes = _heldout_episodes(bundle, heldout_paths)
    tasks = _tasks_for(episodes, bundle.suite)
    for e in episodes:  # start states (the simulator's, after settling), not outcomes
        bundle.initial_states.setdefault((e.task_index, e.init_state), e.states[0])
    y = np.array([e.success for e in episodes])
    groups = [(e.task_index, e.init_state) for e in episodes]
    out: dict[str, Any] = {
        "heldout_init_states_present": sorted({e.init_state for e in episodes}),
        "checkpoint": str(checkpoint),
        "heldout_files": list(map(str, heldout_paths)),
        "episodes": len(episodes),
        "successes": int(y.sum()),
        "groups": len(set(groups)),
        "observations": bundle.meta.get("observations"),
        "train": bundle.meta,
    }

    log(f"imagining {len(episodes)} held-out episodes")
    out["imagination"], pred = _imagination_quality(wm, tasks, episodes, y, groups, horizons)
    out["scorer_on_real_final_state"], p_real = _final_state_quality(bundle, episodes, y)
    out["progress_scorer"], pot = _progress_quality(bundle, episodes, y, groups)
    out["progress_scorer"]["episodes_per_s"] = _time_progress(checkpoint, tasks, episodes)
    out["imagination"]["auroc_interval"] = auroc_interval(y, pred)
    out["scorer_on_real_final_state"]["auroc_interval"] = auroc_interval(y, p_real)
    out["progress_scorer"]["auroc_interval"] = auroc_interval(y, pot)
    out["per_episode"] = [  # so that any subset (e.g. the tasks of an older checkpoint) can be re-scored
        dict(
            task=e.task_index,
            init_state=e.init_state,
            rollout=e.rollout,
            success=bool(e.success),
            imagination=float(a),
            scorer_on_real_final_state=float(b),
            progress_scorer=float(c),
        )
        for e, a, b, c in zip(episodes, pred, p_real, pot)
    ]
    add_within_task_auroc(out)
    out["per_task"] = per_task(
        [e.task_index for e in episodes],
        y,
        groups,
        {"imagination": pred, "scorer_on_real_final_state": p_real, "progress_scorer": pot},
    )
    out["imagination"].update(_small_vla_speed(wm, tasks, vla_batch))
    if sim_episodes:
        out.update(_simulator_speed(bundle.suite, tasks, episodes, sim_episodes))
    return out


def _heldout_episodes(bundle, heldout_paths: Sequence[str]) -> list[Episode]:
    """The episodes of ``heldout_paths`` from the init states the checkpoint held out of training."""
    from wmrl_libero.world_models.features import load_episodes

    heldout_set = set(bundle.meta.get("heldout_init_states", range(40, 50)))
    episodes = [e for e in load_episodes(heldout_paths, bundle.object_dim) if e.init_state in heldout_set]
    if not episodes:
        raise ValueError("no held-out episodes (init states 40-49) in the given files")
    return episodes


def _imagination_quality(wm, tasks, episodes, y: np.ndarray, groups, horizons) -> tuple[dict[str, Any], np.ndarray]:
    """Imagination's figures (and its predicted successes): every held-out episode's recorded
    actions, open loop, from its recorded start."""
    bundle = wm.bundle
    start = time.perf_counter()
    ep = wm.imagine(tasks, [e.actions for e in episodes])
    imagine_s = time.perf_counter() - start
    pred = np.array([o.score for o in wm.predict(tasks, [e.actions for e in episodes])])
    figures = dict(
        auroc=auroc(y, pred),
        ece=expected_calibration_error(y, pred),
        brier=brier_score(y, pred),
        base_rate_brier=brier_score(y, np.full(len(y), y.mean())),
        spearman_within_group=within_group_spearman(groups, y, pred),
        cut_fraction=float(ep.cut.mean()),
        imagined_success_fraction=float(ep.succeeded.mean()),
        mean_imagined_steps=float(ep.steps.mean()),
        horizon=horizon_errors(
            ep.states, episodes, bundle.dynamics.chunk, bundle.dynamics.state_std.numpy(), horizons, ep.disagreement
        ),
        episodes_per_s_open_loop=len(episodes) / imagine_s,
    )
    return figures, pred


def _final_state_quality(bundle, episodes, y: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
    """The scorer alone on the real final state (how much of the error is the dynamics'), and
    its success probabilities."""
    import torch

    with torch.no_grad():
        final = torch.as_tensor(np.stack([e.states[-1] for e in episodes]))
        p_real = bundle.scorer.success_probability(final, torch.as_tensor([e.task_index for e in episodes])).numpy()
    figures = dict(auroc=auroc(y, p_real), ece=expected_calibration_error(y, p_real), brier=brier_score(y, p_real))
    return figures, p_real


def _progress_quality(bundle, episodes, y: np.ndarray, groups) -> tuple[dict[str, Any], list[float]]:
    """The executed-trajectory progress scorer (potential-style), with the peak for comparison,
    and its scores."""
    from wmrl_libero.world_models.progress import trajectory_progress

    pot, peak = [], []
    for e in episodes:
        s, p = trajectory_progress(bundle.scorer, e.states, e.task_index)
        pot.append(s)
        peak.append(float(p.max()))
    figures = dict(
        auroc=auroc(y, pot),
        spearman_within_group=within_group_spearman(groups, y, pot),
        peak_auroc=auroc(y, peak),
        peak_spearman_within_group=within_group_spearman(groups, y, peak),
    )
    return figures, pot


def _small_vla_speed(wm, tasks, vla_batch: int) -> dict[str, Any]:
    """Closed-loop imagination speed on the small VLA's solutions (random weights: speed only), batched."""
    import torch

    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    torch.manual_seed(0)
    policy = SmallVLAPolicy(max_steps=wm.horizon)
    vla_tasks = (tasks * (vla_batch // len(tasks) + 1))[:vla_batch]
    rollouts = policy.generate(vla_tasks, 1)
    start = time.perf_counter()
    wm.predict(vla_tasks, rollouts.solutions)
    return {
        "episodes_per_s_small_vla": vla_batch / (time.perf_counter() - start),
        "small_vla_batch": vla_batch,
        "horizon_steps": wm.horizon,
    }


def _simulator_speed(suite: str, tasks, episodes, sim_episodes: int) -> dict[str, Any]:
    """Simulated episodes per second: the first ``sim_episodes`` held-out episodes replayed in
    MuJoCo, after one untimed warm-up episode that builds the simulator."""
    from wmrl_libero.environment import LiberoEnvironment

    out: dict[str, Any] = {}
    env = LiberoEnvironment(suite, num_workers=0)
    chosen = list(range(min(sim_episodes, len(episodes))))
    env.execute([tasks[chosen[0]]], [episodes[chosen[0]].actions])  # warm-up: builds the simulator
    start = time.perf_counter()
    env.execute([tasks[i] for i in chosen], [episodes[i].actions for i in chosen])
    out["simulated_episodes_per_s"] = len(chosen) / (time.perf_counter() - start)
    out["simulated_episode_note"] = (
        f"{len(chosen)} held-out episodes replayed open loop until success or the "
        f"{env.max_episode_steps}-step limit, physics only, in-process"
    )
    env.close()
    return out


def _time_progress(checkpoint: str, tasks, episodes) -> float:
    from wmrl_core.types import Outcome
    from wmrl_libero.world_models.progress import TrajectoryProgressWorldModel

    wm = TrajectoryProgressWorldModel(checkpoint=checkpoint)
    outcomes = [
        Outcome(
            score=float(e.success),
            info={
                "trajectory": {
                    "proprio": e.states[:, :PROPRIO_DIM],
                    "object_state": e.states[:, PROPRIO_DIM : PROPRIO_DIM + e.object_len],
                }
            },
        )
        for e in episodes
    ]
    start = time.perf_counter()
    wm.predict_from_outcomes(tasks, [None] * len(tasks), outcomes)
    return len(tasks) / (time.perf_counter() - start)


def _f(x: float) -> str:
    return "n/a" if x != x else f"{x:.3f}"


def _ci(m: dict[str, Any]) -> str:
    lo, hi = m.get("auroc_interval", (float("nan"), float("nan")))
    return "" if lo != lo else f" [{lo:.2f}, {hi:.2f}]"


def _within(m: dict[str, Any]) -> str:
    value, pairs = m.get("auroc_within_task", (float("nan"), 0))
    return f"{_f(value)} ({pairs})"


def report_markdown(r: dict[str, Any], command: str) -> str:
    """The Markdown page of a :func:`quality_report` ``r``, made by ``command``."""
    im, pr, sc = r["imagination"], r["progress_scorer"], r["scorer_on_real_final_state"]
    lines = _header_lines(r, command)
    lines += _prediction_lines(im, pr, sc)
    lines += _dynamics_lines(im)
    if r.get("per_task"):
        lines += _per_task_lines(r["per_task"])
    lines += _speed_lines(r, im, pr)
    return "\n".join(lines) + "\n"


def _header_lines(r: dict[str, Any], command: str) -> list[str]:
    """Title, observations, training and held-out data, and the command that made the report."""
    t = r["train"]
    return [
        "# LIBERO world models: quality on held-out init states "
        f"({', '.join(map(str, r.get('heldout_init_states_present', [])))})",
        "",
        f"Observations: {r['observations']}. CPU, one training seed ({t.get('seed')}): an anecdote, not a "
        "learning claim.",
        "",
        f"Training: {t['train_episodes']} episodes from init states 0-39 ({t['train_successes']} successes); "
        f"held out: {r['episodes']} episodes ({r['successes']} successes) in {r['groups']} groups "
        "(task, init state).",
        "",
        "```bash",
        command,
        "```",
        "",
    ]


def _prediction_lines(im: dict[str, Any], pr: dict[str, Any], sc: dict[str, Any]) -> list[str]:
    """The predicted-success table of the three models, and imagination's guards. The within-task AUROC
    column appears when the report measured it (reports of one held-out task file did not)."""
    within = any("auroc_within_task" in m for m in (im, pr, sc))
    rows = [
        [
            f"imagination (recorded actions replayed in the ensemble, {im['horizon_steps']} steps)",
            f"{_f(im['auroc'])}{_ci(im)}",
            _within(im),
            _f(im["ece"]),
            f"{_f(im['brier'])} ({_f(im['base_rate_brier'])})",
            f"{_f(im['spearman_within_group'][0])} ({im['spearman_within_group'][1]})",
        ],
        [
            "scorer on the real final state (no dynamics)",
            f"{_f(sc['auroc'])}{_ci(sc)}",
            _within(sc),
            _f(sc["ece"]),
            _f(sc["brier"]),
            "",
        ],
        [
            "progress scorer, potential-style (last 3 - first 3 of 8 states)",
            f"{_f(pr['auroc'])}{_ci(pr)}",
            _within(pr),
            "",
            "",
            f"{_f(pr['spearman_within_group'][0])} ({pr['spearman_within_group'][1]})",
        ],
        [
            "progress scorer, peak (max of 8; for comparison)",
            _f(pr["peak_auroc"]),
            "",
            "",
            "",
            f"{_f(pr['peak_spearman_within_group'][0])} ({pr['peak_spearman_within_group'][1]})",
        ],
    ]
    header = ["model", "AUROC", "AUROC within task (pairs)", "ECE", "Brier (base-rate Brier)"]
    header.append("Spearman within group (groups)")
    if not within:
        header.pop(2)
        rows = [row[:2] + row[3:] for row in rows]
    return [
        "## Predicted success",
        "",
        f"| {' | '.join(header)} |",
        "|---|" + "---:|" * (len(header) - 1),
        *("|" + "|".join(f" {cell} " if cell else " " for cell in row) + "|" for row in rows),
        "",
        f"Imagination guards: {100 * im['cut_fraction']:.0f}% of imagined episodes were cut by ensemble "
        f"disagreement; {100 * im['imagined_success_fraction']:.0f}% ended by the smoothed success rule; "
        f"{im['mean_imagined_steps']:.0f} imagined steps on average.",
        "",
    ]


def _dynamics_lines(im: dict[str, Any]) -> list[str]:
    """The dynamics model's state error over the horizon."""
    lines = [
        "## Dynamics: state error over the horizon (open loop, recorded actions)",
        "",
        "| horizon (steps) | episodes | end-effector error (m) | state RMSE (train std units) | ensemble disagreement |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {h['horizon']} | {h['episodes']} | {h['eef_error_m']:.4f} | {h['state_nrmse']:.3f} | "
        f"{h['disagreement']:.3f} |"
        for h in im["horizon"]
    ]
    return lines


def _per_task_lines(per_task_rows: list[dict[str, Any]]) -> list[str]:
    """The per-task table: AUROC with its bootstrap interval and Spearman within group, per model."""
    lines = [
        "",
        "## Per task (AUROC [95% bootstrap interval over episodes]; Spearman within group (groups))",
        "",
        "Few episodes per task: the intervals are wide, and episodes from one init state are not "
        "independent, so the true uncertainty is wider still. n/a: one class only.",
        "",
        "| task | episodes | successes | imagination AUROC | scorer on real final state AUROC | "
        "progress scorer AUROC | imagination Spearman | progress Spearman |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in per_task_rows:
        i, f, g = row["imagination"], row["scorer_on_real_final_state"], row["progress_scorer"]
        lines.append(
            f"| {row['task']} | {row['episodes']} | {row['successes']} | {_f(i['auroc'])}{_ci(i)} | "
            f"{_f(f['auroc'])}{_ci(f)} | {_f(g['auroc'])}{_ci(g)} | "
            f"{_f(i['spearman_within_group'][0])} ({i['spearman_within_group'][1]}) | "
            f"{_f(g['spearman_within_group'][0])} ({g['spearman_within_group'][1]}) |"
        )
    return lines


def _speed_lines(r: dict[str, Any], im: dict[str, Any], pr: dict[str, Any]) -> list[str]:
    """Episodes per second of imagination, the progress scorer and (when measured) the simulator."""
    lines = [
        "",
        "## Speed (this 2-core shared CPU)",
        "",
        "| what | episodes/s |",
        "|---|---:|",
        f"| imagination, recorded action arrays, batch of {r['episodes']} | {im['episodes_per_s_open_loop']:.1f} |",
        f"| imagination, small VLA closed loop, batch of {im['small_vla_batch']} | "
        f"{im['episodes_per_s_small_vla']:.1f} |",
        f"| progress scorer on executed trajectories | {pr['episodes_per_s']:.0f} |",
    ]
    if "simulated_episodes_per_s" in r:
        lines.append(f"| MuJoCo simulation ({r['simulated_episode_note']}) | {r['simulated_episodes_per_s']:.3f} |")
    return lines


def write_report(r: dict[str, Any], out_dir: str | Path, command: str, name: str = "world_models") -> Path:
    """Write ``NAME.json`` (the record, with the ``command`` that made it) and ``NAME.md`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps({**r, "command": command}, indent=1, default=str))
    return write_page(out_dir / f"{name}.json", out_dir)


def write_page(record: str | Path, out_dir: str | Path) -> Path:
    """Write the page of a :func:`write_report` record into ``out_dir`` (same file stem), from the record
    alone: how a committed report is rebuilt without its checkpoint and held-out episodes.

    :raises ValueError: naming the record, if it is not one :func:`write_report` wrote (no ``command``, or
        a key the page needs missing).
    """
    from wmrl_core.experiments.report import page_from_record

    record = Path(record)
    path = Path(out_dir) / f"{record.stem}.md"
    page_from_record(record, path, _page_of_record, "a report written by wmrl-libero wm-report")
    return path


def _page_of_record(r: dict[str, Any]) -> str:
    if "command" not in r:
        raise ValueError("it names no 'command'")
    return report_markdown(r, r["command"])

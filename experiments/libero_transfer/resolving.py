"""LIBERO-Long transfer, sized to resolve the paper's effect (pre-registered).

The pre-registration, committed before the first seed: ``PREREGISTRATION_RESOLVING.md`` beside this file.
Arms (all from ``--base``, ``configs/libero/libero_long.yaml``, the same steps, batch, group, lr and KL):

* ``base``: no RL; also re-evaluated under fresh evaluation noise (the evaluation's noise, measured);
* ``noise_control``: every rollout's reward i.i.d. U(0, 1) (imagined rollouts: the simulation would buy
  nothing for a reward that ignores it): what drift and evaluation noise give any arm;
* ``real``: GRPO on the sparse success, every group simulated;
* ``wmrl-progress``: the paper's arm, every group simulated, progress calibrated and fused against the
  anchors' (half the groups) sparse success;
* ``raw-progress``: GRPO on the raw progress score of every (fully simulated) rollout: no anchors,
  no calibration, no fusion (the paper's "raw world model" row);
* ``wmrl-partial-progress``: ``wmrl-progress`` with the non-anchor rollouts simulated only for the first
  ``--fraction`` of the episode limit and scored on that prefix (``libero-partial-progress``); also
  evaluated at ``--floor-step`` (the compute floor);
* ``anchors-only``: GRPO on the sparse success of the WMRL arms' anchor groups alone (half the groups,
  the same anchor draws), the other groups imagined and given weight 0 (``fusion.method=anchors_only``):
  the same anchor simulation as the WMRL arms and no world model, the control that credits the world
  model (a WMRL gain counts only beyond it).

Evaluation: ``--rollouts`` sampled rollouts from each held-out init state (``--heldout-init``, LIBERO's
40-49) of every task, the same noise for every arm of a seed (shared random numbers). Analysis
(:mod:`~experiments.libero_transfer.resolving_analysis`): each arm minus the control, paired by seed, learns
iff the 95% t-interval's lower bound is above zero; the compute floor; the paper's Table 3 beside.

    wmrl experiment libero-transfer-resolving --out runs/libero_transfer_resolving \\
        --archive experiments/libero_transfer/archive/resolving
    ... --quick     # every arm end to end: 1 seed, 2 steps, 2 evaluation episodes (the CI check)

The page (``docs/results/libero/transfer_resolving/``) from the archive alone, byte for byte, as the
experiment's command built it (``--report-only``: see :mod:`~experiments.libero_transfer.transfer`)::

    python -m experiments.libero_transfer.resolving --report-only --archive experiments/libero_transfer/archive/resolving
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.libero_transfer import transfer
from experiments.libero_transfer.resolving_analysis import (
    BASE_HELDOUT_SUCCESS,
    PAPER_TABLE3,
    compute_floor,
    paired_difference,
    select_tasks,
)
from wmrl_core.experiments.report import parse_int_ranges
from wmrl_core.experiments.runner import ArmRun, run_arms
from wmrl_core.experiments.stats import repeated_evaluation_noise
from wmrl_core.metrics import read_metrics

TRAINED = ("real", "wmrl-progress", "raw-progress", "wmrl-partial-progress", "anchors-only")
"""The arms the decision rule judges against ``noise_control``."""
WORLD_MODEL_CREDIT = ("wmrl-progress", "wmrl-partial-progress")
"""The arms whose gain is also read against ``anchors-only`` (what the world model adds to their anchors)."""
EVALUATIONS = ("eval_heldout.json", "eval_heldout_fresh.json", "eval_heldout_floor.json")
BATCH = ("rollout.batch_tasks=4", "rollout.group_size=4")
"""The training batch of every trained arm: 4 groups of 4 rollouts a step (the budget's; see the pre-registration)."""
FRESH_NOISE = 7  # offset of the base's fresh evaluation noise: no arm's evaluation draws from it


def arms(args: argparse.Namespace) -> dict[str, list[str] | None]:
    """Training overrides per arm (``None``: not trained)."""
    return {
        "base": None,
        "noise_control": list(transfer.ARMS["noise_control"] or []),
        "real": list(transfer.ARMS["real"] or []),
        "wmrl-progress": list(transfer.ARMS["wmrl-progress"] or []),
        "raw-progress": ["mode=world_model", "world_model.name=libero-progress"],
        "wmrl-partial-progress": [
            "mode=wmrl",
            "world_model.name=libero-partial-progress",
            "anchors.fraction=0.5",
            f"world_model.kwargs.fraction={args.fraction}",
            f"environment.kwargs.trajectory_states={args.max_episode_steps + 1}",  # every state: anchors' prefixes
            f"checkpoint.at_steps=[{args.floor_step}]",
        ],
        # the WMRL arms' anchor groups alone: imagined non-anchor groups (log-probs, no simulation)
        # scored by noise and weighted 0, so no world-model signal reaches the update
        "anchors-only": [
            "mode=wmrl",
            "fusion.method=anchors_only",
            "anchors.fraction=0.5",
            "world_model.kwargs.noise_scores=true",
        ],
    }


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = transfer.build_parser(prog)
    p.description = __doc__.split("\n")[0]
    base = next(a for a in p._actions if a.dest == "base")
    base.required, base.default = False, "plugins/libero/checkpoints/small_vla_dagger_t0-9_h1024.pt"
    base.help = "base policy checkpoint (default: the shipped one)"
    # relative to the repository root, like --base: an archived arm-seed records the path, and a
    # session on another machine (another absolute root) must find the same settings to resume it
    wm = next(a for a in p._actions if a.dest == "wm")
    wm.default = "plugins/libero/checkpoints/libero_wm_t0-9.pt"
    p.set_defaults(
        arms=",".join(("base", "noise_control", *TRAINED)),
        seeds="0,1,2,3,4,5",
        tasks=",".join(map(str, select_tasks(BASE_HELDOUT_SUCCESS))),
        train_init="",
        rollouts=5,
        steps=24,
        out="runs/libero_transfer_resolving",
        docs="docs/results/libero/transfer_resolving",
        name="transfer_resolving",
    )
    p.add_argument(
        "--fraction",
        type=float,
        default=0.5,
        help="share of the episode limit a non-anchor rollout of wmrl-partial-progress is simulated for",
    )
    p.add_argument(
        "--floor-step",
        type=int,
        default=8,
        help="training step at which wmrl-partial-progress is also evaluated (the compute floor)",
    )
    return p


def parse_args(argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    p = build_parser(prog)
    args = p.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    if args.quick:  # 1 seed, 2 steps, 2 evaluation episodes (1 task x 2 init states x 1 rollout)
        args.seeds, args.steps, args.floor_step = "0", min(args.steps, 2), 1
        args.tasks, args.heldout_init = args.tasks.split(",")[0].split("-")[0], "40,41"
    known = arms(args)
    unknown = set(args.arms) - set(known)
    if unknown:
        p.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(known)}")
    if not 0 < args.floor_step <= args.steps:
        p.error(f"--floor-step must lie in [1, --steps={args.steps}], got {args.floor_step}")
    if not args.quick:  # the pre-registered batch: 4 groups of 4 rollouts a step
        args.override = [*BATCH, *args.override]
    args.user_override = list(args.override)
    args.seeds, args.tasks = parse_int_ranges(args.seeds), parse_int_ranges(args.tasks)
    args.train_init, args.heldout_init = [], parse_int_ranges(args.heldout_init)
    return transfer.add_run_overrides(args)


def _simulator_s_at(run_dir: Path, step: int) -> float:
    """Simulator CPU seconds the ledger charged in training up to ``step`` (cumulative)."""
    records = [r for r in read_metrics(run_dir) if r.get("step") == step and "compute/execution_s" in r]
    return float(records[-1]["compute/execution_s"]) if records else math.nan


def evaluation_plan(args, arm: str, seed: int) -> list[tuple[str, int | None, int]]:
    """The held-out evaluations of one arm-seed: ``(split, training step or None for the last,
    noise seed)``, each written to ``eval_<split>.json``."""
    shared = transfer.evaluation_noise_seed(seed, "heldout")
    plan: list[tuple[str, int | None, int]] = [("heldout", None, shared)]
    if arm == "base":
        plan.append(("heldout_fresh", None, 1_000_003 * seed + FRESH_NOISE))
    if arm == "wmrl-partial-progress":
        plan.append(("heldout_floor", args.floor_step, shared))
    return plan


def evaluate(args, env, run: ArmRun) -> dict[str, Any]:
    """The held-out evaluations of one arm-seed, each written once (``EVALUATIONS``) and reused."""
    arm, seed, run_dir = run.arm.name, run.seed, run.run_dir
    out: dict[str, Any] = {}
    for split, step, noise in evaluation_plan(args, arm, seed):
        path = run_dir / f"eval_{split}.json"
        if not path.exists():
            policy = transfer._policy(args, None if arm == "base" else run_dir, step)
            result = transfer.evaluate_split(
                args, env, policy, label=f"seed {seed} {arm} {split}", inits=args.heldout_init, noise_seed=noise
            )
            if step is not None:
                result["simulator_s"] = _simulator_s_at(run_dir, step)
            run_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(result) + "\n")
        out[split] = json.loads(path.read_text())
    return {"eval": out}


def run_experiment(args: argparse.Namespace) -> dict[str, dict[int, dict[str, Any]]]:
    """Every arm-seed trained and evaluated (or read back): ``{arm: {seed: {"eval", "ledger"}}}``."""
    environment = transfer.EvaluationEnvironment(args)
    results: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in args.arms}

    def on_run(run: ArmRun) -> None:
        results[run.arm.name][run.seed] = {
            "eval": run.record["eval"],
            "ledger": transfer.ledger(run.run_dir, run.arm.train),
        }
        print(f"seed {run.seed} {run.arm.name}: {json.dumps(run.record['eval'])}", flush=True)

    try:
        run_arms(
            args.config,
            {arm: arms(args)[arm] for arm in args.arms},
            seeds=args.seeds,
            runs_dir=Path(args.out),
            overrides=transfer.common_overrides(args),
            evaluate=lambda run: evaluate(args, environment(), run),
            on_run=on_run,
            settings={**transfer.experiment_settings(args), "fraction": args.fraction, "floor_step": args.floor_step},
            archive=Path(args.archive) if args.archive else None,
            archive_files=EVALUATIONS,
            ignore=transfer.WORKER_KEYS,
            progress=True,
        )
    finally:
        environment.close()
    return results


def read_finished(args: argparse.Namespace) -> dict[str, dict[int, dict[str, Any]]]:
    """The arm-seeds already evaluated in ``--archive`` (without one, ``--out``), read from their
    files as :func:`run_experiment` gives them: no config is loaded, nothing trained or simulated."""
    folder = Path(args.archive or args.out)
    trained = arms(args)
    results: dict[str, dict[int, dict[str, Any]]] = {arm: {} for arm in args.arms}
    for seed in args.seeds:
        for arm in args.arms:
            run_dir = folder / f"{arm}-seed{seed}"
            files = [run_dir / f"eval_{split}.json" for split, _, _ in evaluation_plan(args, arm, seed)]
            if not all(path.exists() for path in files):
                continue
            evaluation = {path.stem.removeprefix("eval_"): json.loads(path.read_text()) for path in files}
            results[arm][seed] = {"eval": evaluation, "ledger": transfer.ledger(run_dir, trained[arm] is not None)}
    return results


def _rates(results, arm: str, split: str = "heldout") -> dict[int, float]:
    return {
        s: r["eval"][split]["successes"] / max(r["eval"][split]["episodes"], 1)
        for s, r in results.get(arm, {}).items()
        if split in r["eval"]
    }


def analyse(results: dict[str, dict[int, dict[str, Any]]], seeds_required: int = 6) -> dict[str, Any]:
    """The pre-registered analysis of ``run_experiment``'s results."""
    control = _rates(results, "noise_control")
    learning = {
        arm: paired_difference(_rates(results, arm), control, seeds_required=seeds_required)
        for arm in TRAINED
        if arm in results
    }
    pattern = {
        f"{a} - {b}": paired_difference(_rates(results, a), _rates(results, b), seeds_required=seeds_required)
        for a, b in (
            ("raw-progress", "real"),
            ("wmrl-progress", "raw-progress"),
            ("wmrl-progress", "real"),
            ("wmrl-partial-progress", "wmrl-progress"),
        )
        if a in results and b in results
    }
    credit = {
        f"{arm} - anchors-only": paired_difference(
            _rates(results, arm), _rates(results, "anchors-only"), seeds_required=seeds_required
        )
        for arm in WORLD_MODEL_CREDIT
        if arm in results and "anchors-only" in results
    }
    sim = {arm: {s: r["ledger"]["simulator_s"] for s, r in results[arm].items()} for arm in results}
    partial = results.get("wmrl-partial-progress", {})
    floor = compute_floor(
        real_final=_rates(results, "real"),
        partial_at=_rates(results, "wmrl-partial-progress", "heldout_floor"),
        sim_real=sim.get("real", {}),
        sim_partial_at={
            s: r["eval"]["heldout_floor"]["simulator_s"] for s, r in partial.items() if "heldout_floor" in r["eval"]
        },
        real_learns=learning.get("real", {}).get("above_zero"),
        seeds_required=seeds_required,
    )
    return {
        "rates": {arm: _rates(results, arm) for arm in results},
        "simulator_s": sim,
        "minus_control": learning,
        "pattern": pattern,
        "world_model_credit": credit,
        "evaluation_noise": repeated_evaluation_noise(
            shared=_rates(results, "base"), fresh=_rates(results, "base", "heldout_fresh")
        ),
        "floor": floor,
    }


def _pm(d: dict[str, Any]) -> str:
    if len(d["seeds"]) < 2:  # one difference measures no spread: no interval, rather than one of zero width
        return f"{100 * d['mean']:+.1f} (one seed, no interval)" if d["seeds"] else "-"
    return f"{100 * d['mean']:+.1f} ± {100 * d['ci_half']:.1f} [{100 * d['lower']:+.1f}, {100 * d['upper']:+.1f}]"


def _rate(rates: dict[int, float]) -> str:
    """One arm's held-out success over its seeds: mean ± 95 % t half-width, none for one seed."""
    from wmrl_core.experiments.stats import mean_ci95

    if len(rates) < 2:
        return f"{100 * next(iter(rates.values())):.1f} (one seed, no interval)" if rates else "- (no seed)"
    m, h = mean_ci95(list(rates.values()))
    return f"{100 * m:.1f} ± {100 * h:.1f} ({len(rates)} seeds)"


def _points(x: float, spec: str = ".1f") -> str:
    return "n/a" if math.isnan(x) else format(100 * x, spec)


def per_seed_table(rates: dict[str, dict[int, float]]) -> list[str]:
    """Every seed's held-out success, % (an arm-seed missing a seed shows "-")."""
    seeds = sorted({s for r in rates.values() for s in r})
    lines = [
        "Held-out success per seed, % (the same evaluation noise for every arm of a seed):",
        "",
        "| arm | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "|---|" + "---:|" * len(seeds),
    ]
    for arm, r in rates.items():
        lines.append(f"| {arm} | " + " | ".join(f"{100 * r[s]:.1f}" if s in r else "-" for s in seeds) + " |")
    return lines


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    """The results page: the Table 3 comparison, the decision per arm, the floor, the noise."""
    lines = [
        f"# LIBERO-Long transfer, resolving ({meta['label'] or 'pre-registered run'})",
        "",
        f"```bash\n{meta['command']}\n```",
        "",
        meta["machine"]
        + (
            " (this page rebuilt from the archived arm-seeds with `--report-only`)"
            if meta.get("rebuilt_from_archive")
            else ""
        ),
        "",
    ]
    lines += [
        "| arm | paper Table 3, % | held-out success, % (mean ± 95% t over seeds) | minus control, points | learns | simulator CPU s / seed |",
        "|---|---:|---|---|---|---:|",
    ]
    for arm, rates in result["rates"].items():
        d = result["minus_control"].get(arm)
        sim = result["simulator_s"].get(arm, {})
        lines.append(
            f"| {arm} | {PAPER_TABLE3.get(arm, '-')} | {_rate(rates)} | {_pm(d) if d else '-'} | "
            f"{'-' if not d else {True: 'yes', False: 'no', None: 'incomplete'}[d['above_zero']]} | {sum(sim.values()) / max(len(sim), 1):.0f} |"
        )
    resolution = result["evaluation_noise"]["resolution95"]
    unresolved = [a for a, d in result["minus_control"].items() if d["seeds"] and abs(d["mean"]) < resolution]
    if unresolved:
        lines += [
            "",
            f"Within the measured evaluation noise (|mean difference| < ±{100 * resolution:.1f}): "
            + ", ".join(f"`{a}`" for a in unresolved)
            + "; the experiment does not resolve them.",
        ]
    lines += ["", *per_seed_table(result["rates"])]
    lines += ["", "Paper pattern (sparse GRPO < raw world model < WMRL), paired by seed, points:", ""]
    lines += [f"- {k}: {_pm(d)}" for k, d in result["pattern"].items()]
    lines += [
        "",
        "What the world model adds to the same anchors (WMRL arm minus `anchors-only`, paired by seed), points:",
        "",
    ]
    lines += [f"- {k}: {_pm(d)}" for k, d in result.get("world_model_credit", {}).items()] or ["- not run"]
    n = result["evaluation_noise"]
    f = result["floor"]
    lines += [
        "",
        f"Evaluation noise, measured (base, fresh minus shared noise, per seed): sd {_points(n['sd'])} points; "
        f"resolution of a mean over the seeds ±{_points(n['resolution95'])}.",
        "",
        f"Compute floor: {f['verdict']} (floor checkpoint minus `real`'s final: "
        f"{_pm(f['minus_real']) if f['minus_real']['seeds'] else '-'}; simulation ratio {f['simulation_ratio']:.2f}x).",
        "",
    ]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path, title: str) -> None:
    """Held-out success per arm and each arm minus the control, with 95% t-intervals over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wmrl_core.experiments.stats import mean_ci95

    names = list(result["rates"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    stats = [mean_ci95(list(result["rates"][n].values())) for n in names]
    a.errorbar(range(len(names)), [100 * m for m, _ in stats], yerr=[100 * h for _, h in stats], fmt="o", capsize=4)
    a.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    a.set_ylabel("held-out success, % (95% t over seeds)")
    diffs = [(n, d) for n, d in result["minus_control"].items() if d["seeds"]]
    b.errorbar(
        range(len(diffs)),
        [100 * d["mean"] for _, d in diffs],
        yerr=[100 * d["ci_half"] for _, d in diffs],
        fmt="o",
        capsize=4,
    )
    b.axhline(0, color="grey", lw=0.8)
    b.set_xticks(range(len(diffs)), [n for n, _ in diffs], rotation=30, ha="right", fontsize=8)
    b.set_ylabel("minus noise control, points")
    b.set_title("paired by seed", fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None, prog: str = "wmrl experiment libero-transfer-resolving") -> int:
    args, command, on_machine = transfer.page_arguments(list(sys.argv[1:] if argv is None else argv), parse_args, prog)
    started = time.perf_counter()
    results = read_finished(args) if args.report_only else run_experiment(args)
    if not args.report_only:
        transfer.record_page_command(args.archive, command)
    result = analyse(results, seeds_required=len(args.seeds))
    meta = {
        "label": args.label or ("quick" if args.quick else ""),
        "machine": on_machine,
        # The experiment's command; a page rebuilt from the archive says so instead of timing the rebuild.
        "command": "wmrl experiment libero-transfer-resolving " + " ".join(a for a in command if a != "--report-only"),
        "rebuilt_from_archive": args.report_only,
        "tasks": args.tasks,
        "heldout_init": args.heldout_init,
        "rollouts": args.rollouts,
        "seeds": args.seeds,
        "steps": args.steps,
        "wall_s": None if args.report_only else time.perf_counter() - started,
    }
    docs = Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)
    (docs / f"{args.name}.json").write_text(json.dumps({"meta": meta, **result}, indent=2, default=str) + "\n")
    (docs / f"{args.name}.md").write_text(markdown(result, meta))
    plot(
        result,
        docs / f"{args.name}.png",
        f"LIBERO-Long transfer, resolving{' (' + meta['label'] + ')' if meta['label'] else ''}",
    )
    print((docs / f"{args.name}.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Compute to reach the ``real`` baseline's final score, side by side, with plots.

Runs ``real``, ``world_model``, ``wmrl`` and the two ablations on the same tasks, the same
policy initialisation and several seeds (seeds outer, arms inner, so machine noise hits
every arm alike), then reports per arm: final score (mean, 95% interval over seeds),
compute by stage, compute to reach the ``real`` arm's final score, and the paired
``real / arm`` ratio with its interval. The AutoResearch suite adds ``noise_control``: the
``world_model`` arm's settings on i.i.d. uniform rewards, the control of any held-out gain. Writes ``table.md``, ``summary.json``,
``reward_vs_compute.png`` and ``calibration.png`` under ``--out``.

    wmrl experiment compute-to-target --suite synthetic            # seconds
    wmrl experiment compute-to-target --suite synthetic --sweep    # cost ratio x anchor fraction
    wmrl experiment compute-to-target --suite autoresearch         # real Docker execution (minutes)
    ... --quick                                                   # every arm end to end, tiny budget (CI)
    ... --cache runs/bench/executions.jsonl                       # replay recorded executions (said in the table)

A suite is a dict (config, metric, arms, overrides, quick settings, seeds, and optionally
``report(out, results, summary, spec)`` for what only that domain reports). The ``synthetic``
and AutoResearch suites are this study's (:data:`BUILT_IN_SUITES`); an installed plugin adds its
own through the ``wmrl_register_compute_suites`` hook. A suite is imported only when chosen.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.synthetic.theorem import compute_to_reach, run_curves, write_report
from wmrl_core.experiments.package_data import synthetic_config
from wmrl_core.experiments.report import seed_list
from wmrl_core.metrics import read_metrics

SYNTHETIC_CONFIG = synthetic_config()

# Arms get more steps than the real baseline so that each can reach the baseline's final
# score; the comparison is compute to that score, not score at equal steps.
SYNTHETIC: dict[str, Any] = {
    "config": SYNTHETIC_CONFIG,
    "metric": "eval/true_reward",
    "label": "final true reward",
    "arms": {
        "real": ["mode=real", "steps=60"],
        "world_model": ["mode=world_model", "steps=120"],
        "wmrl": ["mode=wmrl", "steps=120"],
        "wmrl_inverse_variance": ["mode=wmrl", "steps=120", "fusion.method=inverse_variance"],
        # `debias`/`denoise`: the sections' earlier names, kept in arm names that finished runs and archives carry
        "wmrl_no_debias": ["mode=wmrl", "steps=120", "calibration.enabled=false"],
        "wmrl_no_denoise": ["mode=wmrl", "steps=120", "fusion.enabled=false"],
    },
    "overrides": ["logging.tensorboard=false", "checkpoint.every=0", "eval.every=2"],
    "quick": ["eval.every=2", "rollout.batch_tasks=10"],
    "quick_steps": 0.5,
    "seeds": 5,
}
"""The synthetic suite (seconds on a laptop)."""
BUILT_IN_SUITES: dict[str, dict[str, Any] | str] = {
    "synthetic": SYNTHETIC,
    "autoresearch": "experiments.compute_to_target.autoresearch:SUITE",
}
"""The suites of this study: name -> its spec, or ``"module:NAME"`` imported when chosen."""


def suites() -> dict[str, dict[str, Any] | str]:
    """This study's suites and those the installed plugins register (``wmrl_register_compute_suites``)."""
    from wmrl_core.plugins import build_registry

    registered = {spec.name: spec.entry_point for spec in build_registry().compute_suites}
    return {**BUILT_IN_SUITES, **registered}


def load_suite(name: str) -> dict[str, Any]:
    """The spec of suite ``name``, importing it where it is named by entry point.

    :raises SystemExit: the suite's plugin is not installed (naming it).
    """
    spec = suites()[name]
    if not isinstance(spec, str):
        return dict(spec)
    module, _, attr = spec.partition(":")
    try:
        loaded: dict[str, Any] = getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as exc:
        raise SystemExit(f"the {name} suite needs its plugin ({exc.name} is not installed): see its README") from exc
    return loaded


def _scale_steps(arms: dict[str, list[str]], factor: float, default_steps: int) -> dict[str, list[str]]:
    out = {}
    for name, overrides in arms.items():
        steps = next((int(o.split("=")[1]) for o in overrides if o.startswith("steps=")), default_steps)
        out[name] = [o for o in overrides if not o.startswith("steps=")] + [f"steps={max(2, int(steps * factor))}"]
    return out


def plot_calibration(run_dir: Path, path: Path) -> None:
    """Raw and calibrated world-model rewards against real rewards on the anchors of one run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in (run_dir / "anchor_pairs.jsonl").read_text().splitlines() if line]
    if not rows:
        return
    real = np.concatenate([r["real"] for r in rows]).astype(float)
    raw = np.concatenate([r["world_model"] for r in rows]).astype(float)
    cal = np.concatenate([r["calibrated"] for r in rows]).astype(float)
    ok = np.isfinite(real) & np.isfinite(raw) & np.isfinite(cal)
    fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharey=True)
    for ax, pred, title in ((axes[0], raw, "raw world model"), (axes[1], cal, "calibrated (online isotonic)")):
        ax.scatter(pred[ok], real[ok], s=6, alpha=0.4)
        lo, hi = np.nanmin([pred[ok].min(), real[ok].min()]), np.nanmax([pred[ok].max(), real[ok].max()])
        ax.plot([lo, hi], [lo, hi], "k--", lw=1)
        ax.set_title(f"{title}: MSE {np.mean((pred[ok] - real[ok]) ** 2):.4f}")
        ax.set_xlabel("predicted reward")
    axes[0].set_ylabel("real reward (anchors)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cache_note(cache: Path | None) -> str:
    return f"execution cache: on ({cache})" if cache else "execution cache: off"


def run_suite(
    suite: str,
    out: Path,
    seeds: Sequence[int],
    quick: bool,
    only: list[str] | None = None,
    reuse: bool = False,
    cache: Path | None = None,
) -> dict:
    """Every arm of ``suite`` for ``seeds`` seeds; ``cache``: every arm replays and records
    executions there (``environment.cache``, see ``wmrl_core/execution_cache.py``)."""
    spec = load_suite(suite)
    if not Path(spec["config"]).is_file():
        sys.exit(f"{spec['config']} is missing: the {suite} suite needs its plugin's configs (see README)")
    arms, overrides = spec["arms"], list(spec["overrides"])
    if only:
        unknown = set(only) - set(arms)
        if unknown:
            sys.exit(f"unknown arms {sorted(unknown)}; the {suite} suite has {sorted(arms)}")
        arms = {k: v for k, v in arms.items() if k in only}
    if quick:
        arms = _scale_steps(arms, spec["quick_steps"], default_steps=60)
        overrides += spec["quick"]
    if cache:
        overrides.append(f"environment.cache={cache}")
    print(cache_note(cache), flush=True)
    started = time.perf_counter()
    results = run_curves(
        spec["config"], arms, seeds=seeds, out_dir=out, overrides=overrides, metric=spec["metric"], reuse=reuse
    )
    summary = write_report(
        results,
        out,
        title=f"compute to target: {suite} ({cache_note(cache)})",
        fraction=1.0,
        metric_label=spec["label"],
    )
    summary["execution_cache"] = str(cache) if cache else None
    summary["evaluation_se"] = evaluation_noise(out / "runs", spec["metric"])
    if summary["evaluation_se"]["mean"] is not None:
        with (out / "table.md").open("a") as f:
            common = "eval.common_random_numbers=true" in overrides
            f.write("\n" + evaluation_noise_note(summary["evaluation_se"], common) + "\n")
    plot_calibration(out / "runs" / "wmrl-seed0", out / "calibration.png")
    (out / "curves.md").write_text(curves_table(results, spec["label"].replace("final ", "")))
    if "report" in spec:
        spec["report"](out, results, summary, spec)
    summary["machine"] = {
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }
    summary["wall_s"] = time.perf_counter() - started
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def evaluation_noise(runs: Path, metric: str) -> dict:
    """The standard error of one evaluation from sampling solutions (``<metric>_se``, logged by
    every evaluation: ``wmrl_core.trainer.stratified_standard_error``), over every evaluation of
    every run: what a single evaluation's score carries of its own noise."""
    values = [
        r[f"{metric}_se"]
        for run in sorted(runs.glob("*-seed*"))
        for r in read_metrics(run)
        if isinstance(r.get(f"{metric}_se"), (int, float)) and math.isfinite(r[f"{metric}_se"])
    ]
    if not values:
        return {"mean": None, "max": None, "evaluations": 0}
    return {"mean": float(np.mean(values)), "max": float(np.max(values)), "evaluations": len(values)}


def evaluation_noise_note(noise: dict, common_random_numbers: bool) -> str:
    note = (
        f"Evaluation noise: one evaluation's own standard error (sampling of solutions within each task) is "
        f"{noise['mean']:.3f} on average (at most {noise['max']:.3f}, {noise['evaluations']} evaluations)"
    )
    if common_random_numbers:
        note += (
            "; with `eval.common_random_numbers` the evaluations of one seed share their draws, so the "
            "difference between two of them carries less"
        )
    return note + "."


def curves_table(results: dict, label: str) -> str:
    """Every evaluation of every run, so that a reader can see the noise behind the means."""
    lines = [f"| arm | seed | {label} at each evaluation (cumulative compute, s) |", "|---|---|---|"]
    for name, res in results.items():
        for seed, curve in enumerate(res.curves):
            points = " → ".join(f"{score:.3f} ({compute:.0f})" for compute, score in curve)
            lines.append(f"| {name} | {seed} | {points} |")
    return "\n".join(lines) + "\n"


def run_sweep(out: Path, seeds: Sequence[int], quick: bool) -> dict:
    """Measured ``real / wmrl`` compute ratio over execution/generation cost ratio and anchor fraction.

    The *ideal* ratio is what the costs alone allow when WMRL needs as many steps as GRPO:
    :math:`\\frac{BG(g+e)}{BG(g+\\rho e) + w}` with generation ``g`` and execution ``e`` per rollout
    and world-model cost ``w`` per step.
    """
    spec = SYNTHETIC
    cost_ratios = [1, 3, 10] if quick else [1, 3, 10, 30, 100]
    fractions = [0.1, 0.5] if quick else [0.05, 0.1, 0.2, 0.5]
    g, B, G = 0.05, 20, 8
    w_call, w_item = 0.1, 0.001
    measured = np.full((len(cost_ratios), len(fractions)), np.nan)
    ideal = np.zeros_like(measured)
    base_over = [*spec["overrides"], f"policy.kwargs.generation_cost_s={g}"]
    steps = {"real": 30 if quick else 60, "wmrl": 60 if quick else 120}
    for i, ratio in enumerate(cost_ratios):
        e = g * ratio
        over = [*base_over, f"environment.kwargs.execution_cost_s={e}"]
        real = run_curves(
            spec["config"],
            {"real": ["mode=real", f"steps={steps['real']}"]},
            seeds,
            out / "sweep" / f"cost{ratio}",
            over,
            spec["metric"],
        )["real"]
        target = float(np.mean(real.finals))
        for j, rho in enumerate(fractions):
            n_anchor = max(1, round(rho * B))
            ideal[i, j] = B * G * (g + e) / (B * G * g + n_anchor * G * e + w_call + w_item * B * G)
            arm = run_curves(
                spec["config"],
                {"wmrl": ["mode=wmrl", f"steps={steps['wmrl']}", f"anchors.fraction={rho}"]},
                seeds,
                out / "sweep" / f"cost{ratio}-rho{rho}",
                over,
                spec["metric"],
            )["wmrl"]
            reached = [
                (compute_to_reach(r_curve, target), compute_to_reach(a_curve, target))
                for r_curve, a_curve in zip(real.curves, arm.curves)
            ]
            ratios = [base / c for base, c in reached if c and base]
            measured[i, j] = float(np.mean(ratios)) if len(ratios) == len(seeds) else np.nan
    _plot_sweep(cost_ratios, fractions, measured, ideal, out / "sweep.png")
    lines = ["| exec/gen cost | " + " | ".join(f"rho={f}" for f in fractions) + " |", "|---|" + "---|" * len(fractions)]
    for i, ratio in enumerate(cost_ratios):
        cells = [
            ("not reached" if math.isnan(measured[i, j]) else f"{measured[i, j]:.1f}x") + f" (ideal {ideal[i, j]:.1f}x)"
            for j in range(len(fractions))
        ]
        lines.append(f"| {ratio} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    (out / "sweep.md").write_text("# real / wmrl compute to reach real's final true reward\n\n" + table + "\n")
    result = {
        "cost_ratios": cost_ratios,
        "fractions": fractions,
        "measured": measured.tolist(),
        "ideal": ideal.tolist(),
    }
    (out / "sweep.json").write_text(json.dumps(result, indent=2))
    print(table)
    return result


def _plot_sweep(cost_ratios, fractions, measured, ideal, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for j, rho in enumerate(fractions):
        (line,) = ax.plot(cost_ratios, measured[:, j], "o-", label=f"measured, rho={rho}")
        ax.plot(cost_ratios, ideal[:, j], "--", color=line.get_color(), alpha=0.6)
    ax.axhline(1.0, color="black", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("execution cost / generation cost (per rollout)")
    ax.set_ylabel("compute ratio real / wmrl (>1: WMRL pays off)")
    ax.set_title("dashed: ideal ratio from costs alone")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None, prog: str = "wmrl experiment compute-to-target") -> int:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", choices=sorted(suites()), default="synthetic")
    parser.add_argument(
        "--seeds", type=seed_list, default=None, help="seeds, a list or ranges (default: the suite's count, from 0)"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="tiny budget, every arm end to end (CI)")
    parser.add_argument("--sweep", action="store_true", help="synthetic only: cost ratio x anchor fraction")
    parser.add_argument("--arms", nargs="*", help="subset of arms (default: all; `real` is always needed)")
    parser.add_argument(
        "--reuse", action="store_true", help="keep finished runs in --out (resume an interrupted benchmark)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="PATH",
        help="execution cache for every arm: a (task, solution) executed before, in any run or seed, "
        "replays its recorded outcome and cost (default: off)",
    )
    args = parser.parse_args(argv)
    out = args.out or Path("runs") / "bench" / (f"{args.suite}-sweep" if args.sweep else args.suite)
    out.mkdir(parents=True, exist_ok=True)
    seeds = args.seeds or list(range(2 if args.quick else load_suite(args.suite)["seeds"]))
    if args.sweep:
        if args.suite != "synthetic":
            parser.error("--sweep runs on the synthetic suite only")
        if args.cache:
            parser.error("--cache applies to the suite runs, not to --sweep")
        run_sweep(out, seeds, args.quick)
    else:
        run_suite(args.suite, out, seeds, args.quick, args.arms, args.reuse, args.cache)
        print((out / "table.md").read_text())
    print(f"outputs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

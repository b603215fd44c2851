"""How much weight a useless world model gets: ``mode=wmrl`` with the ``noise`` world model.

Every step's world-model weight (``fusion/w_world_model``: rectified's :math:`\\tilde\\lambda`,
inverse variance's :math:`w_W`) over seeds and anchor fractions of ``configs/synthetic/wmrl.yaml``.
The noise world model's scores are independent of everything, so the ideal weight is 0 on
every step; the floors are: above 0.1 on at most 5% of steps, and no run's
mean above 0.05.

Resumable: a run whose ``metrics.jsonl`` already has every step is read, not re-run.

    python -m experiments.synthetic.noise_weight --out runs/noise_weight --seeds 0-19 --steps 30 \\
        --fractions 0.1 0.05 --report docs/results/synthetic/noise_weight_runs.md
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_core.config import load_config
from wmrl_core.experiments.package_data import synthetic_config
from wmrl_core.experiments.report import format_int_ranges, seed_list
from wmrl_core.metrics import read_metrics

__all__ = ["weights_of_run", "longest_run_above", "summarize_weights", "run_noise_weight", "markdown_report"]

CONFIG = synthetic_config()
THRESHOLD, SHARE_FLOOR, MEAN_FLOOR = 0.1, 0.05, 0.05


def weights_of_run(records: Sequence[dict[str, Any]]) -> list[float]:
    """The world-model weight of every training step (records with ``fusion/w_world_model``)."""
    return [float(r["fusion/w_world_model"]) for r in records if r.get("fusion/w_world_model") is not None]


def longest_run_above(values: Sequence[float], threshold: float) -> int:
    """Length of the longest streak of consecutive values above ``threshold``."""
    best = current = 0
    for v in values:
        current = current + 1 if v > threshold else 0
        best = max(best, current)
    return best


def summarize_weights(runs: dict[str, list[float]], threshold: float = THRESHOLD) -> dict[str, Any]:
    """Share of steps above ``threshold``, each run's mean, the worst run mean and the longest streak.

    :param runs: run name -> per-step weights.
    """
    everything = np.concatenate([np.asarray(w, dtype=float) for w in runs.values()]) if runs else np.empty(0)
    means = {name: float(np.mean(w)) if w else math.nan for name, w in runs.items()}
    worst = max(means, key=lambda k: means[k]) if means else None
    return {
        "runs": len(runs),
        "steps": int(everything.size),
        "share_above": float(np.mean(everything > threshold)) if everything.size else math.nan,
        "max_weight": float(everything.max()) + 0.0 if everything.size else math.nan,  # + 0.0: no "-0.000"
        "run_means": means,
        "worst_run": worst,
        "worst_run_mean": means[worst] if worst else math.nan,
        "longest_streak": max((longest_run_above(w, threshold) for w in runs.values()), default=0),
    }


def run_noise_weight(
    out: Path, seeds: Sequence[int], steps: int, fractions: Sequence[float], overrides: Sequence[str] = ()
) -> dict[str, dict[str, list[float]]]:
    """Train every (fraction, seed) with the noise world model (seeds inner, so a cut-off sweep
    has every fraction on its first seeds); return fraction -> run -> per-step weights."""
    from wmrl_core.trainer import train

    weights: dict[str, dict[str, list[float]]] = {f"{f:g}": {} for f in fractions}
    for seed in seeds:
        for fraction in fractions:
            run_dir = out / f"fraction{fraction:g}" / f"seed{seed}"
            metrics = run_dir / "metrics.jsonl"
            done = metrics.is_file() and len(read_metrics(metrics)) == steps + 1
            if not done:
                cfg = load_config(
                    CONFIG,
                    [
                        f"run_dir={run_dir}",
                        f"seed={seed}",
                        f"steps={steps}",
                        f"anchors.fraction={fraction}",
                        "world_model.name=noise",
                        f"world_model.kwargs.seed={seed}",
                        "eval.every=0",
                        "checkpoint.every=0",
                        "logging.progress=false",
                        *overrides,
                    ],
                )
                train(cfg)
            weights[f"{fraction:g}"][f"seed{seed}"] = weights_of_run(read_metrics(metrics))
    return weights


def markdown_report(weights: dict[str, dict[str, list[float]]], command: str) -> str:
    """A table per anchor fraction and pooled, against the floors."""
    lines = [
        "# A useless world model's weight (noise world model, `mode=wmrl`)",
        "",
        f"Command: `{command}`",
        "",
        f"Floors: weight > {THRESHOLD} on at most {SHARE_FLOOR:.0%} of steps; no run's mean above {MEAN_FLOOR}.",
        "",
        "| anchor fraction | runs | steps | share of steps > 0.1 | max weight | worst run mean (run) "
        "| longest streak > 0.1 | floors met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pooled: dict[str, list[float]] = {}
    for fraction, runs in weights.items():
        pooled.update({f"{fraction}/{k}": v for k, v in runs.items()})
    for label, runs in [*weights.items(), ("all", pooled)]:
        s = summarize_weights(runs)
        met = s["share_above"] <= SHARE_FLOOR and s["worst_run_mean"] <= MEAN_FLOOR
        lines.append(
            f"| {label} | {s['runs']} | {s['steps']} | {s['share_above']:.1%} | {s['max_weight']:.3f} | "
            f"{s['worst_run_mean']:.3f} ({s['worst_run']}) | {s['longest_streak']} | {'yes' if met else 'no'} |"
        )
    lines += ["", "Per-run mean weight:", "", "| run | mean | steps > 0.1 |", "|---|---|---|"]
    for name, w in pooled.items():
        lines.append(f"| {name} | {np.mean(w):.3f} | {int(np.sum(np.asarray(w) > THRESHOLD))}/{len(w)} |")
    return "\n".join(lines) + "\n"


def _check_record_matches(parser: argparse.ArgumentParser, weights: dict, args: argparse.Namespace) -> None:
    """The flags printed as the page's command must be the record's: its fractions, seeds and steps."""
    runs = {f"{f:g}": {f"seed{s}" for s in args.seeds} for f in args.fractions}
    stored = {fraction: set(by_run) for fraction, by_run in weights.items()}
    steps = {len(w) for by_run in weights.values() for w in by_run.values()}
    if stored != runs or steps != {args.steps}:
        parser.error(
            f"--from-json {args.from_json}: its runs (fractions {sorted(stored)}, {len(steps) and max(steps)} steps) "
            "are not the ones --seeds, --steps and --fractions describe; pass the flags of the run that wrote it"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where the runs go (required unless --from-json)")
    parser.add_argument("--seeds", type=seed_list, default=list(range(20)), help="seeds (default 0-19)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.05])
    parser.add_argument("--report", type=Path, help="write the markdown table here (and a .json beside it)")
    parser.add_argument(
        "--from-json", type=Path, help="run nothing: read every run's weights from a JSON that --report wrote"
    )
    parser.add_argument("overrides", nargs="*", help="extra key=value config overrides")
    args = parser.parse_args(argv)
    if args.from_json:
        weights = json.loads(args.from_json.read_text())
        _check_record_matches(parser, weights, args)
    elif args.out is None:
        parser.error("--out is required to run (or pass --from-json to rebuild a report)")
    else:
        weights = run_noise_weight(args.out, args.seeds, args.steps, args.fractions, args.overrides)
    command = "python -m experiments.synthetic.noise_weight " + " ".join(
        [
            f"--seeds {format_int_ranges(args.seeds)}",
            f"--steps {args.steps}",
            "--fractions",
            *map(str, args.fractions),
            *args.overrides,
        ]
    )
    report = markdown_report(weights, command)
    print(report)
    if args.report:
        args.report.write_text(report)
        args.report.with_suffix(".json").write_text(json.dumps(weights, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does the live prediction of what the world model is worth match what it buys?

For each execution cost and anchor fraction of ``configs/synthetic/wmrl.yaml``: ``real`` (every
group executed) and ``wmrl`` over the same seeds; the *measured* ratio is ``real``'s compute to
its target over ``wmrl``'s (paired by seed, :func:`experiments.synthetic.theorem.summarize`), the
*predicted* one the run average of ``value/ratio_vs_real`` (``wmrl_core/fusion/value.py``).
Resumable (finished runs are reused).

    python -m experiments.synthetic.value_check --out runs/value_check --seeds 0-3 \\
        --costs 0.25 1 4 --fractions 0.1 0.25 --report docs/results/synthetic/value_check.md
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.synthetic.theorem import WMRL_STEPS, run_curves, summarize
from wmrl_core.experiments.package_data import synthetic_config
from wmrl_core.experiments.report import seed_list
from wmrl_core.experiments.stats import mean_ci95

__all__ = ["value_check", "markdown_table", "WITHIN"]

CONFIG = synthetic_config()
WITHIN = 0.25
"""The prediction counts as right where it is within this fraction of the measured ratio."""


def _predicted(run_dir: Path) -> float:
    summary = json.loads((run_dir / "summary.json").read_text())
    return float(summary.get("value", {}).get("value/ratio_vs_real", math.nan))


def value_check(
    out: Path, seeds: Sequence[int], costs: Sequence[float], fractions: Sequence[float]
) -> list[dict[str, Any]]:
    """One row per (execution cost, anchor fraction): measured and predicted ratios over seeds."""
    rows = []
    for cost in costs:
        arms = {"real": ["mode=real"]}
        arms.update({f"wmrl_f{f:g}": ["mode=wmrl", f"anchors.fraction={f}", f"steps={WMRL_STEPS}"] for f in fractions})
        cost_dir = out / f"cost{cost:g}"
        results = run_curves(
            CONFIG, arms, seeds, cost_dir, overrides=[f"environment.kwargs.execution_cost_s={cost}"], reuse=True
        )
        summary = summarize(results)
        for f in fractions:
            arm = f"wmrl_f{f:g}"
            row = summary["arms"][arm]
            predicted = [_predicted(cost_dir / "runs" / f"{arm}-seed{s}") for s in seeds]
            p_mean, p_ci = mean_ci95(predicted)
            rows.append(
                {
                    "execution_cost_s": cost,
                    "anchor_fraction": f,
                    "measured": row["speedup_vs_baseline"],
                    "measured_ci95": row["speedup_ci95"],
                    "measured_seeds": row["speedup_seeds"],
                    "predicted": p_mean,
                    "predicted_ci95": p_ci,
                    "predicted_per_seed": predicted,
                    "real_gain": summary["arms"]["real"]["gain_mean"],
                }
            )
    return rows


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| execution cost (s) | anchor fraction | measured ratio vs real (95% CI, seeds) | predicted (95% CI) "
        f"| within {WITHIN:.0%} |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        measured = (
            f"{r['measured']:.2f} ± {r['measured_ci95']:.2f} ({r['measured_seeds']})"
            if r["measured"] is not None
            else f"undefined ({r['measured_seeds']} seeds reach the target)"
        )
        within = (
            ("yes" if r["measured"] and abs(r["predicted"] / r["measured"] - 1) <= WITHIN else "no")
            if r["measured"] is not None
            else "-"
        )
        lines.append(
            f"| {r['execution_cost_s']:g} | {r['anchor_fraction']:g} | {measured} | "
            f"{r['predicted']:.2f} ± {r['predicted_ci95']:.2f} | {within} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=seed_list, default=[0, 1, 2, 3], help="seeds (default 0-3)")
    parser.add_argument("--costs", type=float, nargs="+", default=[0.25, 1.0, 4.0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25])
    parser.add_argument("--report", type=Path)
    args = parser.parse_args(argv)
    rows = value_check(args.out, args.seeds, args.costs, args.fractions)
    table = markdown_table(rows)
    print(table)
    if args.report:
        args.report.write_text(table)
        args.report.with_suffix(".json").write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

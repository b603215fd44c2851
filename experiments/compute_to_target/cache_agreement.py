"""Replayed against fresh: does the execution cache change a benchmark's result?

``wmrl experiment compute-to-target --cache FILE`` replays recorded executions (NAS-Bench style); this
compares its runs with runs of the same arms and seeds made with the cache off: every
held-out evaluation of each arm-seed side by side, and the execution seconds each run was
charged (recorded costs against fresh measurements). Writes a markdown table to stdout.

    wmrl experiment compute-to-target --suite autoresearch --seeds 0-0 --out runs/bench_ar_nocache
    wmrl experiment cache-agreement --replayed runs/bench_ar --fresh runs/bench_ar_nocache
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from wmrl_core.experiments.stats import mean_ci95
from wmrl_core.metrics import read_metrics


def evaluations(run_dir: Path, metric: str) -> list[tuple[int, float]]:
    return [(int(r["step"]), float(r[metric])) for r in read_metrics(run_dir / "metrics.jsonl") if metric in r]


def compare(replayed: Path, fresh: Path, metric: str = "eval/reward") -> list[dict]:
    """One row per fresh arm-seed that also exists replayed."""
    rows = []
    for run in sorted(p for p in (fresh / "runs").iterdir() if (p / "summary.json").exists()):
        other = replayed / "runs" / run.name
        if not (other / "summary.json").exists():
            continue
        arm, seed = run.name.rsplit("-seed", 1)
        ef, er = evaluations(run, metric), evaluations(other, metric)
        seeds = sorted((replayed / "runs").glob(f"{arm}-seed*/summary.json"))
        finals = [json.loads(p.read_text())["eval_last"][metric] for p in seeds]
        exec_f = json.loads((run / "summary.json").read_text())["final"]["compute/execution_s"]
        exec_r = json.loads((other / "summary.json").read_text())["final"]["compute/execution_s"]
        rows.append(
            {
                "arm": arm,
                "seed": int(seed),
                "fresh_final": ef[-1][1],
                "replayed_final": er[-1][1],
                "replayed_seeds": mean_ci95(finals),
                "n_seeds": len(finals),
                "evaluations": len(ef),
                "max_abs_difference": max((abs(a[1] - b[1]) for a, b in zip(ef, er)), default=float("nan")),
                "same_steps": [s for s, _ in ef] == [s for s, _ in er],
                "execution_s": (exec_f, exec_r),
            }
        )
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "| arm | seed | fresh, final | replayed, final | replayed, all seeds (95% CI) | evaluations: largest difference "
        "| execution s charged in training, fresh / replayed |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m, h = r["replayed_seeds"]
        f, p = r["execution_s"]
        change = f" ({f / p - 1:+.0%})" if p > 0 else ""
        same = f"{r['max_abs_difference']:.3f} of {r['evaluations']}" + ("" if r["same_steps"] else " (steps differ)")
        lines.append(
            f"| {r['arm']} | {r['seed']} | {r['fresh_final']:.3f} | {r['replayed_final']:.3f} | "
            f"{m:.3f} ± {h:.3f} ({r['n_seeds']}) | {same} | {f:.0f} / {p:.0f}{change} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, prog: str = "wmrl experiment cache-agreement") -> int:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("--replayed", type=Path, required=True, help="--out of the run with --cache")
    p.add_argument("--fresh", type=Path, required=True, help="--out of the same arms and seeds with the cache off")
    p.add_argument("--metric", default="eval/reward")
    args = p.parse_args(argv)
    rows = compare(args.replayed, args.fresh, args.metric)
    if not rows:
        p.error(f"no arm-seed of {args.fresh}/runs is also in {args.replayed}/runs")
    print(markdown(rows), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does the live prediction of what the world model is worth match what it buys?

For each execution cost and anchor fraction of ``configs/synthetic/wmrl.yaml``: ``real`` (every
group executed) and ``wmrl`` over the same seeds; the *measured* ratio is ``real``'s compute to
its target over ``wmrl``'s (paired by seed, :func:`experiments.synthetic.theorem.summarize`), the
*predicted* one the run average of ``value/ratio_vs_real`` (``wmrl_core/fusion/value.py``).
Resumable (finished runs are reused). The runs are archived beside the page
(``value_check_runs.json.gz``: each run's curve, final compute, steps and ``value`` averages), and
``--from-archive`` rebuilds the whole page from that archive alone.

    python -m experiments.synthetic.value_check --out runs/value_check --seeds 0-3 \\
        --costs 0.25 1 4 --fractions 0.1 0.25 --report docs/results/synthetic/value_check.md
    python -m experiments.synthetic.value_check --from-archive --report docs/results/synthetic/value_check.md
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

import wmrl_core
from experiments.synthetic.theorem import WMRL_STEPS, ArmResult, run_curves, summarize
from wmrl_core.config import TrainConfig
from wmrl_core.experiments.package_data import synthetic_config
from wmrl_core.experiments.report import format_int_ranges, seed_list
from wmrl_core.experiments.stats import mean_ci95

__all__ = ["value_check", "save_archive", "load_archive", "check_rows", "markdown_table", "markdown_page", "WITHIN"]

CONFIG = synthetic_config()
WITHIN = 0.25
"""The prediction counts as right where it is within this fraction of the measured ratio."""
RUN_KEYS = (
    "world_model.kwargs.quality",
    "fusion.method",
    "calibration.calibrator",
    "policy.kwargs.generation_cost_s",
    "world_model.kwargs.cost_per_call_s",
    "world_model.kwargs.cost_per_item_s",
    "rollout.batch_tasks",
    "rollout.group_size",
    "grpo.lr",
    "eval.every",
    "steps",
)
"""The settings of a ``wmrl`` run that the page states, read from the run's own ``config.yaml``."""
DEFAULT_KEYS = ("fusion.method", "calibration.calibrator")
"""Settings the page calls the shipped defaults where the runs used the code's defaults."""


def _arms(fractions: Sequence[float]) -> dict[str, list[str]]:
    arms = {"real": ["mode=real"]}
    arms.update({f"wmrl_f{f:g}": ["mode=wmrl", f"anchors.fraction={f}", f"steps={WMRL_STEPS}"] for f in fractions})
    return arms


def value_check(
    out: Path, seeds: Sequence[int], costs: Sequence[float], fractions: Sequence[float], command: str = ""
) -> dict[str, Any]:
    """Run (or reuse) every (execution cost, arm, seed) in ``out``; the archive of what the page needs."""
    runs, finished = [], 0.0
    for cost in costs:
        cost_dir = out / f"cost{cost:g}"
        results = run_curves(
            CONFIG,
            _arms(fractions),
            seeds,
            cost_dir,
            overrides=[f"environment.kwargs.execution_cost_s={cost}"],
            reuse=True,
        )
        for name, res in results.items():
            for run in res.runs:
                path = cost_dir / "runs" / f"{name}-seed{run['seed']}" / "summary.json"
                summary, finished = json.loads(path.read_text()), max(finished, path.stat().st_mtime)
                keep = {k: run[k] for k in ("seed", "curve", "compute", "records")}
                runs.append(
                    {"cost": cost, "arm": name, **keep, "steps": summary["steps"], "value": summary.get("value", {})}
                )
    settings = _settings(out, seeds, costs, fractions, command)
    settings["finished"] = datetime.datetime.fromtimestamp(finished, datetime.UTC).date().isoformat()
    return {"settings": settings, "runs": runs}


def _settings(
    out: Path, seeds: Sequence[int], costs: Sequence[float], fractions: Sequence[float], command: str
) -> dict[str, Any]:
    """What the page's header states: the study's arguments, and the settings the runs used (their config.yaml)."""
    runs = out / f"cost{costs[0]:g}" / "runs"
    wmrl = OmegaConf.load(runs / f"wmrl_f{fractions[0]:g}-seed{seeds[0]}" / "config.yaml")
    real = OmegaConf.load(runs / f"real-seed{seeds[0]}" / "config.yaml")
    shipped = OmegaConf.structured(TrainConfig)
    return {
        "command": command,
        "config": str(Path(CONFIG).resolve().relative_to(Path(wmrl_core.__file__).resolve().parents[1])),
        "seeds": list(seeds),
        "costs": list(costs),
        "fractions": list(fractions),
        "wmrl": {key: OmegaConf.select(wmrl, key) for key in RUN_KEYS},
        "real_steps": int(real.steps),
        "defaults": {key: OmegaConf.select(shipped, key) for key in DEFAULT_KEYS},
    }


def save_archive(archive: dict[str, Any], path: Path) -> None:
    """Gzipped JSON, the same bytes for the same runs (sorted keys, no timestamp in the gzip header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(archive, indent=0, sort_keys=True).encode(), mtime=0))


def load_archive(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _results_by_cost(archive: dict[str, Any]) -> dict[float, dict[str, ArmResult]]:
    """Per execution cost, the arms' results as :func:`run_curves` returned them (``real`` first)."""
    by_cost: dict[float, dict[str, ArmResult]] = {}
    for run in archive["runs"]:
        arms = by_cost.setdefault(run["cost"], {})
        arms.setdefault(run["arm"], ArmResult(run["arm"])).add_run(run["seed"], {"diagnostics": {}, **run})
    return by_cost


def _per_step_s(res: ArmResult) -> float:
    """Charged seconds per step: each run's final ``compute/total_s`` over its steps, mean over seeds."""
    return float(np.mean([run["compute"]["total_s"] / run["steps"] for run in res.runs]))


def check_rows(archive: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (execution cost, anchor fraction): measured and predicted ratios over seeds, the cost per
    step of the two arms, and the steps ratio the measured ratio implies."""
    settings, rows = archive["settings"], []
    rollouts = settings["wmrl"]["rollout.batch_tasks"] * settings["wmrl"]["rollout.group_size"]
    for cost, results in _results_by_cost(archive).items():
        summary = summarize(results)
        for f in settings["fractions"]:
            res, row = results[f"wmrl_f{f:g}"], summary["arms"][f"wmrl_f{f:g}"]
            predicted = [run["value"].get("value/ratio_vs_real", math.nan) for run in res.runs]
            n_eff = float(np.mean([run["value"].get("value/n_eff", math.nan) for run in res.runs]))
            p_mean, p_ci = mean_ci95(predicted)
            cost_ratio = _per_step_s(results["real"]) / _per_step_s(res)
            measured = row["speedup_vs_baseline"]
            rows.append(
                {
                    "execution_cost_s": cost,
                    "anchor_fraction": f,
                    "target_fraction": summary["fraction"],
                    "measured": measured,
                    "measured_ci95": row["speedup_ci95"],
                    "measured_seeds": row["speedup_seeds"],
                    "predicted": p_mean,
                    "predicted_ci95": p_ci,
                    "predicted_per_seed": predicted,
                    "real_gain": summary["arms"]["real"]["gain_mean"],
                    "cost_per_step_ratio": cost_ratio,
                    "steps_ratio": cost_ratio / measured if measured else None,
                    "n_eff": n_eff,
                    "noise_limited_steps_ratio": rollouts / n_eff if n_eff > 0 else math.nan,
                }
            )
    return rows


def _within(r: dict[str, Any]) -> bool:
    return bool(r["measured"]) and abs(r["predicted"] / r["measured"] - 1) <= WITHIN


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
        within = ("yes" if _within(r) else "no") if r["measured"] is not None else "-"
        lines.append(
            f"| {r['execution_cost_s']:g} | {r['anchor_fraction']:g} | {measured} | "
            f"{r['predicted']:.2f} ± {r['predicted_ci95']:.2f} | {within} |"
        )
    return "\n".join(lines) + "\n"


def cost_table(rows: Sequence[dict[str, Any]]) -> str:
    """The measured ratio against the ratio of the two arms' charged cost per step."""
    lines = [
        "| execution cost (s) | anchor fraction | cost per step, real / wmrl | measured ratio "
        "| steps ratio implied (cost ratio / measured) | predicted |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        measured, steps = (
            (f"{r['measured']:.2f}", f"{r['steps_ratio']:.2f}") if r["measured"] is not None else ("undefined", "-")
        )
        lines.append(
            f"| {r['execution_cost_s']:g} | {r['anchor_fraction']:g} | {r['cost_per_step_ratio']:.2f} | {measured} "
            f"| {steps} | {r['predicted']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _span(values: Sequence[float], fmt: str, unit: str = "") -> str:
    """``"39-57%"``: the range of ``values`` as printed (one figure where both ends print alike)."""
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def _cells(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows where both ratios are defined."""
    return [r for r in rows if r["measured"] is not None and math.isfinite(r["predicted"])]


def _where(rows: Sequence[dict[str, Any]]) -> str:
    return ", ".join(f"cost {r['execution_cost_s']:g} s, fraction {r['anchor_fraction']:g}" for r in rows)


def verdict(rows: Sequence[dict[str, Any]]) -> str:
    """The bold sentence: in how many cells the prediction is within :data:`WITHIN`, and by how much it is off."""
    cells = _cells(rows)
    if not cells:
        return (
            "**The measured ratio is undefined in every cell (no seed pair reached the target): nothing is checked.**"
        )
    within = [r for r in cells if _within(r)]
    where = (
        f"within {WITHIN:.0%} nowhere" if not within else f"within {WITHIN:.0%} in {len(within)} of {len(cells)} cells"
    )
    said = f"**The prediction is {where}{f' ({_where(within)})' if within else ''}"
    below = [100 * (1 - r["predicted"] / r["measured"]) for r in cells if r["predicted"] < r["measured"]]
    above = [100 * (r["predicted"] / r["measured"] - 1) for r in cells if r["predicted"] >= r["measured"]]
    if not above:
        return f"{said}: it is {_span(below, '.0f', '%')} below the measured ratio in every cell.**"
    if not below:
        return f"{said}: it is {_span(above, '.0f', '%')} above the measured ratio in every cell.**"
    return (
        f"{said}: it is below the measured ratio in {len(below)} of {len(cells)} cells (by {_span(below, '.0f', '%')}) "
        f"and above it in {len(above)} (by {_span(above, '.0f', '%')}).**"
    )


def _step_limited(rows: Sequence[dict[str, Any]]) -> bool:
    """Every cell's prediction is below the measured ratio and its implied steps ratio below the one that
    progress limited by gradient noise would give (``real``'s rollouts a step over ``wmrl``'s ``n_eff``)."""
    cells = _cells(rows)
    return bool(cells) and all(
        r["predicted"] < r["measured"] and r["steps_ratio"] < r["noise_limited_steps_ratio"] for r in cells
    )


def regime(rows: Sequence[dict[str, Any]], settings: dict[str, Any]) -> tuple[str, str]:
    """The prose before and after the cost table: why the prediction is off, stated only where the figures
    say progress is limited by steps rather than by gradient noise."""
    cells, run = _cells(rows), settings["wmrl"]
    rollouts = run["rollout.batch_tasks"] * run["rollout.group_size"]
    noise = _span([r["noise_limited_steps_ratio"] for r in cells], ".1f") if cells else "-"
    steps = _span([r["steps_ratio"] for r in cells], ".1f") if cells else "-"
    assumes = (
        "The prediction assumes progress limited by gradient noise (steps to the target inversely proportional to "
        "the effective samples per step)"
    )
    if not _step_limited(rows):
        before = (
            f"{assumes}: `wmrl` would then need `real`'s {rollouts} executed rollouts a step over its `n_eff` "
            f"({noise}) times `real`'s steps. The measured ratio is the ratio of the two arms' charged cost *per step* "
            "divided by the steps ratio it implies:"
        )
        return before, f"So here `wmrl` needs {steps} times `real`'s steps."
    before = (
        f"The regime explains it. {assumes}. On this bandit progress is limited by steps: Adam normalises each step "
        f"to about the learning rate ({run['grpo.lr']:g}) whatever the gradient's noise, so `real`'s {rollouts} "
        f"executed rollouts a step ({noise}x `wmrl`'s `n_eff`) buy few extra steps' worth of progress. The measured "
        "ratio is instead close to the ratio of the two arms' charged cost *per step* divided by a small steps ratio:"
    )
    after = (
        f"So here `wmrl` needs {steps} times `real`'s steps (not the {noise} that noise-limited progress would "
        "need), and the noise-limited prediction understates the gain by the factor by which gradient noise does "
        "*not* slow progress."
    )
    return before, after


def limits(rows: Sequence[dict[str, Any]]) -> str:
    """The "What this does not show" paragraph; its reading of the prediction follows the figures."""
    cells = _cells(rows)
    within = [r for r in cells if _within(r)]
    below = all(r["predicted"] < r["measured"] for r in cells)
    found = (
        f"no cell was found where it is within {WITHIN:.0%}"
        if not within
        else f"it is within {WITHIN:.0%} in {len(within)} of {len(cells)} cells"
    )
    if not cells:
        reading = "untested on the bandit and elsewhere"
    elif below:
        reading = "a lower bound on the bandit and untested elsewhere"
    elif len(within) == len(cells):
        reading = f"right within {WITHIN:.0%} on the bandit and untested elsewhere"
    else:
        reading = "neither a prediction nor a bound on the bandit, and untested elsewhere"
    return (
        "What this does not show: the regime where the prediction is meant to hold (a policy whose progress per "
        "step grows with the effective batch, e.g. plain SGD or small learning rates on an LLM) was not run here; "
        f"{found}, so the prediction is, on this evidence, {reading}. `value/ratio_vs_anchors` was not checked "
        "against an anchors-only arm (the experiment has no such arm yet)."
    )


TITLE = "# The live prediction of what the world model is worth, against what it buys"
REBUILD = "python -m experiments.synthetic.value_check --from-archive --report docs/results/synthetic/value_check.md"


def _wrap(*sentences: str) -> str:
    """One paragraph, wrapped as the hand-written pages are."""
    return textwrap.fill(" ".join(sentences), 110, break_long_words=False, break_on_hyphens=False)


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _header(settings: dict[str, Any], rows: Sequence[dict[str, Any]]) -> list[str]:
    """Title, how the page is rebuilt, the settings the runs used and their command, the two ratios."""
    run = settings["wmrl"]
    shipped = (
        "the shipped defaults" if all(run[k] == v for k, v in settings["defaults"].items()) else "not the defaults"
    )
    costs, fractions = (", ".join(f"{x:g}" for x in settings[k]) for k in ("costs", "fractions"))
    target = rows[0]["target_fraction"] if rows else 0.95
    return [
        TITLE,
        f"Rebuilt from its runs' archive (`value_check_runs.json.gz`, beside this page) by\n`{REBUILD}`.",
        _wrap(
            f"Runs finished {settings['finished']}, on CPU (the costs are charged by the settings, not timed).",
            "Not pre-registered (a check of a diagnostic).",
            f"Settings: `{settings['config']}` ({run['world_model.kwargs.quality']} world model,",
            f"`fusion.method={run['fusion.method']}` and `calibration.calibrator={run['calibration.calibrator']}`,",
            f"{shipped}; generation {run['policy.kwargs.generation_cost_s']:g} s per rollout, world model",
            f"{run['world_model.kwargs.cost_per_call_s']:g} s per call +",
            f"{1000 * run['world_model.kwargs.cost_per_item_s']:g} ms per rollout), execution cost {costs} s per",
            f"solution, anchor fractions {fractions}, seeds {format_int_ranges(settings['seeds'])};",
            f"`real` {settings['real_steps']} steps, `wmrl` {run['steps']}, evaluation every {run['eval.every']} steps.",
        ),
        f"```\n{settings['command']}\n```",
        _wrap(
            f"*Measured*: `real`'s compute to {target:.0%} of its own final true reward over `wmrl`'s, paired by seed",
            "(`experiments.synthetic.theorem.summarize`). *Predicted*: the run average of `value/ratio_vs_real`",
            "(`n_eff (c_gen + c_exec) / C_step`, `wmrl_core/fusion/value.py`),",
            f"mean over the {_seeds(len(settings['seeds']))}.",
        ),
    ]


def markdown_page(archive: dict[str, Any]) -> str:
    """The whole page, every figure computed from ``archive``."""
    settings, rows = archive["settings"], check_rows(archive)
    before, after = regime(rows, settings)
    per_step = (
        "(cost per step: each run's final `compute/total_s` over its steps, mean of the "
        f"{_seeds(len(settings['seeds']))}.)"
    )
    paragraphs = [
        *_header(settings, rows),
        markdown_table(rows).rstrip("\n"),
        _wrap(verdict(rows), before),
        cost_table(rows).rstrip("\n"),
        _wrap(per_step, after),
        _wrap(limits(rows)),
    ]
    return "\n\n".join(paragraphs) + "\n"


def _command(args: argparse.Namespace) -> str:
    seeds = format_int_ranges(args.seeds)
    return (
        f"python -m experiments.synthetic.value_check --out {args.out} "
        f"--seeds {seeds if not seeds.isdigit() else f'{seeds}-{seeds}'} "
        f"--costs {' '.join(f'{c:g}' for c in args.costs)} --fractions {' '.join(f'{f:g}' for f in args.fractions)}"
        + (f" --report {args.report}" if args.report else "")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where the runs go (required unless --from-archive)")
    parser.add_argument("--seeds", type=seed_list, default=[0, 1, 2, 3], help="seeds (default 0-3)")
    parser.add_argument("--costs", type=float, nargs="+", default=[0.25, 1.0, 4.0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25])
    parser.add_argument("--report", type=Path, help="write the page here (and its rows as a .json beside it)")
    parser.add_argument(
        "--archive", type=Path, help="the runs' archive (default: value_check_runs.json.gz beside --report)"
    )
    parser.add_argument("--from-archive", action="store_true", help="run nothing: rebuild the page from the archive")
    args = parser.parse_args(argv)
    if args.archive is None and args.report is not None:
        args.archive = args.report.with_name(f"{args.report.stem}_runs.json.gz")
    if args.from_archive:
        if args.archive is None or args.report is None:
            parser.error("--from-archive needs --report (and --archive unless it lies beside the page)")
        if not args.archive.is_file():
            print(f"no archive at {args.archive}: run the study with --report to write it", file=sys.stderr)
            return 1
        archive = load_archive(args.archive)
    elif args.out is None:
        parser.error("--out is required to run (or pass --from-archive to rebuild the page)")
    else:
        archive = value_check(args.out, args.seeds, args.costs, args.fractions, _command(args))
        save_archive(archive, args.archive or args.out / "value_check_runs.json.gz")
    page = markdown_page(archive)
    print(page)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(page)
        args.report.with_suffix(".json").write_text(json.dumps(check_rows(archive), indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

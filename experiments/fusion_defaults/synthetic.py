"""The engine's defaults on the synthetic bandit: which calibration keeps the world model's
rankings, and the floors of the default fusion (``mse_weighted``). Pre-registered in
``PREREGISTRATION.md`` beside this file; results in ``docs/results/synthetic/fusion_defaults/``.

    python -m experiments.fusion_defaults.synthetic calibration --runs runs/fusion_defaults
    python -m experiments.fusion_defaults.synthetic floors --runs runs/fusion_defaults
    python -m experiments.fusion_defaults.synthetic report --runs runs/fusion_defaults \\
        --out docs/results/synthetic/fusion_defaults
    python -m experiments.fusion_defaults.synthetic report --from-archive --out docs/results/synthetic/fusion_defaults

Resumable: finished runs are read back (the kit's :func:`~wmrl_core.experiments.runner.run_arms`),
and a run whose stored config differs from the plan is refused. ``report`` trains nothing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.synthetic.noise_weight import summarize_weights
from experiments.synthetic.theorem import compute_to_reach, smoothed_final
from wmrl_core.experiments.package_data import synthetic_config
from wmrl_core.experiments.runner import run_arms
from wmrl_core.experiments.stats import mean_t_interval
from wmrl_core.metrics import read_metrics

CONFIG = synthetic_config()
COMMON = ["checkpoint.every=0", "logging.tensorboard=false"]

# Calibration: every calibrator and advantage scale, under the gate (mse_weighted) and without it
# (inverse_variance), on three world models. Development seeds, disjoint from the floors'.
CALIBRATION_SEEDS = list(range(100, 106))
WORLD_MODELS = {
    "benign": ["world_model.kwargs.quality=miscalibrated"],
    "decoy": ["world_model.kwargs.quality=confident_decoy"],
    "noise": ["world_model.name=noise", "steps=30", "eval.every=0"],
}
MSE_BEFORE_V2 = ["fusion.kwargs.window=20", "fusion.kwargs.bias_horizon=10", "fusion.kwargs.rho2_quantile=null"]
"""``mse_weighted``'s settings when Parts 1-3 ran, pinned on their ``mse_weighted`` arms since Part 5
adopted Part 4's (a later part's own overrides come after them)."""
CALIBRATORS = ("isotonic", "smoothed", "ranked")
SCALES = ("own", "real")
FUSIONS = ("mse_weighted", "inverse_variance")
RANKED_SLOPE = 0.5
"""The ``ranked`` calibrator's tie-break spread, in real within-group sds (``smoothed`` keeps its 0.01 tilt)."""


def calibration_arms() -> dict[str, list[str]]:
    arms = {}
    for wm, wm_overrides in WORLD_MODELS.items():
        for fusion in FUSIONS:
            for calibrator in CALIBRATORS:
                for scale in SCALES:
                    slope = [f"calibration.slope={RANKED_SLOPE}"] if calibrator == "ranked" else []
                    pins = MSE_BEFORE_V2 if fusion == "mse_weighted" else []
                    arms[f"{wm}-{fusion}-{calibrator}-{scale}"] = [
                        f"fusion.method={fusion}",
                        *pins,
                        f"calibration.calibrator={calibrator}",
                        f"calibration.advantage_scale={scale}",
                        *slope,
                        *wm_overrides,
                    ]
    return arms


# The floors of the issue, on fresh seeds, with the defaults as shipped.
NOISE_SEEDS = list(range(1000, 1020))
DECOY_SEEDS = list(range(2000, 2010))
BENIGN_SEEDS = list(range(3000, 3010))
NOISE_FRACTIONS = {"1 anchor group": 0.05, "2 anchor groups": 0.1}  # of batch_tasks = 20
DECOY_TOLERANCE = 0.005
BENIGN_TARGET, BENIGN_RATIO_FLOOR = 0.95, 1.10
ARCHIVE_NAME = "runs.json.gz"
"""Every run's summary (curve, weights, ties), beside the page."""


def floor_plan() -> list[tuple[str, dict[str, list[str]], list[int]]]:
    """(group, arms, seeds) of every floor."""
    noise = {
        f"noise-f{fraction:g}": [
            "world_model.name=noise",
            f"anchors.fraction={fraction}",
            "steps=30",
            "eval.every=0",
            *MSE_BEFORE_V2,
        ]
        for fraction in NOISE_FRACTIONS.values()
    }
    decoy = {
        "decoy-real": ["mode=real", "steps=60"],
        "decoy-default": ["world_model.kwargs.quality=confident_decoy", "steps=120", *MSE_BEFORE_V2],
    }
    benign = {
        "benign-real": ["mode=real", "steps=60"],
        "benign-inverse_variance": ["fusion.method=inverse_variance", "steps=120"],
        "benign-default": ["steps=120", *MSE_BEFORE_V2],
    }
    return [("noise", noise, NOISE_SEEDS), ("decoy", decoy, DECOY_SEEDS), ("benign", benign, BENIGN_SEEDS)]


# Part 3: the same floors, fresh seeds, the default with the inverse-variance weight's rho^2 read at its
# bootstrap lower bound.
BOUND = ["fusion.kwargs.rho2_quantile=0.05"]
BOUND_SEEDS = {"noise": list(range(1100, 1120)), "decoy": list(range(2100, 2110)), "benign": list(range(3100, 3110))}


def floors_with(settings: list[str], seeds: dict[str, list[int]]) -> list[tuple[str, dict[str, list[str]], list[int]]]:
    """(group, arms, seeds): Part 2's arms on other seeds, ``settings`` after every default arm's overrides."""
    plan = []
    for group, arms, _ in floor_plan():
        changed = {
            arm: [*overrides, *settings] if arm.startswith("noise") or arm.endswith("-default") else overrides
            for arm, overrides in arms.items()
        }
        plan.append((group, changed, seeds[group]))
    return plan


def bound_plan() -> list[tuple[str, dict[str, list[str]], list[int]]]:
    """(group, arms, seeds) of Part 3: Part 2's arms on fresh seeds, ``BOUND`` on every default arm."""
    return floors_with(BOUND, BOUND_SEEDS)


# Part 4: the same floors, fresh seeds, the default with a steadier bias estimate and Part 3's bound.
V2 = ["fusion.kwargs.window=60", "fusion.kwargs.bias_horizon=20", "fusion.kwargs.rho2_quantile=0.05"]
V2_SEEDS = {"noise": list(range(1200, 1220)), "decoy": list(range(2200, 2210)), "benign": list(range(3200, 3210))}
V2_DECOY_EXTRA = list(range(2210, 2220))
"""Registered beside Part 4's decoy floor, not deciding: ten more decoy seeds read with the same criterion."""


def v2_plan() -> list[tuple[str, dict[str, list[str]], list[int]]]:
    """(group, arms, seeds) of Part 4: Part 2's arms on fresh seeds, ``V2`` on every default arm; the
    extra decoy seeds as group ``decoy_extra``."""
    plan = floors_with(V2, V2_SEEDS)
    decoy_arms = next(arms for group, arms, _ in plan if group == "decoy")
    return [*plan, ("decoy_extra", decoy_arms, V2_DECOY_EXTRA)]


V2_BENIGN_SEEDS = list(range(3300, 3330))


def benign_v2_plan() -> list[tuple[str, dict[str, list[str]], list[int]]]:
    """(group, arms, seeds) of Part 5: Part 4's benign arms on thirty fresh seeds."""
    return [(group, arms, V2_BENIGN_SEEDS) for group, arms, _ in v2_plan() if group == "benign"]


def decoy_check_plan() -> list[tuple[str, dict[str, list[str]], list[int]]]:
    """Exploratory, after Part 3's decoy floor failed: the shipped default (point estimate) on Part 3's
    decoy seeds, beside the same seeds' ``real``."""
    arms = {
        "decoy-real": ["mode=real", "steps=60"],
        "decoy-default": ["world_model.kwargs.quality=confident_decoy", "steps=120", *MSE_BEFORE_V2],
    }
    return [("decoy", arms, BOUND_SEEDS["decoy"])]


def _train(
    arms: dict[str, list[str]], seeds: Sequence[int], runs: Path, report_only: bool
) -> dict[tuple[str, int], Path]:
    done = run_arms(CONFIG, arms, seeds, runs, overrides=COMMON, report_only=report_only)
    return {(r.arm.name, r.seed): r.run_dir for r in done}


def _curve(records: list[dict[str, Any]]) -> list[tuple[float, float]]:
    return [(r["compute/total_s"], r["eval/true_reward"]) for r in records if r.get("eval/true_reward") is not None]


def _mean(records: list[dict[str, Any]], key: str) -> float:
    values = [float(r[key]) for r in records if r.get(key) is not None and math.isfinite(float(r[key]))]
    return float(np.mean(values)) if values else math.nan


def run_summary(run_dir: Path) -> dict[str, Any]:
    """What one run shows: its final reward, the calibration's ties and the world model's weight."""
    records = [r for r in read_metrics(run_dir) if r.get("step", 0) > 0 or r.get("eval/true_reward") is not None]
    curve = _curve(records)
    training = [r for r in records if "fusion/w_world_model" in r]
    weights = [float(r["fusion/w_world_model"]) for r in training]
    opened = [r["step"] for r in training if r.get("fusion/gate_open") == 1.0]
    return {
        "final": smoothed_final(curve) if curve else math.nan,
        "curve": curve,
        "weights": weights,
        "mean_weight": float(np.mean(weights)) if weights else math.nan,
        "tied_group_share": _mean(training, "calibration/tied_group_share"),
        "error_calibrated": _mean(training, "calibration/within_group_error_calibrated"),
        "error_raw": _mean(training, "calibration/within_group_error_raw"),
        "gate_opened_at": opened[0] if opened else None,
    }


def calibration(runs: Path, report_only: bool = False) -> dict[str, Any]:
    folders = _train(calibration_arms(), CALIBRATION_SEEDS, runs / "calibration", report_only)
    out: dict[str, Any] = {}
    for (arm, seed), folder in folders.items():
        out.setdefault(arm, {})[seed] = run_summary(folder)
    return out


PARTS = {
    "floors": (floor_plan, "floors"),
    "floors-bound": (bound_plan, "floors_bound"),
    "decoy-check": (decoy_check_plan, "decoy_check"),
    "floors-v2": (v2_plan, "floors_v2"),
    "benign-v2": (benign_v2_plan, "benign_v2"),
}
"""Command -> (plan, folder under ``--runs``): Part 2's floors, Part 3's, the exploratory decoy check
(``decoy-real`` is Part 3's, run again), Part 4's and Part 5's."""


def floors(runs: Path, report_only: bool = False, part: str = "floors") -> dict[str, Any]:
    """Train (or, ``report_only``, collect) the runs of one part of :data:`PARTS`: arm -> seed -> summary.
    Part 4's extra decoy seeds come back as arms ``decoy_extra-real`` and ``decoy_extra-default``."""
    make_plan, folder = PARTS[part]
    out: dict[str, Any] = {}
    for group, arms, seeds in make_plan():
        folders = _train(arms, seeds, runs / folder / group, report_only)
        for (arm, seed), run_dir in folders.items():
            name = arm.replace("decoy-", "decoy_extra-", 1) if group == "decoy_extra" else arm
            out.setdefault(name, {})[seed] = run_summary(run_dir)
    return out


def noise_floor(results: dict[str, Any]) -> dict[str, Any]:
    rows = {}
    for label, fraction in NOISE_FRACTIONS.items():
        by_seed = results.get(f"noise-f{fraction:g}", {})
        summary = summarize_weights({f"seed{s}": r["weights"] for s, r in by_seed.items()})
        summary["gate_opened"] = sum(r["gate_opened_at"] is not None for r in by_seed.values())
        summary["met"] = bool(by_seed) and summary["share_above"] <= 0.05 and summary["worst_run_mean"] <= 0.05
        rows[label] = summary
    return rows


def decoy_floor(results: dict[str, Any]) -> dict[str, Any]:
    real, default = results.get("decoy-real", {}), results.get("decoy-default", {})
    seeds = sorted(set(real) & set(default))
    rows = {s: {"real": real[s]["final"], "default": default[s]["final"]} for s in seeds}
    met = bool(seeds) and all(r["default"] >= r["real"] - DECOY_TOLERANCE for r in rows.values())
    return {"per_seed": rows, "met": met, "seeds": len(seeds)}


def benign_floor(results: dict[str, Any]) -> dict[str, Any]:
    real, iv, default = (results.get(f"benign-{a}", {}) for a in ("real", "inverse_variance", "default"))
    rows = {}
    for s in sorted(set(real) & set(iv) & set(default)):
        target = BENIGN_TARGET * real[s]["final"]
        c_iv, c_default = compute_to_reach(iv[s]["curve"], target), compute_to_reach(default[s]["curve"], target)
        ratio = c_default / c_iv if c_iv and c_default else math.inf  # unreached by the default: a failure
        rows[s] = {"target": target, "inverse_variance_s": c_iv, "default_s": c_default, "ratio": ratio}
    ratios = [r["ratio"] for r in rows.values()]
    mean, half = mean_t_interval(ratios) if ratios and all(map(math.isfinite, ratios)) else (math.inf, math.nan)
    upper = mean + half if math.isfinite(mean) else math.inf
    return {"per_seed": rows, "mean": mean, "half_width": half, "upper": upper, "met": upper <= BENIGN_RATIO_FLOOR}


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("calibration", *PARTS, "report"))
    parser.add_argument("--runs", type=Path, default=Path("runs/fusion_defaults"))
    parser.add_argument("--out", type=Path, default=None, help="report: where the page and its archive go")
    parser.add_argument(
        "--from-archive", action="store_true", help="report: rebuild the page from OUT/runs.json.gz, without the runs"
    )
    args = parser.parse_args(argv)
    if args.what == "report":
        sys.path.insert(0, str(Path(__file__).parent))
        from report import write_report

        out = args.out or Path(".")
        archive = out / ARCHIVE_NAME
        if args.from_archive:
            kept = json.loads(gzip.decompress(archive.read_bytes()))
            results = [{arm: {int(s): r for s, r in by.items()} for arm, by in part.items()} for part in kept]
        else:  # what each run showed, kept so that the page can be rebuilt without the runs
            results = [
                calibration(args.runs, True),
                *(floors(args.runs, True, part) for part in PARTS),
            ]
            out.mkdir(parents=True, exist_ok=True)
            archive.write_bytes(gzip.compress(json.dumps(results).encode(), mtime=0))
        write_report(*results[:2], out, *results[2:])
        return 0
    if args.what == "calibration":
        result = calibration(args.runs)
    else:
        result = floors(args.runs, part=args.what)
    print(json.dumps({k: {s: v["final"] for s, v in by.items()} for k, by in result.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

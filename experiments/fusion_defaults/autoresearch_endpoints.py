"""The pre-registered endpoints of the AutoResearch run of the new defaults
(``PREREGISTRATION_AUTORESEARCH.md``), as pure functions of each arm-seed's evaluated curve
(``[{"step", "executions", "score", ...}]``, the equal-execution runner's records) and training metrics,
and the page they make. Every seed is reported; seeds not finished yet are counted as such."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wmrl_core.experiments.stats import mean_t_interval

REAL_EXECUTIONS = 1280
"""``real``'s training executions at step 32 (32 steps x 10 groups x 4)."""
W_CORPUS = 2762
"""Executions of the W families that fitted the world model (charged once)."""
MARGIN = 0.02
Curves = Mapping[str, Mapping[int, Sequence[Mapping[str, Any]]]]
"""arm -> seed -> evaluated curve."""


def score_at(curve: Sequence[Mapping[str, Any]], step: int) -> float:
    """The curve's score at ``step`` (NaN if that step was not evaluated)."""
    return next((float(p["score"]) for p in curve if p["step"] == step), math.nan)


def paired_difference(curves: Curves, arm: str, baseline: str, step: int = 32) -> dict[str, Any]:
    """``arm − baseline`` at ``step`` on every seed both finished, with the 95% t-interval."""
    seeds = sorted(set(curves.get(arm, {})) & set(curves.get(baseline, {})))
    diffs = {s: score_at(curves[arm][s], step) - score_at(curves[baseline][s], step) for s in seeds}
    values = [d for d in diffs.values() if math.isfinite(d)]
    mean, half = mean_t_interval(values) if len(values) >= 2 else (math.nan, math.nan)
    return {"per_seed": diffs, "mean": mean, "low": mean - half, "high": mean + half, "seeds": len(values)}


def executions_to_reach(curve: Sequence[Mapping[str, Any]], target: float) -> float | None:
    """Charged training executions at the first evaluated step (after step 0) whose score is at least
    ``target``; ``None`` if none is."""
    for point in curve:
        if point["step"] > 0 and float(point["score"]) >= target:
            return float(point["executions"])
    return None


def execution_ratio(curves: Curves, arm: str = "default", step: int = 32) -> dict[str, Any]:
    """Per seed: the executions ``arm`` needed to reach that seed's ``real`` score at ``step``; the
    ratio ``REAL_EXECUTIONS / executions`` without and with the W corpus charged, as a 95% t-interval on
    the log-ratio over the seeds that reach (the others listed as failures), and the runs that amortise
    the corpus (``W_CORPUS / (REAL_EXECUTIONS - executions)`` where positive)."""
    seeds = sorted(set(curves.get(arm, {})) & set(curves.get("real", {})))
    reached: dict[int, float | None] = {
        s: executions_to_reach(curves[arm][s], score_at(curves["real"][s], step)) for s in seeds
    }
    out: dict[str, Any] = {
        "per_seed": reached,
        "seeds": len(seeds),
        "reached": sum(v is not None for v in reached.values()),
    }
    for label, extra in (("without_w", 0.0), ("with_w", float(W_CORPUS))):
        logs = [math.log(REAL_EXECUTIONS / (e + extra)) for e in reached.values() if e is not None and e + extra > 0]
        if len(logs) >= 2:
            mean, half = mean_t_interval(logs)
            out[label] = {"ratio": math.exp(mean), "low": math.exp(mean - half), "high": math.exp(mean + half)}
        else:
            out[label] = None
    savings = [REAL_EXECUTIONS - e for e in reached.values() if e is not None]
    out["runs_to_amortise_w"] = W_CORPUS / float(np.mean(savings)) if savings and np.mean(savings) > 0 else None
    return out


def weight_floor(weights_by_seed: Mapping[int, Sequence[float]]) -> dict[str, Any]:
    """The noise world model's floor: weight above 0.1 on at most 5% of steps, no run's mean above 0.05."""
    everything = np.concatenate([np.asarray(w, float) for w in weights_by_seed.values()]) if weights_by_seed else []
    means = {s: float(np.mean(w)) for s, w in weights_by_seed.items() if len(w)}
    share = float(np.mean(np.asarray(everything) > 0.1)) if len(everything) else math.nan
    worst = max(means.values()) if means else math.nan
    return {"share_above": share, "worst_mean": worst, "means": means, "met": share <= 0.05 and worst <= 0.05}


SECONDARY = (("inverse_variance", "anchors_only"), ("world_model", "real"))
"""The registered secondary differences at step 32 (labelled as such on the page)."""


def secondary_lines(curves: Curves) -> list[str]:
    """The registered secondary differences at step 32, paired, with their 95% t-intervals (no verdict)."""
    lines = ["| secondary, step 32 | seeds | estimate (95% t) | per seed |", "|---|---|---|---|"]
    for arm, baseline in SECONDARY:
        d = paired_difference(curves, arm, baseline)
        per = ", ".join(f"{s}: {v:+.3f}" for s, v in sorted(d["per_seed"].items()))
        lines.append(f"| `{arm}` − `{baseline}` | {d['seeds']} | {_interval(d)} | {per or '-'} |")
    return lines


def earned_lines(earned: Mapping[str, Mapping[int, Mapping[str, Any]]], arms: Sequence[str]) -> list[str]:
    """Per arm that fuses: the step each seed's gate opened, the mean weight of the world model and the
    effective rollouts per executed one (``world_model_earned``), mean ± 95% t over seeds and per seed."""
    lines = [
        "| arm | seeds | gate opened (seeds; steps) | mean weight | effective rollouts per executed one |",
        "|---|---|---|---|---|",
    ]
    for arm in arms:
        by_seed = earned.get(arm, {})
        if not by_seed:
            continue
        opened = {s: e.get("gate_opened_at") for s, e in sorted(by_seed.items())}
        steps = ", ".join(f"{s}: {'never' if g is None else g}" for s, g in opened.items())
        cells = []
        for key in ("mean_weight", "effective_per_executed"):
            values = [float(e.get(key, math.nan)) for e in by_seed.values()]
            mean, half = mean_t_interval(values) if len(values) >= 2 else (float(np.mean(values)), math.nan)
            cells.append(f"{mean:.3f} ± {half:.3f}" if math.isfinite(half) else f"{mean:.3f}")
        n_open = sum(g is not None for g in opened.values())
        lines.append(f"| `{arm}` | {len(by_seed)} | {n_open} of {len(by_seed)}; {steps} | {cells[0]} | {cells[1]} |")
    return lines


def curve_summary_lines(curves: Curves) -> list[str]:
    """Every arm's score at each evaluated step: mean ± 95% t-interval half-width over its seeds (n)."""
    steps = sorted({int(p["step"]) for by_seed in curves.values() for c in by_seed.values() for p in c})
    lines = ["| arm | " + " | ".join(f"step {s}" for s in steps) + " |", "|---|" + "---|" * len(steps)]
    for arm, by_seed in curves.items():
        cells = []
        for step in steps:
            values = [v for v in (score_at(c, step) for c in by_seed.values()) if math.isfinite(v)]
            if not values:
                cells.append("-")
                continue
            mean, half = mean_t_interval(values)
            cells.append(f"{mean:.3f} ± {half:.3f} ({len(values)})")
        lines.append(f"| `{arm}` | " + " | ".join(cells) + " |")
    return lines


def _verdict(row: Mapping[str, Any], holds: bool, yes: str, no: str) -> str:
    return "no data yet" if row["seeds"] < 2 else yes if holds else no


def _interval(row: Mapping[str, Any]) -> str:
    return f"{row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]" if math.isfinite(row["mean"]) else "-"


def page(
    curves: Curves,
    earned: Mapping[str, Mapping[int, Mapping[str, Any]]],
    planned_seeds: int,
    arms: Sequence[str],
    default: str = "default",
) -> list[str]:
    """The endpoints' section of arm ``default`` (its noise control ``{default}_noise_wm``), verdicts read
    from the bounds; ``earned``: arm -> seed -> the run's ``world_model_earned`` summary and its per-step
    weights (``weights``)."""
    primary = paired_difference(curves, default, "anchors_only")
    versus_real = paired_difference(curves, default, "real")
    ratio = execution_ratio(curves, default)
    floor = weight_floor({s: e["weights"] for s, e in earned.get(f"{default}_noise_wm", {}).items()})
    done = min((len(curves.get(arm, {})) for arm in arms), default=0)
    finished = ", ".join(f"`{arm}` {len(curves.get(arm, {}))}" for arm in arms)
    lines = [
        f"Seeds finished in every arm: {done} of {planned_seeds} (per arm: {finished}).",
        "",
        "| endpoint | seeds | estimate (95% t) | verdict |",
        "|---|---|---|---|",
        f"| 1. `{default}` − `anchors_only`, step 32 | {primary['seeds']} | {_interval(primary)} | "
        f"{_verdict(primary, primary['low'] > 0, 'superior', 'not shown')} |",
        f"| 2. `{default}` − `real`, step 32, margin {MARGIN} | {versus_real['seeds']} | {_interval(versus_real)} | "
        f"{_verdict(versus_real, versus_real['low'] > -MARGIN, 'non-inferior', 'not non-inferior')} |",
    ]
    for label, key in (("without", "without_w"), ("with", "with_w")):
        r = ratio[key]
        estimate = f"{r['ratio']:.2f}x [{r['low']:.2f}, {r['high']:.2f}]" if r else "not estimable"
        lines.append(
            f"| 3. executions to `real`'s step-32 score, {label} the W corpus | {ratio['reached']} of "
            f"{ratio['seeds']} reach | {estimate} | {ratio['seeds'] - ratio['reached']} failures counted |"
        )
    lines.append(
        f"| 4. noise world model: steps > 0.1, worst run's mean | {len(floor['means'])} | "
        f"{floor['share_above']:.1%}, {floor['worst_mean']:.3f} | "
        f"{'no data yet' if not floor['means'] else 'met' if floor['met'] else 'not met'} |"
    )
    lines += [
        "",
        f"| seed | `{default}` − `anchors_only` | `{default}` − `real` | executions to `real`'s score | gate opened at step |",
    ]
    lines.append("|---|---|---|---|---|")
    for s in sorted(primary["per_seed"]):
        gate = earned.get(default, {}).get(s, {}).get("gate_opened_at")
        reached = ratio["per_seed"].get(s)
        lines.append(
            f"| {s} | {primary['per_seed'][s]:+.3f} | {versus_real['per_seed'].get(s, math.nan):+.3f} | "
            f"{'never' if reached is None else f'{reached:.0f}'} | {'never' if gate is None else gate} |"
        )
    return lines

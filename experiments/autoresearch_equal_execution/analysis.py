r"""The endpoints of ``wmrl experiment equal-execution`` (pre-registered in ``PREREGISTRATION.md``
beside this file), as pure functions of the evaluations, plus the report (``table.md``,
``summary.json``, ``equal_execution.png``).

Input: one *curve* per arm-seed, the held-out score of each kept policy beside the charged
execution its training had spent by then (``executions``: real executions, a count;
``execution_s``: charged seconds), and per evaluation the (tasks, samples) reward matrix for the
evaluation's own standard error (bootstrap over programs, paired across arms by sample index:
:func:`~wmrl_core.experiments.stats.paired_bootstrap_se`).

* **Primary 1, equal execution.** :math:`x_s` = WMRL-rectified's total training execution on
  seed :math:`s`. ``real`` is read at :math:`x_s`, linearly interpolated between its two
  evaluations around it (:func:`interpolation_weights`); every other arm at its last step.
  Paired difference arm − real per seed, mean and 95 % t-interval over seeds.
* **Primary 2, non-inferiority** (:func:`non_inferiority`): WMRL-rectified − real at the last
  step; non-inferior iff the lower bound of the 95 % t-interval > −margin (0.02). Undecided with
  fewer than two seeds.
* **Secondary, execution to a per-seed target** (:func:`seed_target`,
  :func:`execution_to_target`): target = step-0 score + half of real's smoothed gain; an arm
  reaches it where the running mean of two consecutive evaluations first passes it. A seed
  where it is not reached, or where real gained nothing (no target), counts as not reached.
* Every ``wmrl_*`` arm also minus ``anchors_only`` and minus ``noise_control`` (paired, last step).

Beside the endpoints, the accounting the pre-registration asks for (:func:`declared_compute`,
:func:`compute_at_cost_ratios`): each arm's compute for its 32 steps from its *counts* (rollouts
generated, rollouts scored by the world model, executions) at stated cost ratios of an LLM agent,
never from wall time; and the fusion's live predicted ratio beside the measured one
(:func:`live_and_measured_ratios`).

And a diagnostic (not an endpoint): how the world model,
fitted on W and learning from R's anchors during the run, scores R's anchor groups
(:func:`world_model_on_anchors`): within-group Spearman of its raw predictions against the real
rewards, its mean bias, and its per-group level error, by window of steps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_core.experiments.stats import mean_ci95, mean_t_interval, paired_bootstrap_se, within_group_spearman

__all__ = [
    "MARGIN",
    "interpolation_weights",
    "running_mean",
    "seed_target",
    "execution_to_target",
    "non_inferiority",
    "analyse",
    "world_model_on_anchors",
    "declared_compute",
    "compute_at_cost_ratios",
    "live_and_measured_ratios",
    "write_report",
]

MARGIN = 0.02
"""Non-inferiority margin of Primary 2, in held-out score."""
REFERENCE, LEAD, CONTROLS = "real", "wmrl_rectified", ("anchors_only", "noise_control")

Curve = Sequence[Mapping[str, Any]]
"""An arm-seed's evaluations in step order: ``{"step", "executions", "execution_s", "score", "se"}``."""
MatrixOf = Callable[[str, int, int], np.ndarray]
"""``(arm, seed, step) ->`` the evaluation's (tasks, samples) reward matrix."""
_SEOf = Callable[[list[tuple[str, int, int, float]]], float]
"""``[(arm, seed, step, weight)] ->`` the standard error of that weighted sum of evaluations."""


def interpolation_weights(xs: Sequence[float], x: float) -> list[tuple[int, float]] | None:
    """The value at ``x`` of the curve through points at increasing ``xs``, as ``[(index,
    weight)]``: one point at weight 1 where ``x`` is one of them, else the two around it with
    linear weights; ``None`` outside ``[xs[0], xs[-1]]`` (never extrapolated)."""
    xs = [float(v) for v in xs]
    if not xs or not xs[0] <= x <= xs[-1] or math.isnan(x):
        return None
    for i, xi in enumerate(xs):
        if xi == x:
            return [(i, 1.0)]
    j = next(i for i, xi in enumerate(xs) if xi > x)
    w = (x - xs[j - 1]) / (xs[j] - xs[j - 1])
    return [(j - 1, 1.0 - w), (j, w)]


def running_mean(values: Sequence[float]) -> list[float]:
    """Means of consecutive pairs: ``[(v0 + v1) / 2, (v1 + v2) / 2, ...]`` (one fewer)."""
    return [(a + b) / 2 for a, b in zip(values[:-1], values[1:], strict=True)]


def seed_target(real_scores: Sequence[float]) -> float | None:
    """Step-0 score + half of real's smoothed gain (its last running mean minus the step-0
    score); ``None`` when real did not gain (a target at or below the start is no target)."""
    gain = running_mean(real_scores)[-1] - real_scores[0]
    return real_scores[0] + gain / 2 if gain > 0 else None


def execution_to_target(executions: Sequence[float], scores: Sequence[float], target: float | None) -> float | None:
    """The execution at the later evaluation of the first consecutive pair whose mean is at or
    above ``target``; ``None``: not reached (or no target)."""
    if target is None:
        return None
    for k, m in enumerate(running_mean(scores), start=1):
        if m >= target:
            return float(executions[k])
    return None


def non_inferiority(differences: Sequence[float], margin: float = MARGIN) -> dict[str, Any]:
    """Mean, 95 % t-interval and the decision ``lower > -margin`` (``None`` with < 2 seeds)."""
    mean, half = mean_ci95(differences)
    n = sum(1 for d in differences if d is not None and math.isfinite(d))
    decided = n >= 2
    return {
        "seeds": n,
        "mean": mean,
        "ci95": [mean - half, mean + half],
        "margin": margin,
        "non_inferior": bool(mean - half > -margin) if decided else None,
    }


def _paired(values: Mapping[int, float]) -> dict[str, Any]:
    """Mean over seeds and the 95 % t-interval (NaN with fewer than two seeds: no spread is measured)."""
    mean, half = mean_ci95(list(values.values()))
    if sum(1 for v in values.values() if v is not None and math.isfinite(v)) < 2:
        half = math.nan
    return {"seeds": len(values), "mean": mean, "ci95": [mean - half, mean + half], "per_seed": dict(values)}


def _at(curve: Curve, key: str, x: float) -> list[tuple[int, float]] | None:
    return interpolation_weights([p[key] for p in curve], x)


def _evaluation_se(matrix: MatrixOf) -> _SEOf:
    """The standard error of a weighted sum of evaluations ``[(arm, seed, step, weight)]``."""

    def se(parts: list[tuple[str, int, int, float]]) -> float:
        return paired_bootstrap_se([matrix(a, s, step) for a, s, step, _ in parts], [w for *_, w in parts])

    return se


def _equal_execution(curves: Mapping[str, Mapping[int, Curve]], key: str, se: _SEOf) -> dict[str, Any]:
    """Primary 1 by ``key``: each arm at WMRL-rectified's total training execution, minus real read there."""
    real = curves.get(REFERENCE, {})
    lead = curves.get(LEAD, {})
    section: dict[str, Any] = {}
    for arm in curves:
        diffs, ses, points = {}, {}, {}
        for seed, curve in curves[arm].items():
            if seed not in real or seed not in lead:
                continue
            x = float(lead[seed][-1][key])
            weights = _at(real[seed], key, x)
            if weights is None:
                continue
            own = [(len(curve) - 1, 1.0)] if arm != REFERENCE else weights
            value = sum(w * curve[i]["score"] for i, w in own)
            ref = sum(w * real[seed][i]["score"] for i, w in weights)
            parts = [(arm, seed, curve[i]["step"], w) for i, w in own]
            parts += [(REFERENCE, seed, real[seed][i]["step"], -w) for i, w in weights]
            points[seed] = {"x": x, "score": value, "real_score": ref}
            if arm != REFERENCE:
                diffs[seed], ses[seed] = value - ref, se(parts)
        section[arm] = {"points": points, **({} if arm == REFERENCE else _paired(diffs)), "evaluation_se": ses}
    return section


def _execution_to_target_section(curves: Mapping[str, Mapping[int, Curve]]) -> dict[str, Any]:
    """The secondary: per arm and seed, the execution at which real's per-seed target is reached."""
    real = curves.get(REFERENCE, {})
    targets = {s: seed_target([p["score"] for p in c]) for s, c in real.items()}
    secondary: dict[str, Any] = {"targets": targets}
    for arm in curves:
        reached = {
            s: execution_to_target([p["executions"] for p in c], [p["score"] for p in c], targets.get(s))
            for s, c in curves[arm].items()
            if s in targets
        }
        secondary[arm] = {
            "per_seed": reached,
            "reached": sum(v is not None for v in reached.values()),
            "seeds": len(reached),
            "not_reached": sum(v is None for v in reached.values()),
        }
    return secondary


def _minus_controls(curves: Mapping[str, Mapping[int, Curve]], se: _SEOf) -> dict[str, Any]:
    """Every ``wmrl_*`` arm minus each control at the last step (the controls that credit the world model)."""
    credit: dict[str, Any] = {}
    for arm in (a for a in curves if a.startswith("wmrl_")):
        for control in CONTROLS:
            pair = {
                s: c[-1]["score"] - curves[control][s][-1]["score"]
                for s, c in curves[arm].items()
                if s in curves.get(control, {})
            }
            ses = {
                s: se([(arm, s, curves[arm][s][-1]["step"], 1.0), (control, s, curves[control][s][-1]["step"], -1.0)])
                for s in pair
            }
            credit[f"{arm} - {control}"] = {**_paired(pair), "evaluation_se": ses}
    return credit


def analyse(curves: Mapping[str, Mapping[int, Curve]], matrix: MatrixOf, margin: float = MARGIN) -> dict[str, Any]:
    """Every endpoint from the finished arm-seeds ``curves[arm][seed]`` (a partial set is fine:
    each figure says over how many seeds it is)."""
    arms = list(curves)
    real = curves.get(REFERENCE, {})
    lead = curves.get(LEAD, {})
    out: dict[str, Any] = {"seeds_per_arm": {a: sorted(curves[a]) for a in arms}, "margin": margin}
    se = _evaluation_se(matrix)

    # Primary 1 (and the same reading by charged seconds)
    out["equal_execution"] = _equal_execution(curves, "executions", se)
    out["equal_execution_s"] = _equal_execution(curves, "execution_s", se)

    # Primary 2
    final = {s: lead[s][-1]["score"] - real[s][-1]["score"] for s in lead if s in real}
    out["non_inferiority"] = {
        **non_inferiority(list(final.values()), margin),
        "per_seed": final,
        "evaluation_se": {
            s: se([(LEAD, s, lead[s][-1]["step"], 1.0), (REFERENCE, s, real[s][-1]["step"], -1.0)]) for s in final
        },
    }

    out["execution_to_target"] = _execution_to_target_section(curves)
    out["minus_controls"] = _minus_controls(curves, se)

    # every arm's last step minus real's (Primary 2's reading for every arm; beside the accounting)
    out["final_minus_real"] = {
        arm: _paired({s: c[-1]["score"] - real[s][-1]["score"] for s, c in curves[arm].items() if s in real})
        for arm in arms
        if arm != REFERENCE
    }

    out["curves"] = {a: {s: list(c) for s, c in curves[a].items()} for a in arms}
    return out


EXECUTION_COSTS = (1.0, 10.0, 100.0)
"""Cost of one execution in generated rollouts (e/g) at which compute is reported: an LLM agent's
range, from a quick script (about the cost of writing it) to a training run of minutes against a
generation batched on an inference engine."""
WORLD_MODEL_COST = 1.0
"""Cost of one world-model prediction in generated rollouts (w/g): an LLM world model reads the task
and the program and writes a short prediction; a full generation's cost is a conservative bound
(prompt processing is cheaper than decoding), so the ratios below understate WMRL's saving if anything."""
COUNT_KEYS = {
    "generated": "compute/generation_items",
    "scored": "compute/world_model_items",
    "executed": "compute/execution_items",
}
"""The ledger's counts (cumulative, from a run's last metrics record) that :func:`declared_compute` reads."""


def declared_compute(
    generated: float, scored: float, executed: float, execution_cost: float, world_model_cost: float = WORLD_MODEL_COST
) -> float:
    r"""A run's compute at declared costs, in units of one generated rollout (:math:`g = 1`):

    .. math:: C = N_{\text{gen}} + w\,N_{\text{wm}} + e\,N_{\text{exec}}

    with :math:`N_{\text{gen}}` rollouts generated, :math:`N_{\text{wm}}` rollouts scored by the
    world model, :math:`N_{\text{exec}}` executions, :math:`e` = ``execution_cost`` and
    :math:`w` = ``world_model_cost`` (both per item, in generations). Counts only: no wall time."""
    if execution_cost < 0 or world_model_cost < 0:
        raise ValueError(f"costs must be >= 0, got execution {execution_cost}, world model {world_model_cost}")
    return float(generated) + world_model_cost * float(scored) + execution_cost * float(executed)


def compute_at_cost_ratios(
    counts: Mapping[str, Mapping[int, Mapping[str, float]]],
    execution_costs: Sequence[float] = EXECUTION_COSTS,
    world_model_cost: float = WORLD_MODEL_COST,
) -> dict[str, Any]:
    """``real``'s compute over each arm's for the same steps, per seed, at each execution cost.

    ``counts[arm][seed]`` holds ``generated``, ``scored`` and ``executed`` (:data:`COUNT_KEYS`) at
    the last step. Per arm and cost: the per-seed ratio :math:`C_{real}/C_{arm}` (paired by seed;
    :func:`declared_compute`), its mean and 95 % t-interval over seeds. A ratio above 1 is less
    compute than ``real`` for the same number of steps; whether the score is the same is the
    endpoints' question, not this one's."""
    real = counts.get(REFERENCE, {})
    out: dict[str, Any] = {"execution_costs": list(execution_costs), "world_model_cost": world_model_cost, "arms": {}}
    for arm, by_seed in counts.items():
        rows = {}
        for e in execution_costs:
            ratios = {}
            for seed, c in by_seed.items():
                if seed not in real:
                    continue
                mine = declared_compute(c["generated"], c["scored"], c["executed"], e, world_model_cost)
                theirs = declared_compute(real[seed]["generated"], real[seed]["scored"], real[seed]["executed"], e)
                ratios[seed] = theirs / mine if mine > 0 else math.nan
            rows[f"{e:g}"] = _paired(ratios)
        out["arms"][arm] = rows
    return out


def live_and_measured_ratios(
    live: Mapping[str, Mapping[int, float]], to_target: Mapping[str, Mapping[int, float | None]]
) -> dict[str, Any]:
    """The fusion's live predicted compute ratio against ``real`` (``value/ratio_vs_real``, mean
    over a run's steps) beside the measured one: ``real``'s execution to the per-seed target over
    the arm's, on the seeds where both reached it (the others are counted, not dropped)."""
    real = to_target.get(REFERENCE, {})
    out = {}
    for arm, by_seed in live.items():
        mine = to_target.get(arm, {})
        measured = {
            s: real[s] / mine[s] for s in mine if mine[s] and real.get(s) is not None and real[s] and mine[s] > 0
        }
        out[arm] = {
            "live": _paired(dict(by_seed)),
            "measured": _paired(measured),
            "seeds_not_measured": sorted(s for s in by_seed if s not in measured),
        }
    return out


WINDOWS = ((1, 8), (9, 16), (17, 32))
"""Windows of training steps (inclusive) for :func:`world_model_on_anchors`."""


def world_model_on_anchors(
    pairs: Mapping[str, Mapping[int, Sequence[Mapping[str, Any]]]], windows: Sequence[tuple[int, int]] = WINDOWS
) -> dict[str, list[dict[str, Any]]]:
    r"""The world model on the anchor groups of each arm, by window of steps, seeds pooled.

    ``pairs[arm][seed]`` is a run's ``anchor_pairs.jsonl``: per step, one anchor group's raw
    world-model predictions ``world_model`` (made before that step's anchors are learned from),
    real rewards ``real`` and each row's group id ``group`` (a record without ``group`` counts as
    one group). Per window: the mean within-group Spearman :math:`\bar\rho` over the groups
    used (:func:`~wmrl_core.experiments.stats.within_group_spearman`, its rule for constant
    values) with a 95 % t-interval over groups, the mean bias :math:`\overline{\hat y - y}`, and
    the level error :math:`\frac{1}{|G|}\sum_g |\bar{\hat y}_g - \bar y_g|` over groups.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for arm, by_seed in pairs.items():
        rows = []
        for lo, hi in windows:
            keys: list[str] = []
            preds: list[float] = []
            real: list[float] = []
            levels: list[float] = []
            for seed, records in by_seed.items():
                for r in records:
                    if not lo <= int(r["step"]) <= hi:
                        continue
                    p, y = np.asarray(r["world_model"], float), np.asarray(r["real"], float)
                    group = np.asarray(r.get("group", [0] * p.size))
                    for g in dict.fromkeys(group.tolist()):
                        pg, yg = p[group == g], y[group == g]
                        ok = np.isfinite(pg) & np.isfinite(yg)
                        if not ok.any():
                            continue
                        keys += [f"{seed}/{r['step']}/{g}"] * int(ok.sum())
                        preds += pg[ok].tolist()
                        real += yg[ok].tolist()
                        levels.append(abs(float(pg[ok].mean() - yg[ok].mean())))
            rank = within_group_spearman(keys, preds, real)
            mean, half = mean_t_interval(list(rank.per_group.values())) if rank.groups > 1 else (rank.value, math.nan)
            rows.append(
                {
                    "steps": [lo, hi],
                    "groups": rank.groups,
                    "spearman": mean,
                    "spearman_ci95": half,
                    "bias": float(np.mean(np.subtract(preds, real))) if preds else math.nan,
                    "level_error": float(np.mean(levels)) if levels else math.nan,
                }
            )
        out[arm] = rows
    return out


def _fmt(x: Any, spec: str = "+.3f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _ci_row(name: str, r: Mapping[str, Any]) -> str:
    lo, hi = r["ci95"]
    rms = float(np.sqrt(np.mean(np.square(list(r["evaluation_se"].values()))))) if r.get("evaluation_se") else math.nan
    seeds = ", ".join(f"{s}: {_fmt(v)}" for s, v in sorted(r["per_seed"].items()))
    return f"| {name} | {r['seeds']} | {_fmt(r['mean'])} | [{_fmt(lo)}, {_fmt(hi)}] | {_fmt(rms, '.3f')} | {seeds} |"


def table(result: Mapping[str, Any], corpus_line: str) -> str:
    """The markdown report: seeds per arm, both primaries, the controls, the secondary, every seed."""
    head = (
        "| | seeds | mean | 95 % t-interval | evaluation s.e. (rms over seeds) | per seed |\n|---|---|---|---|---|---|"
    )
    lines = ["# Equal-execution benchmark", "", corpus_line, "", "Seeds finished per arm: "]
    lines[-1] += "; ".join(f"{a} {len(s)} ({', '.join(map(str, s))})" for a, s in result["seeds_per_arm"].items())
    for name, label in (("equal_execution", "executions (count)"), ("equal_execution_s", "charged execution seconds")):
        lines += ["", f"## Primary 1: arm − real at WMRL-rectified's total training execution, by {label}", "", head]
        lines += [_ci_row(a, r) for a, r in result[name].items() if a != REFERENCE]
    ni = result["non_inferiority"]
    verdict = {True: "non-inferior", False: "not shown non-inferior", None: "undecided (< 2 seeds)"}[ni["non_inferior"]]
    lines += [
        "",
        f"## Primary 2: wmrl_rectified − real at the last step, margin {ni['margin']}",
        "",
        head,
        _ci_row("wmrl_rectified − real", ni),
        "",
        f"Decision (lower bound > −{ni['margin']}): **{verdict}**.",
        "",
        "## The controls: each WMRL arm minus anchors_only and minus noise_control (last step)",
        "",
        head,
    ]
    lines += [_ci_row(k, r) for k, r in result["minus_controls"].items()]
    lines += _secondary_lines(result["execution_to_target"], result["seeds_per_arm"])
    if result.get("accounting"):
        lines += _accounting_lines(result["accounting"], result.get("final_minus_real", {}))
    if result.get("live_ratio"):
        lines += _live_ratio_lines(result["live_ratio"])
    if result.get("evaluation_noise"):
        lines += evaluation_noise_lines(result["evaluation_noise"])
    if result.get("world_model_on_anchors"):
        lines += _anchor_lines(result["world_model_on_anchors"])
    lines += curve_lines(result["curves"])
    return "\n".join(lines) + "\n"


def _secondary_lines(sec: Mapping[str, Any], arms: Iterable[str]) -> list[str]:
    """The report's secondary: each arm's execution to the per-seed target."""
    lines = [
        "",
        "## Secondary: execution (count) to the per-seed target (step 0 + half of real's smoothed gain)",
        "",
        "Targets: " + "; ".join(f"seed {s}: {_fmt(t, '.3f')}" for s, t in sorted(sec["targets"].items())),
        "",
        "| arm | reached | per seed (n/a: not reached, counted as a failure) |",
        "|---|---|---|",
    ]
    for arm in arms:
        r = sec[arm]
        per = ", ".join(f"{s}: {_fmt(v, '.0f')}" for s, v in sorted(r["per_seed"].items()))
        lines.append(f"| {arm} | {r['reached']} of {r['seeds']} | {per} |")
    return lines


def _accounting_lines(acc: Mapping[str, Any], finals: Mapping[str, Any]) -> list[str]:
    """The report's accounting: real's compute over each arm's at each cost ratio, beside the final score."""
    costs = acc["execution_costs"]
    lines = [
        "",
        "## Accounting: real's compute over each arm's for the same steps, at an LLM agent's cost ratios",
        "",
        f"Counts from each run's ledger, never wall time: C = generated + {acc['world_model_cost']:g} x scored by the",
        "world model + e x executed, in generated rollouts (e = one execution's cost in generations). Above 1:",
        "less compute than `real` for 32 steps. Whether the score is the same is the endpoints' question. The",
        "W corpus's one-off cost is not in it (the line at the top).",
        "",
        "| arm | seeds | " + " | ".join(f"e = {e:g}" for e in costs) + " | final score − real (last step) |",
        "|---|---|" + "---|" * len(costs) + "---|",
    ]
    for arm, rows in acc["arms"].items():
        cells = []
        for e in costs:
            r = rows[f"{e:g}"]
            lo, hi = r["ci95"]
            cells.append(f"{_fmt(r['mean'], '.2f')} [{_fmt(lo, '.2f')}, {_fmt(hi, '.2f')}]")
        f = finals.get(arm)
        seeds = max((rows[f"{e:g}"]["seeds"] for e in costs), default=0)
        final = f"{_fmt(f['mean'])} [{_fmt(f['ci95'][0])}, {_fmt(f['ci95'][1])}]" if f else "-"
        lines.append(f"| {arm} | {seeds} | " + " | ".join(cells) + f" | {final} |")
    if acc.get("note"):
        lines += ["", acc["note"]]
    return lines


def _live_ratio_lines(live_ratio: Mapping[str, Any]) -> list[str]:
    """The report's fusion ratios: live predicted beside measured, per arm."""
    lines = [
        "",
        "## The fusion's live predicted ratio beside the measured one",
        "",
        "Live: `value/ratio_vs_real`, mean over a run's steps (the fusion issue's figure, from the step's charged",
        "costs, whose generation and world-model parts are wall time in this config: a diagnostic, not an",
        "endpoint). Measured: real's execution to the per-seed target over the arm's, where both reached it.",
        "",
        "| arm | live (seeds) | measured (seeds) | seeds without a measured ratio |",
        "|---|---|---|---|",
    ]
    for arm, r in live_ratio.items():
        lv, ms = r["live"], r["measured"]
        lines.append(
            f"| {arm} | {_fmt(lv['mean'], '.2f')} [{_fmt(lv['ci95'][0], '.2f')}, {_fmt(lv['ci95'][1], '.2f')}] "
            f"({lv['seeds']}) | {_fmt(ms['mean'], '.2f')} [{_fmt(ms['ci95'][0], '.2f')}, "
            f"{_fmt(ms['ci95'][1], '.2f')}] ({ms['seeds']}) | {', '.join(map(str, r['seeds_not_measured'])) or '-'} |"
        )
    return lines


def evaluation_noise_lines(n: Mapping[str, Any]) -> list[str]:
    """The report's paragraph on the evaluation's noise, measured by re-evaluating each initial policy."""
    per = ", ".join(f"{s}: {_fmt(v)}" for s, v in sorted(n["per_seed"].items()))
    return [
        "",
        "## The evaluation's noise, measured directly",
        "",
        "Each seed's initial policy evaluated again under fresh sampling noise (fresh − shared, per seed: "
        f"{per}): sd {_fmt(n['sd'], '.3f')} (the bootstrap standard errors predict {_fmt(n['predicted_sd'], '.3f')}); "
        f"the evaluation alone gives a mean difference over these {len(n['seeds'])} seeds ±{_fmt(n['resolution95'], '.3f')} "
        "(95 % t) with independent noise, less for arms that share their noise.",
    ]


def _anchor_lines(on_anchors: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """The report's diagnostic: the world model on R's anchor groups, per arm and window of steps."""
    lines = [
        "",
        "## Diagnostic: the world model (fitted on W, learning from anchors) on R's anchor groups",
        "",
        "Seeds pooled; Spearman within each anchor group (mean ± 95 % t over groups), bias = prediction − real,",
        "level error = mean over groups of |mean prediction − mean real|. Before training, over R's corpus:",
        "Spearman 0.417 [0.355, 0.480] on 89 tasks, level error 0.167, bias +0.026 (the pre-registration).",
        "",
        "| arm | steps | groups | Spearman | bias | level error |",
        "|---|---|---|---|---|---|",
    ]
    for arm, rows in on_anchors.items():
        for r in rows:
            lines.append(
                f"| {arm} | {r['steps'][0]}-{r['steps'][1]} | {r['groups']} | {_fmt(r['spearman'], '.3f')} ± "
                f"{_fmt(r['spearman_ci95'], '.3f')} | {_fmt(r['bias'])} | {_fmt(r['level_error'], '.3f')} |"
            )
    return lines


def curve_lines(curves: Mapping[str, Mapping[int, Curve]]) -> list[str]:
    """The report's last table: every arm-seed's evaluations."""
    lines = ["", "## Every arm-seed: score ± evaluation s.e. at each kept step [executions, charged s]", ""]
    lines += ["| arm | seed | evaluations |", "|---|---|---|"]
    for arm, by_seed in curves.items():
        for seed, curve in sorted(by_seed.items()):
            cells = "; ".join(
                f"step {p['step']}: {p['score']:.3f} ± {p['se']:.3f} [{p['executions']:.0f}, {p['execution_s']:.0f} s]"
                for p in curve
            )
            lines.append(f"| {arm} | {seed} | {cells} |")
    return lines


def plot(result: Mapping[str, Any], path: Path) -> None:
    """Held-out score against charged training execution (count), per arm: mean over seeds ±
    95 % t-interval at each kept step (x: mean execution over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for arm, by_seed in result["curves"].items():
        curves = list(by_seed.values())
        if not curves:
            continue
        n = min(len(c) for c in curves)
        x = [float(np.mean([c[k]["executions"] for c in curves])) for k in range(n)]
        stats = [mean_ci95([c[k]["score"] for c in curves]) for k in range(n)]
        ax.errorbar(
            x,
            [m for m, _ in stats],
            yerr=[h for _, h in stats],
            marker="o",
            capsize=3,
            label=f"{arm} ({len(curves)} seeds)",
        )
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlabel("charged training execution (real executions, symlog)")
    ax.set_ylabel("held-out score (real execution), mean ± 95% t-interval over seeds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(result: dict[str, Any], out: Path, corpus: Mapping[str, Any], extra: Mapping[str, Any]) -> str:
    """``table.md``, ``summary.json`` and ``equal_execution.png`` in ``out``; returns the table."""
    line = (
        f"W corpus (one-off, like an LLM's pre-training; charged to no arm): {corpus['executions']} executions "
        f"({corpus['rewarded']} with a reward), {corpus['container_cpu_s']:.0f} container CPU-s."
    )
    text = table(result, line)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text)
    summary = {**result, "w_corpus": dict(corpus), **extra}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
    plot(result, out / "equal_execution.png")
    return text

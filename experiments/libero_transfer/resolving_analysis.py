"""The pre-registered analysis of ``libero-transfer-resolving`` (pure functions on success rates).

Fixed in ``PREREGISTRATION_RESOLVING.md`` (beside this file) before the first seed ran.
Every rate is a held-out success rate in [0, 1] of one arm-seed; every mapping is keyed by seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from wmrl_core.experiments.stats import mean_t_interval

__all__ = [
    "BASE_HELDOUT_SUCCESS",
    "PAPER_TABLE3",
    "select_tasks",
    "paired_difference",
    "compute_floor",
]

BASE_HELDOUT_SUCCESS = {0: 0.6, 1: 0.7, 2: 0.8, 3: 0.8, 4: 0.4, 5: 0.8, 6: 0.5, 7: 0.8, 8: 0.6, 9: 0.7}
"""The shipped base policy's held-out success per LIBERO-10 task (``small_vla_dagger_t0-9_h1024.pt``,
init states 40-49, 10 episodes a task; ``plugins/libero/docs/base_policy.md``)."""

PAPER_TABLE3 = {"base": 37.4, "real": 38.3, "raw-progress": 39.2, "wmrl-progress": 41.2}
"""The WMRL paper's LIBERO-Long success, % (Table 3): SFT base, GRPO on sparse success, GRPO on the
raw dense (progress) score, WMRL; the pattern it shows is sparse GRPO < raw world model < WMRL."""


def select_tasks(base_success: Mapping[int, float], low: float = 0.3, high: float = 0.7) -> list[int]:
    """The tasks whose base success lies strictly inside ``(low, high)``: groups then have both
    outcomes often (GRPO learns nothing from a group of one outcome)."""
    if not 0 <= low < high <= 1:
        raise ValueError(f"need 0 <= low < high <= 1, got {low}, {high}")
    return sorted(t for t, p in base_success.items() if low < p < high)


def paired_difference(
    arm: Mapping[int, float], reference: Mapping[int, float], *, seeds_required: int = 6, confidence: float = 0.95
) -> dict[str, Any]:
    r"""``d_s = arm_s - reference_s`` over the seeds both have, with the t-interval over seeds
    :math:`\bar d \pm t_{(1+c)/2,\,n-1}\, s_d / \sqrt n` (:func:`mean_t_interval`).

    ``above_zero`` is the decision rule: the interval's lower bound is above zero, and every one of
    ``seeds_required`` seeds is in (an incomplete experiment decides nothing: ``None``).
    """
    seeds = sorted(set(arm) & set(reference))
    d = [float(arm[s]) - float(reference[s]) for s in seeds]
    mean, half = mean_t_interval(d, confidence)
    complete = len(seeds) >= seeds_required
    return {
        "seeds": seeds,
        "per_seed": d,
        "mean": mean,
        "ci_half": half,
        "lower": mean - half,
        "upper": mean + half,
        "above_zero": bool(mean - half > 0) if complete else None,
    }


def compute_floor(
    *,
    real_final: Mapping[int, float],
    partial_at: Mapping[int, float],
    sim_real: Mapping[int, float],
    sim_partial_at: Mapping[int, float],
    real_learns: bool | None,
    margin: float = 0.02,
    ratio_required: float = 3.0,
    seeds_required: int = 6,
) -> dict[str, Any]:
    """The compute floor: the simulation-saving arm reaches ``real``'s success with ``ratio_required``
    x less simulation.

    *Reaches*: with ``d_s`` = the simulation-saving arm's held-out success at its floor checkpoint
    minus ``real``'s final held-out success (paired by seed), the 95% t-interval's lower bound is at
    least ``-margin`` (non-inferiority by the bound, never "the interval includes zero").
    *Simulation*: the measured simulator CPU seconds the ledger charged to ``execution`` in training
    up to that checkpoint (``sim_partial_at``) and over ``real``'s whole training (``sim_real``);
    the ratio is mean(sim_real) / mean(sim_partial_at) over the seeds. Testable only where ``real``
    learns (``real_learns``: otherwise there is no gain to reach).
    """
    d = paired_difference(partial_at, real_final, seeds_required=seeds_required)
    seeds = sorted(set(sim_real) & set(sim_partial_at))
    partial = float(np.mean([sim_partial_at[s] for s in seeds])) if seeds else math.nan
    ratio = float(np.mean([sim_real[s] for s in seeds])) / partial if seeds and partial > 0 else math.nan
    reaches = bool(d["lower"] >= -margin) if d["above_zero"] is not None else None
    if real_learns is None or reaches is None:
        verdict = "incomplete"
    elif not real_learns:
        verdict = "not testable: `real` is not shown to learn"
    elif reaches and ratio >= ratio_required:
        verdict = f"met: reaches `real` with {ratio:.1f}x less simulation"
    else:
        verdict = (
            "not met"
            + ("" if reaches else ": does not reach `real`")
            + ("" if ratio >= ratio_required else f": {ratio:.1f}x less simulation, below {ratio_required:g}x")
        )
    return {"minus_real": d, "simulation_ratio": ratio, "reaches": reaches, "margin": margin, "verdict": verdict}

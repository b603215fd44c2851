r"""What the world model is worth, per step: the predicted compute ratios of this update.

The fused update is worth :math:`n_{\text{eff}}` real rollouts (``fusion/n_effective``: the
fuser's variance-matched count). With this step's charged costs, :math:`c_g` generation
seconds per rollout, :math:`c_e` execution seconds per executed rollout and :math:`C` the
step's charged total (generation, world model, execution), two GRPO baselines would pay:

* **every group executed** (``mode=real``): :math:`c_g + c_e` per rollout, so
  :math:`n_{\text{eff}}(c_g + c_e)` for an update worth as much;
* **the anchors alone** (the same step without the world model: every group generated, the
  same :math:`n_R` anchor rollouts executed, only they train): :math:`N c_g + n_R c_e` for an
  update worth :math:`n_R`.

If progress is limited by gradient noise, compute to a target scales with the cost per
effective rollout, and the predicted ratios (above 1: this update is cheaper per unit of
gradient information) are

.. math:: q_{\text{real}} = \frac{n_{\text{eff}}(c_g + c_e)}{C}, \qquad
   q_{\text{anchors}} = \frac{n_{\text{eff}}}{n_R}\cdot\frac{N c_g + n_R c_e}{C}.

:math:`q_{\text{anchors}} > 1` exactly when the world model's information gain
:math:`n_{\text{eff}}/n_R` exceeds its share of the step's cost, :math:`C/(C - C_W)`: whether
the world model earns its keep. Where progress is limited by the number of steps (little
gradient noise, e.g. late in a run), a larger :math:`n_{\text{eff}}` buys little and the
prediction overstates the gain. Undefined (NaN) on a step without executions (no :math:`c_e`)
or, for :math:`q_{\text{anchors}}`, without anchor rollouts.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["predicted_compute_ratios", "value_record", "value_summary", "world_model_earned", "VALUE_KEYS"]

VALUE_KEYS = ("value/n_eff", "value/ratio_vs_real", "value/ratio_vs_anchors")


def predicted_compute_ratios(
    *,
    n_effective: float,
    n_real: int,
    n_rollouts: int,
    n_executed: int,
    generation_s: float,
    execution_s: float,
    step_total_s: float,
) -> tuple[float, float]:
    r""":math:`(q_{\text{real}}, q_{\text{anchors}})` of the module docstring.

    :param n_effective: real rollouts the update is worth.
    :param n_real: anchor rollouts with a real reward (:math:`n_R`).
    :param n_rollouts: rollouts generated this step (:math:`N`).
    :param n_executed: rollouts executed this step.
    :param generation_s: this step's charged generation seconds (all rollouts).
    :param execution_s: this step's charged execution seconds (the executed rollouts).
    :param step_total_s: this step's charged seconds, every stage (:math:`C`).
    """
    if n_rollouts <= 0 or n_executed <= 0 or not step_total_s > 0 or not math.isfinite(n_effective):
        return math.nan, math.nan
    c_gen, c_exec = generation_s / n_rollouts, execution_s / n_executed
    q_real = n_effective * (c_gen + c_exec) / step_total_s
    if n_real <= 0:
        return q_real, math.nan
    q_anchors = n_effective / n_real * (n_rollouts * c_gen + n_real * c_exec) / step_total_s
    return q_real, q_anchors


def value_record(record: dict[str, Any], ledger: Any, n_rollouts: int) -> dict[str, float]:
    """``value/n_eff``, ``value/ratio_vs_real`` and ``value/ratio_vs_anchors`` of a step, from its
    record's ``fusion/n_effective`` and ``fusion/n_real`` and the ledger's per-step charges
    (:class:`~wmrl_core.ledger.ComputeLedger`)."""
    n_eff = float(record.get("fusion/n_effective", math.nan))
    step = ledger.step
    q_real, q_anchors = predicted_compute_ratios(
        n_effective=n_eff,
        n_real=int(record.get("fusion/n_real", 0)),
        n_rollouts=n_rollouts,
        n_executed=int(step["execution"].items),
        generation_s=float(step["generation"].charged_s),
        execution_s=float(step["execution"].charged_s),
        step_total_s=float(sum(t.charged_s for t in step.values())),
    )
    return {"value/n_eff": n_eff, "value/ratio_vs_real": q_real, "value/ratio_vs_anchors": q_anchors}


def value_summary(records: list[dict[str, Any]]) -> dict[str, float]:
    """Run averages of :data:`VALUE_KEYS` over the training steps that define them (NaN-aware)."""
    from wmrl_core.metrics import nanmean

    return {key: nanmean(r.get(key) for r in records if key in r) for key in VALUE_KEYS}


def world_model_earned(records: list[dict[str, Any]]) -> dict[str, Any]:
    r"""What the world model earned over a run's training steps (``mode=wmrl``; empty otherwise):

    * ``gate_opened_at``: the first step whose fusion gave it weight (``fusion/gate_open``, or a
      weight above 0 for fusers without a gate); ``None`` if none did;
    * ``mean_weight``: its mean weight :math:`\bar w_W` (``fusion/w_world_model``);
    * ``effective_per_executed``: :math:`\sum_t n_{\text{eff},t} / \sum_t n_{R,t}` over the steps with
      anchor rollouts (:math:`n_{R,t} > 0`), the real rollouts the updates were worth per anchor rollout
      executed (1: the world model added nothing); a step without anchors buys nothing from execution.
    """
    from wmrl_core.metrics import nanmean

    steps = [r for r in records if r.get("fusion/w_world_model") is not None and r.get("anchors/groups") is not None]
    if not steps:
        return {}
    opened = [
        r["step"]
        for r in steps
        if (r["fusion/gate_open"] == 1.0 if r.get("fusion/gate_open") is not None else r["fusion/w_world_model"] > 0)
    ]
    n_real = sum(float(r.get("fusion/n_real") or 0.0) for r in steps)
    n_eff = sum(float(r.get("fusion/n_effective") or 0.0) for r in steps if r.get("fusion/n_real"))
    return {
        "gate_opened_at": opened[0] if opened else None,
        "steps": len(steps),
        "mean_weight": nanmean(r["fusion/w_world_model"] for r in steps),
        "effective_per_executed": n_eff / n_real if n_real else math.nan,
    }

r"""Pooled fusion: the two streams weighted by their share of rollouts with a reward.

.. math:: L = w_R\,L(\mathcal A; A^R) + w_W\,L(\bar{\mathcal A}; A^C), \qquad
   w_S = \frac{n_S}{n_R + n_W},

what GRPO over the union of both streams would weigh them as, with no estimate of how good
the world model is. With no rewarded rollout at all the stream that has rows takes the
weight. It is what ``mode=real`` (every group an anchor) and ``mode=world_model`` (none) train
with, and the ablation ``fusion.method=pooled`` in ``mode=wmrl``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wmrl_core.fusion.base import FusionInputs, FusionPlan, LossTerm
from wmrl_core.registry import NoSettings

__all__ = ["pooled_weights", "PooledFuser", "pooled_fuser"]


def pooled_weights(n_real: int, n_world_model: int, any_anchor: bool) -> tuple[float, float]:
    """:math:`(n_R, n_W)/(n_R + n_W)`; without any rewarded rollout, all weight on the stream
    with rows (the real one when there are anchors)."""
    if n_real < 0 or n_world_model < 0:
        raise ValueError(f"sample counts must be >= 0, got {n_real}, {n_world_model}")
    total = n_real + n_world_model
    if total == 0:
        return float(any_anchor), float(not any_anchor)
    return n_real / total, n_world_model / total


class PooledFuser:
    """:func:`pooled_weights` of the step's streams; learns nothing, so its state is empty."""

    def plan(self, step: FusionInputs) -> FusionPlan:
        w_real, w_wm = pooled_weights(step.n_real, step.n_world_model, bool(np.any(step.is_anchor)))
        terms = (
            LossTerm(w_real, step.advantages, step.is_anchor),
            LossTerm(w_wm, step.advantages, ~step.is_anchor),
        )
        return FusionPlan(terms=terms, w_real=w_real, w_world_model=w_wm, n_effective=float(step.n_real))

    def fit(self, step: FusionInputs) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


def pooled_fuser(settings: NoSettings) -> PooledFuser:
    """The ``pooled`` method's factory (registered in :mod:`wmrl_core.fusion.plugin`); it has no settings."""
    return PooledFuser()

r"""Anchors-only fusion: GRPO on the anchor groups' real advantages alone, the world model unused.

.. math:: L = 1\cdot L(\mathcal A; A^R) + 0\cdot L(\bar{\mathcal A}; A^C), \qquad
   \hat g = \bar h^R_{\mathcal A},

rectified fusion at :math:`\lambda = 0`: the same executions as ``mode=wmrl`` (the anchors), no
information from the world model. It is the control that credits the world model (the house
evidence rules, ``/work/shared/EVIDENCE.md``): a WMRL gain counts only beyond it. The
world-model rows keep a term of weight 0, so the plan has the same shape as every other
method's and its metrics report :math:`w_W = 0`. Learns nothing, so its state is empty.
"""

from __future__ import annotations

from wmrl_core.fusion.base import FusionInputs, FusionPlan, LossTerm
from wmrl_core.fusion.pooled import PooledFuser
from wmrl_core.registry import NoSettings

__all__ = ["AnchorsOnlyFuser", "anchors_only_fuser"]


class AnchorsOnlyFuser(PooledFuser):
    """Weight 1 on the anchor rows' real advantages, 0 on the world-model rows; like
    :class:`~wmrl_core.fusion.pooled.PooledFuser` (whose empty ``fit`` and state it keeps) it
    learns nothing."""

    def plan(self, step: FusionInputs) -> FusionPlan:
        terms = (
            LossTerm(1.0, step.advantages, step.is_anchor),
            LossTerm(0.0, step.advantages, ~step.is_anchor),
        )
        return FusionPlan(terms=terms, w_real=1.0, w_world_model=0.0, n_effective=float(step.n_real), lam=0.0)


def anchors_only_fuser(settings: NoSettings) -> AnchorsOnlyFuser:
    """The ``anchors_only`` method's factory (registered in :mod:`wmrl_core.fusion.plugin`); it has no settings."""
    return AnchorsOnlyFuser()

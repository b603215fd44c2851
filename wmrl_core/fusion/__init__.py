"""Fusion of the real (anchor) and world-model GRPO gradient streams.

One module per method (:mod:`.pooled`, :mod:`.inverse_variance`, :mod:`.rectified`,
:mod:`.shrinkage`, :mod:`.anchors_only`), each a
:class:`~wmrl_core.fusion.base.Fuser` with its settings dataclass, registered through the
``wmrl_register_fusers`` hook (:mod:`.plugin`) and built by name (:mod:`.methods`); the shared
loss terms and effective advantages (:mod:`.base`); per-group policy gradients for the fusers
that weigh by them (:mod:`.gradients`); and :func:`fuse_step`, the engine between
rewards and loss that WMRL's trainer and external trainers call (:mod:`.engine`).
"""

from wmrl_core.fusion.anchors_only import AnchorsOnlyFuser
from wmrl_core.fusion.base import (
    Fuser,
    FusionInputs,
    FusionPlan,
    LossTerm,
    effective_advantage_loss,
    effective_advantages,
    loss_normalizers,
    multi_term_loss,
)
from wmrl_core.fusion.engine import FusedStep, FusionSettings, fuse_step, fused_loss
from wmrl_core.fusion.gradients import PolicyGradients
from wmrl_core.fusion.inverse_variance import (
    FusionWeights,
    InverseVarianceFuser,
    cross_fitted_calibration,
    explained_within_group_variance,
    inverse_variance_weights,
)
from wmrl_core.fusion.methods import build_fuser, fuser_settings, fusion_method_spec, registered_fusers
from wmrl_core.fusion.pooled import PooledFuser, pooled_weights
from wmrl_core.fusion.rectified import RectifiedFuser
from wmrl_core.fusion.shrinkage import ShrinkageFuser

__all__ = [
    "AnchorsOnlyFuser",
    "Fuser",
    "FusedStep",
    "FusionInputs",
    "FusionPlan",
    "FusionSettings",
    "FusionWeights",
    "InverseVarianceFuser",
    "LossTerm",
    "PolicyGradients",
    "PooledFuser",
    "RectifiedFuser",
    "ShrinkageFuser",
    "build_fuser",
    "cross_fitted_calibration",
    "effective_advantage_loss",
    "effective_advantages",
    "explained_within_group_variance",
    "fuse_step",
    "fuser_settings",
    "fusion_method_spec",
    "fused_loss",
    "inverse_variance_weights",
    "loss_normalizers",
    "multi_term_loss",
    "pooled_weights",
    "registered_fusers",
]

"""Fusion of the real (anchor) and world-model GRPO gradient streams.

One module per method (:mod:`.pooled`, :mod:`.inverse_variance`, :mod:`.rectified`,
:mod:`.shrinkage`, :mod:`.anchors_only`), each a
:class:`~wmrl_core.fusion.base.Fuser` with its settings dataclass (defined in :mod:`.settings`,
which imports neither torch nor scipy, and re-exported by its module), registered through the
``wmrl_register_fusers`` hook (:mod:`.plugin`) and built by name (:mod:`.methods`); the shared
loss terms and effective advantages (:mod:`.base`); per-group policy gradients for the fusers
that weigh by them (:mod:`.gradients`); and :func:`fuse_step`, the engine between
rewards and loss that WMRL's trainer and external trainers call (:mod:`.engine`).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Imported when first used, not with the package: the registry, the config and `wmrl train --help`
# import wmrl_core.fusion.plugin and .methods, which must not pull in torch, scipy and scikit-learn.
_LAZY = {
    "AnchorsOnlyFuser": "wmrl_core.fusion.anchors_only",
    "FusedStep": "wmrl_core.fusion.engine",
    "Fuser": "wmrl_core.fusion.base",
    "FusionInputs": "wmrl_core.fusion.base",
    "FusionPlan": "wmrl_core.fusion.base",
    "FusionSettings": "wmrl_core.fusion.engine",
    "FusionWeights": "wmrl_core.fusion.inverse_variance",
    "InverseVarianceFuser": "wmrl_core.fusion.inverse_variance",
    "LossTerm": "wmrl_core.fusion.base",
    "PolicyGradients": "wmrl_core.fusion.gradients",
    "PooledFuser": "wmrl_core.fusion.pooled",
    "RectifiedFuser": "wmrl_core.fusion.rectified",
    "ShrinkageFuser": "wmrl_core.fusion.shrinkage",
    "build_fuser": "wmrl_core.fusion.methods",
    "cross_fitted_calibration": "wmrl_core.fusion.inverse_variance",
    "effective_advantage_loss": "wmrl_core.fusion.base",
    "effective_advantages": "wmrl_core.fusion.base",
    "explained_within_group_variance": "wmrl_core.fusion.inverse_variance",
    "fuse_step": "wmrl_core.fusion.engine",
    "fused_loss": "wmrl_core.fusion.engine",
    "fuser_settings": "wmrl_core.fusion.methods",
    "fusion_method_spec": "wmrl_core.fusion.methods",
    "inverse_variance_weights": "wmrl_core.fusion.inverse_variance",
    "loss_normalizers": "wmrl_core.fusion.base",
    "multi_term_loss": "wmrl_core.fusion.base",
    "pooled_weights": "wmrl_core.fusion.pooled",
    "registered_fusers": "wmrl_core.fusion.methods",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value

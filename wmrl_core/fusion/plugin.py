"""WMRL's own fusion methods, registered through ``wmrl_register_fusers`` like any plugin's.

Each is one module of ``wmrl_core/fusion/`` with its fuser and its factory, its settings dataclass
(what ``fusion.kwargs`` holds) in :mod:`wmrl_core.fusion.settings`; entry points and settings are
named as strings, so a method's module (torch, scipy) is imported only when it is built, and
checking a config or printing ``wmrl train --help`` imports only the settings.
"""

from __future__ import annotations

from wmrl_core import hookimpl
from wmrl_core.registry import FuserTable

__all__ = ["wmrl_register_fusers"]


@hookimpl
def wmrl_register_fusers(table: FuserTable) -> None:
    table.add(
        "mse_weighted",
        "wmrl_core.fusion.mse:mse_weighted_fuser",
        settings="wmrl_core.fusion.settings:MSEWeightedSettings",
        description="the default: anchors alone until an anytime-valid test on all anchors so far shows the world "
        "model ranking like real execution, then the smaller of the inverse-variance weight and the MSE-optimal "
        "one (which counts the calibrated stream's bias as the anchors measure it)",
        needs_anchors_every_step=True,
    )
    table.add(
        "rectified",
        "wmrl_core.fusion.rectified:rectified_fuser",
        settings="wmrl_core.fusion.settings:RectifiedSettings",
        description="anchor gradient plus lambda times (calibrated gradient over all groups minus over the "
        "anchor groups): unbiased for any lambda, lambda power-tuned on earlier anchors",
        needs_anchors_every_step=True,
    )
    table.add(
        "shrinkage",
        "wmrl_core.fusion.shrinkage:shrinkage_fuser",
        settings="wmrl_core.fusion.settings:ShrinkageSettings",
        description="the rectified update moved toward the inverse-variance (or calibrated) one by alpha, "
        "the MSE-optimal weight estimated from earlier anchor groups' gradients; alpha = 0 unless the "
        "anchors show the world model ranking within groups",
        needs_anchors_every_step=True,
    )
    table.add(
        "inverse_variance",
        "wmrl_core.fusion.inverse_variance:inverse_variance_fuser",
        settings="wmrl_core.fusion.settings:InverseVarianceSettings",
        description="convex combination of the two streams weighted by their inverse variances "
        "(the world model's explained within-group variance on the anchors)",
    )
    table.add(
        "pooled",
        "wmrl_core.fusion.pooled:pooled_fuser",
        description="both streams weighted by their share of rewarded rollouts, no estimate of the "
        "world model's quality (the ablation; what modes real and world_model use)",
    )
    table.add(
        "anchors_only",
        "wmrl_core.fusion.anchors_only:anchors_only_fuser",
        description="GRPO on the anchor groups' real advantages alone (lambda = 0, the world model unused): "
        "the control with WMRL's executions and no world model",
        needs_anchors_every_step=True,
    )

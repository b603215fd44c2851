"""The table of fusion methods: config validation, the CLI (``wmrl train --help``) and the
docs (docs/method.md, checked by ``tests/test_fusion_interface.py``) all read :data:`FUSION_METHODS`.

A new method is one module in ``wmrl_core/fusion/`` with a class that follows
:class:`~wmrl_core.fusion.base.Fuser`, and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wmrl_core.fusion.anchors_only import AnchorsOnlyFuser
from wmrl_core.fusion.base import Fuser
from wmrl_core.fusion.inverse_variance import InverseVarianceFuser
from wmrl_core.fusion.pooled import PooledFuser
from wmrl_core.fusion.rectified import RectifiedFuser
from wmrl_core.fusion.shrinkage import ShrinkageFuser

__all__ = ["FusionMethod", "FUSION_METHODS", "build_fuser", "describe_methods"]


@dataclass(frozen=True)
class FusionMethod:
    """One fusion method.

    :param name: its ``fusion.method`` value.
    :param summary: one line for the CLI and the docs.
    :param module: where its derivation lives.
    :param build: makes a fresh fuser from the ``fusion`` config section.
    :param needs_anchors_every_step: the estimator is undefined on a step without anchor groups.
    """

    name: str
    summary: str
    module: str
    build: Callable[[Any], Fuser]
    needs_anchors_every_step: bool = False


def _rectified(f: Any) -> RectifiedFuser:
    return RectifiedFuser(
        window=f.lambda_window, moments=f.lambda_moments, level=f.lambda_level, min_groups=f.lambda_min_groups
    )


FUSION_METHODS: dict[str, FusionMethod] = {
    m.name: m
    for m in (
        FusionMethod(
            name="rectified",
            summary="anchor gradient plus lambda times (calibrated gradient over all groups minus over the "
            "anchor groups): unbiased for any lambda, lambda power-tuned on earlier anchors",
            module="wmrl_core/fusion/rectified.py",
            build=lambda f: _rectified(f),
            needs_anchors_every_step=True,
        ),
        FusionMethod(
            name="shrinkage",
            summary="the rectified update moved toward the inverse-variance (or calibrated) one by alpha, "
            "the MSE-optimal weight estimated from earlier anchor groups' gradients; alpha = 0 unless the "
            "anchors show the world model ranking within groups",
            module="wmrl_core/fusion/shrinkage.py",
            build=lambda f: ShrinkageFuser(
                rectified=_rectified(f), toward=f.shrinkage_toward, window=f.shrinkage_window, min_pairs=f.min_pairs
            ),
            needs_anchors_every_step=True,
        ),
        FusionMethod(
            name="inverse_variance",
            summary="convex combination of the two streams weighted by their inverse variances "
            "(the world model's explained within-group variance on the anchors)",
            module="wmrl_core/fusion/inverse_variance.py",
            build=lambda f: InverseVarianceFuser(min_pairs=f.min_pairs),
        ),
        FusionMethod(
            name="pooled",
            summary="both streams weighted by their share of rewarded rollouts, no estimate of the "
            "world model's quality (the ablation; what modes real and world_model use)",
            module="wmrl_core/fusion/pooled.py",
            build=lambda f: PooledFuser(),
        ),
        FusionMethod(
            name="anchors_only",
            summary="GRPO on the anchor groups' real advantages alone (lambda = 0, the world model unused): "
            "the control with WMRL's executions and no world model",
            module="wmrl_core/fusion/anchors_only.py",
            build=lambda f: AnchorsOnlyFuser(),
            needs_anchors_every_step=True,
        ),
    )
}


def build_fuser(method: str, section: Any) -> Fuser:
    """A fresh fuser of ``method`` configured by the ``fusion`` section ``section``."""
    if method not in FUSION_METHODS:
        raise ValueError(f"fusion method {method!r} is unknown; use one of {', '.join(FUSION_METHODS)}")
    return FUSION_METHODS[method].build(section)


def describe_methods() -> str:
    """``name: summary`` lines, one per method."""
    return "\n".join(f"  {m.name}: {m.summary}" for m in FUSION_METHODS.values())

"""The settings dataclasses of WMRL's own fusion methods (what ``fusion.kwargs`` holds), apart
from the methods: config validation and ``wmrl train --help`` read them without importing torch,
scipy or scikit-learn. Each method's module re-exports its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

__all__ = [
    "LAMBDA_MOMENTS",
    "SHRINKAGE_TARGETS",
    "MSEWeightedSettings",
    "InverseVarianceSettings",
    "RectifiedSettings",
    "ShrinkageSettings",
]

LAMBDA_MOMENTS = ("solution", "rollout", "gradient")
SHRINKAGE_TARGETS = ("inverse_variance", "calibrated")


@dataclass
class MSEWeightedSettings:
    """Settings of ``fusion.method=mse_weighted`` (``fusion.kwargs``)."""

    level: float = field(
        default=0.05,
        metadata={
            "help": "Gate: the probability that a world model carrying no information ever gets weight in a run "
            "(anytime-valid over all its steps)."
        },
    )
    close_level: float = field(
        default=0.05, metadata={"help": "Gate: the level of the test that closes it again when anchors disagree."}
    )
    close_below: float = field(
        default=0.0,
        metadata={"help": "Gate: closes once the anchors show a within-group correlation below this value."},
    )
    max_bet: float = field(
        default=0.5,
        metadata={"help": "Gate: the largest share of the closing test's wealth bet on one anchor group, in (0, 1)."},
    )
    window: int = field(
        default=60,
        metadata={"help": "Earlier anchor groups whose per-group gradients estimate the bias and the variances."},
    )
    min_pairs: int = field(
        default=4, metadata={"help": "Anchor pairs needed before the inverse-variance weight is estimated."}
    )
    validation_prior: bool = field(
        default=True,
        metadata={
            "help": "Gate: credit a rank correlation the world model declares from data it was not fitted on "
            "(its ``validation`` attribute), as capped pseudo-evidence that alone never opens the gate."
        },
    )
    bias_horizon: float = field(
        default=20.0,
        metadata={
            "help": "H: updates over which the calibrated stream's bias accumulates while sampling noise averages "
            "out; the weight minimises the mean of H updates' squared error (1: one update's)."
        },
    )
    # Optional, not ``float | None``: OmegaConf before 2.4 reads only ``Optional``
    rho2_quantile: Optional[float] = field(  # noqa: UP045
        default=0.05,
        metadata={
            "help": "The inverse-variance weight's rho^2: ``None``, the point estimate; q in (0, 0.5], its "
            "q-quantile over a bootstrap of the anchor groups (what the anchors vouch for at confidence 1-q)."
        },
    )

    def __post_init__(self) -> None:
        from wmrl_core.fusion.gate import AgreementGate  # scipy: only when settings are made, not for help

        AgreementGate(
            level=self.level, close_level=self.close_level, close_below=self.close_below, max_bet=self.max_bet
        )
        if self.window < 3:
            raise ValueError(f"window must be >= 3 anchor groups (the bias estimate needs pairs), got {self.window}")
        if self.min_pairs < 2:
            raise ValueError(f"min_pairs must be >= 2, got {self.min_pairs}")
        if not self.bias_horizon >= 1:
            raise ValueError(f"bias_horizon must be >= 1 update, got {self.bias_horizon}")
        if self.rho2_quantile is not None and not 0 < self.rho2_quantile <= 0.5:
            raise ValueError(
                f"rho2_quantile must be in (0, 0.5] or None (the point estimate), got {self.rho2_quantile}"
            )


@dataclass
class InverseVarianceSettings:
    """``fusion.kwargs`` of ``fusion.method=inverse_variance``."""

    min_pairs: int = field(default=4, metadata={"help": "anchor pairs needed before the world model gets any weight."})


@dataclass
class RectifiedSettings:
    """``fusion.kwargs`` of ``fusion.method=rectified`` (and of ``shrinkage``, which rectifies first)."""

    lambda_window: int = field(
        default=20,
        metadata={
            "help": "lambda is power-tuned on earlier steps' anchor groups, back to the ``lambda_window``-th most "
            "recent group whose calibrated advantages are not all zero."
        },
    )
    lambda_moments: str = field(
        default="solution",
        metadata={
            "help": "``solution`` sums the advantages of a group's rollouts with equal solutions (equal score "
            "vectors) before the moments that tune lambda; ``rollout`` treats every rollout as distinct; "
            "``gradient`` takes the slope from per-group policy gradients (whole, or sketched with "
            "``fusion.gradient_sketch_dim``; WMRL's own trainer only). See ``wmrl_core/fusion/rectified.py``.",
            "choices": LAMBDA_MOMENTS,
        },
    )
    # Optional, not ``float | None``: the settings are checked through OmegaConf, whose versions before
    # 2.4 (which hydra, and so verl, pins) read only Optional
    lambda_level: Optional[float] = field(  # noqa: UP045
        default=0.999,
        metadata={
            "help": "lambda is 0 unless its slope passes a one-sided test at this level against its variance were "
            "the world model independent of the real rewards (exact for any number of anchor groups; 0.999 "
            "keeps a noise world model's weight at 0 with one anchor group a step); ``None``: no test, the "
            "plain positive-part James-Stein factor only."
        },
    )
    lambda_min_groups: int = field(
        default=2,
        metadata={"help": "lambda is 0 until the window holds this many informative anchor groups."},
    )

    def __post_init__(self) -> None:
        if self.lambda_window < 2:
            raise ValueError(
                f"lambda_window must be >= 2 informative anchor groups (a slope's variance needs two), "
                f"got {self.lambda_window}"
            )
        if self.lambda_level is not None and not 0.5 <= self.lambda_level < 1.0:
            raise ValueError(
                f"lambda_level must be in [0.5, 1) or null (the plain James-Stein factor), got {self.lambda_level}"
            )
        if not 2 <= self.lambda_min_groups <= self.lambda_window:
            raise ValueError(
                f"lambda_min_groups must be in [2, lambda_window={self.lambda_window}], got {self.lambda_min_groups}"
            )


@dataclass
class ShrinkageSettings(RectifiedSettings):
    """``fusion.kwargs`` of ``fusion.method=shrinkage``: its rectified update's (the ``lambda_*``
    settings) and its own."""

    shrinkage_toward: str = field(
        default="inverse_variance",
        metadata={
            "help": "the update the rectified one is shrunk toward, ``inverse_variance`` (the convex combination) "
            "or ``calibrated`` (the calibrated-advantage gradient over all groups).",
            "choices": SHRINKAGE_TARGETS,
        },
    )
    shrinkage_window: int = field(
        default=20,
        metadata={
            "help": "earlier steps' anchor groups whose per-group gradients estimate the shrinkage weight alpha "
            "(cross-fitted: never this step's)."
        },
    )
    min_pairs: int = field(
        default=4,
        metadata={
            "help": "the ``inverse_variance`` target: anchor pairs needed before the world model gets any weight."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.shrinkage_window < 3:
            raise ValueError(
                f"shrinkage_window must be >= 3 anchor groups (the bias estimate needs pairs of groups), "
                f"got {self.shrinkage_window}"
            )

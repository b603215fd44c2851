"""The enumerated values of settings that :class:`~wmrl_core.config.TrainConfig` names by
``"module:NAME"`` (its ``choices`` metadata), kept apart from the modules that use them so that
checking a config and ``wmrl train --help`` read them without importing torch or scikit-learn.
The using modules re-export them under their old names.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["ADVANTAGE_SCALES", "CALIBRATORS", "LossAggregation"]

CALIBRATORS = ("isotonic", "smoothed", "ranked")
"""``calibration.calibrator``: the maps of :class:`wmrl_core.calibration.RewardCalibrator`."""

ADVANTAGE_SCALES = ("own", "real")
"""``fusion.advantage_scale``: what :mod:`wmrl_core.fusion.engine` scales the calibrated advantages by."""

LossAggregation = Literal["token_mean", "sequence_mean"]
"""``grpo.aggregation``: how :func:`wmrl_core.grpo.aggregate` reduces per-token terms."""

"""Deprecated: the calibrator moved to :mod:`wmrl_core.calibration`, where ``IsotonicDebiaser`` is
:class:`~wmrl_core.calibration.RewardCalibrator`. Importing this module warns; it will be removed."""

import warnings

from wmrl_core.calibration import CALIBRATORS, RewardCalibrator, ranked_isotonic, smoothed_isotonic

__all__ = ["IsotonicDebiaser", "RewardCalibrator", "smoothed_isotonic", "ranked_isotonic", "CALIBRATORS"]

warnings.warn(
    "wmrl_core.debias is deprecated: import RewardCalibrator (formerly IsotonicDebiaser) from wmrl_core.calibration",
    DeprecationWarning,
    stacklevel=2,
)

IsotonicDebiaser = RewardCalibrator
"""Deprecated name of :class:`~wmrl_core.calibration.RewardCalibrator`."""

"""WMRL: world-model reinforcement learning.

GRPO where most groups are scored by a cheap world model, a thin slice of *anchor* groups
is executed for real, a monotone map fitted on the anchors calibrates the world-model rewards
online (:mod:`wmrl_core.calibration`), and the two gradient streams are fused by a registered
fusion method. The default, ``mse_weighted`` (:mod:`wmrl_core.fusion.mse`), trains on the anchors
alone until an anytime-valid test shows the world model ranking solutions like real execution,
then gives the world-model stream the smaller of its inverse-variance and MSE weights.
"""

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("wmrl")
"""Decorator for plugin hook implementations: ``@wmrl_core.hookimpl``."""

__all__ = ["hookimpl", "__version__"]

"""WMRL: world-model reinforcement learning.

GRPO where most groups are scored by a cheap world model, a thin slice of *anchor* groups
is executed for real, a monotone map fitted on the anchors calibrates the world model online,
and the two gradient streams are fused by a registered fusion method (by default: the anchors
alone until an anytime-valid test shows the world model ranking like real execution, then an
MSE-weighted combination).
"""

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("wmrl")
"""Decorator for plugin hook implementations: ``@wmrl_core.hookimpl``."""

__all__ = ["hookimpl", "__version__"]

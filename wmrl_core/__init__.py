"""WMRL: world-model reinforcement learning.

GRPO where most groups are scored by a cheap world model, a thin slice of *anchor* groups
is executed for real, an isotonic map debiases the world model online, and the two
gradient streams are fused with inverse-variance weights.
"""

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("wmrl")
"""Decorator for plugin hook implementations: ``@wmrl_core.hookimpl``."""

__all__ = ["hookimpl", "__version__"]

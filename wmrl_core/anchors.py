"""Choosing the anchor groups: the few groups that are executed for real each step."""

from __future__ import annotations

import numpy as np

__all__ = ["AnchorSampler"]


class AnchorSampler:
    """Marks ``max(min_groups, round(fraction * B))`` of ``B`` groups as anchors, uniformly.

    The draw depends only on ``(seed, step)``, so a resumed run picks the same anchors as an
    uninterrupted one and no RNG state needs saving.

    :param fraction: share of groups executed for real, in [0, 1] (1.0 is plain GRPO).
    :param min_groups: lower bound per step (1 keeps the calibrator fed every step).
    :param seed: base seed.
    """

    def __init__(self, *, fraction: float = 0.1, min_groups: int = 1, seed: int = 0):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"anchor fraction must be in [0, 1], got {fraction}")
        if min_groups < 0:
            raise ValueError(f"min_groups must be >= 0, got {min_groups}")
        self.fraction, self.min_groups, self.seed = fraction, min_groups, seed

    def n_anchors(self, n_groups: int) -> int:
        return min(n_groups, max(self.min_groups, int(round(self.fraction * n_groups))))

    def sample(self, n_groups: int, step: int) -> np.ndarray:
        """Boolean mask (n_groups,), True for anchor groups."""
        k = self.n_anchors(n_groups)
        rng = np.random.default_rng([self.seed, step, 0xA2C])
        mask = np.zeros(n_groups, dtype=bool)
        mask[rng.choice(n_groups, size=k, replace=False)] = True
        return mask

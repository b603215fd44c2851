"""Confidence intervals for success rates."""

from __future__ import annotations

import math

__all__ = ["wilson_interval"]


def wilson_interval(successes: int, trials: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95 % for the default ``z``).

    ``p = k/n``, centre ``(p + z²/2n) / (1 + z²/n)``, half-width
    ``z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)``. Unlike the normal interval it stays inside
    [0, 1] and is not degenerate at 0/n or n/n.

    :return: (low, high) as fractions in [0, 1]; (0, 1) when ``trials == 0``.
    """
    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes}/{trials}")
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)

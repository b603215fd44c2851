r"""Online calibration of world-model rewards against real ones, by isotonic regression on the anchors.

The world model's reward ``w`` is assumed to be a monotone but otherwise unknown
(nonlinear, biased) function of the real reward plus noise. The best monotone map
:math:`\hat f = \arg\min_{f\uparrow} \sum_j (r_j - f(w_j))^2` over the anchor pairs
:math:`(w_j, r_j)` seen so far is refit after every step; calibrated rewards are
:math:`\hat f(w)`. The trainer calibrates a step's world-model rewards *before* adding that
step's anchor pairs, so no anchor is used both to fit the map and to judge it. Before the first
anchors the map is the identity; outside the seen range predictions are clipped to the nearest
fitted value.

Isotonic regression is a step function: fitted on few pairs it maps world-model scores that
differ to the same value, and a group whose calibrated rewards are all equal has zero GRPO
advantage, so calibration erases rankings the world model made. ``calibrator="smoothed"``
keeps the isotonic levels but joins them strictly monotonically (:func:`smoothed_isotonic`):

.. math:: \tilde f(w) = \operatorname{interp}\big(w;\ (\bar w_b, \hat f_b)_b\big) + \delta\,(w - \bar w),
   \qquad \delta = \text{slope}\cdot \operatorname{sd}(r)/\operatorname{sd}(w),

linear interpolation between the isotonic blocks :math:`b` (at the mean score
:math:`\bar w_b` of each block's pairs, with its level :math:`\hat f_b`) plus a small tilt
that keeps scores outside the fitted range, or inside a single block, apart. Between block
centres the interpolation is already strictly increasing; the tilt moves a value by at most
``slope`` standard deviations of the real reward per standard deviation of the score.

``calibrator="ranked"`` keeps the isotonic levels and breaks the ties they leave inside a group
by the raw scores' order within the group (:func:`ranked_isotonic`):

.. math:: \tilde f(w_i) = \hat f(w_i) + \text{slope}\cdot\hat\sigma_W\,\frac{\operatorname{rank}_g(w_i) - (n_g+1)/2}{n_g},

with :math:`\hat\sigma_W` the real rewards' pooled within-group standard deviation (while no stored
group has two pairs, the standard deviation of all stored real rewards): a group the step function
ties keeps the world model's order, at a spread of at most ``slope`` real within-group standard
deviations, so a weak world model's tie-breaks stay small.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.isotonic import IsotonicRegression

from wmrl_core.config_choices import CALIBRATORS

__all__ = ["RewardCalibrator", "smoothed_isotonic", "ranked_isotonic", "CALIBRATORS"]


def smoothed_isotonic(
    x_fit: np.ndarray, levels: np.ndarray, x: np.ndarray, *, slope: float, y_scale: float, increasing: bool = True
) -> np.ndarray:
    """:math:`\\tilde f(x) = \\operatorname{interp}(x; (\\bar x_b, \\hat f_b)) \\pm \\delta (x - \\bar x)`,
    :math:`\\delta = \\text{slope}\\cdot y_{scale}/\\operatorname{sd}(x_{fit})` (sign of the monotone direction).

    :param x_fit: the fitted pairs' scores; ``levels``: their isotonic fitted values (blocks
        are runs of equal level).
    :param x: scores to calibrate (finite).
    """
    x_fit, levels, x = (np.asarray(a, dtype=np.float64) for a in (x_fit, levels, x))
    unique_levels, block = np.unique(levels, return_inverse=True)
    centers = np.bincount(block, weights=x_fit) / np.bincount(block)
    order = np.argsort(centers)
    base = np.interp(x, centers[order], unique_levels[order])
    sd = float(x_fit.std())
    delta = slope * y_scale / sd if sd > 1e-12 else 0.0
    return base + (1.0 if increasing else -1.0) * delta * (x - float(x_fit.mean()))


def ranked_isotonic(
    levels: np.ndarray, x: np.ndarray, groups: np.ndarray, *, slope: float, y_scale: float, increasing: bool = True
) -> np.ndarray:
    r""":math:`\hat f(w_i) + \text{slope}\cdot y_{scale}(\operatorname{rank}_g(w_i) - (n_g+1)/2)/n_g` (module
    docstring); ranks are average ranks (equal raw scores stay equal), reversed when decreasing.

    :param levels: the isotonic map's values :math:`\hat f(x)` at ``x``.
    :param groups: the group of each score.
    """
    from scipy.stats import rankdata

    levels, x, groups = np.asarray(levels, dtype=np.float64), np.asarray(x, dtype=np.float64), np.asarray(groups)
    out = levels.copy()
    sign = 1.0 if increasing else -1.0
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        centered = (rankdata(x[idx]) - (idx.size + 1) / 2) / idx.size
        out[idx] += sign * slope * y_scale * centered
    return out


class RewardCalibrator:
    """A monotone map from world-model reward to real reward, refit online.

    :param window: keep only the most recent ``window`` anchor pairs (``None``: all).
    :param increasing: ``True`` when a higher world-model reward means a higher real one.
    :param calibrator: ``isotonic`` (the step function), ``smoothed`` (strictly monotone,
        see :func:`smoothed_isotonic`) or ``ranked`` (isotonic levels, ties broken by the raw
        order within each group, :func:`ranked_isotonic`).
    :param slope: the smoothed calibrator's tilt, in real-reward sds per score sd; the ranked
        one's spread, in real within-group sds.

    Fitted attributes: ``n_pairs_``, ``x_`` / ``y_`` / ``groups_`` (the stored pairs and the
    group key of each), ``isotonic_`` (the scikit-learn estimator, ``None`` before data).
    """

    def __init__(
        self, *, window: int | None = None, increasing: bool = True, calibrator: str = "isotonic", slope: float = 0.01
    ):
        if window is not None and window < 2:
            raise ValueError(f"window must be >= 2 pairs or None, got {window}")
        if calibrator not in CALIBRATORS:
            raise ValueError(f"calibrator={calibrator!r} is unknown; use one of {', '.join(CALIBRATORS)}")
        if not slope >= 0:  # written so that NaN fails too
            raise ValueError(f"slope must be >= 0, got {slope}")
        self.window = window
        self.increasing = increasing
        self.calibrator, self.slope = calibrator, slope
        self.x_ = np.empty(0)
        self.y_ = np.empty(0)
        self.groups_ = np.empty(0, dtype=np.int64)
        self.isotonic_: IsotonicRegression | None = None

    @classmethod
    def from_config(cls, calibration: Any) -> RewardCalibrator:
        """The calibrator a run's ``calibration`` section asks for (its window, map and slope)."""
        return cls(window=calibration.window, calibrator=calibration.calibrator, slope=calibration.slope)

    @property
    def n_pairs_(self) -> int:
        return int(self.x_.size)

    def update(self, world_model_rewards: np.ndarray, real_rewards: np.ndarray, groups: np.ndarray) -> None:
        """Add anchor pairs (NaNs dropped) and refit.

        :param groups: int key of each pair's group (unique across steps): fusers and the
            ``ranked`` calibrator compare rewards within groups.
        """
        x = np.asarray(world_model_rewards, dtype=np.float64)
        y = np.asarray(real_rewards, dtype=np.float64)
        g = np.asarray(groups, dtype=np.int64)
        if not (x.shape == y.shape == g.shape) or x.ndim != 1:
            raise ValueError(f"pairs must be 1-D of equal length, got {x.shape}, {y.shape}, {g.shape}")
        keep = np.isfinite(x) & np.isfinite(y)
        self.x_ = np.concatenate([self.x_, x[keep]])
        self.y_ = np.concatenate([self.y_, y[keep]])
        self.groups_ = np.concatenate([self.groups_, g[keep]])
        if self.window is not None and self.x_.size > self.window:
            self.x_, self.y_, self.groups_ = (
                self.x_[-self.window :],
                self.y_[-self.window :],
                self.groups_[-self.window :],
            )
        self._refit()

    def _refit(self) -> None:
        if self.x_.size == 0:
            self.isotonic_ = None
            return
        iso = IsotonicRegression(increasing=self.increasing, out_of_bounds="clip")
        with warnings.catch_warnings():
            # one distinct x gives a constant map, which is the honest answer
            warnings.simplefilter("ignore", RuntimeWarning)
            iso.fit(self.x_, self.y_)
        self.isotonic_ = iso

    def real_within_group_sd(self) -> float:
        """The stored real rewards' pooled within-group standard deviation (NaN without a group of two)."""
        from wmrl_core.grpo import pooled_within_group_sd

        return pooled_within_group_sd(self.y_, self.groups_)

    def transform(self, world_model_rewards: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
        """Calibrated rewards; identity before any anchor pair; NaN stays NaN.

        :param groups: the group of each reward, which the ``ranked`` calibrator needs (``None``: one group).
        """
        x = np.asarray(world_model_rewards, dtype=np.float64)
        if self.isotonic_ is None:
            return x.copy()
        out = np.full_like(x, np.nan)
        finite = np.isfinite(x)
        if finite.any():
            if self.calibrator == "smoothed":
                out[finite] = smoothed_isotonic(
                    self.x_,
                    self.isotonic_.predict(self.x_),
                    x[finite],
                    slope=self.slope,
                    y_scale=float(self.y_.std()),
                    increasing=self.increasing,
                )
            elif self.calibrator == "ranked":
                scale = self.real_within_group_sd()
                out[finite] = ranked_isotonic(
                    self.isotonic_.predict(x[finite]),
                    x[finite],
                    np.zeros(x.shape, dtype=np.int64)[finite] if groups is None else np.asarray(groups)[finite],
                    slope=self.slope,
                    y_scale=scale if np.isfinite(scale) else float(self.y_.std()),
                    increasing=self.increasing,
                )
            else:
                out[finite] = self.isotonic_.predict(x[finite])
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "x": self.x_.tolist(),
            "y": self.y_.tolist(),
            "groups": self.groups_.tolist(),
            "window": self.window,
            "increasing": self.increasing,
            "calibrator": self.calibrator,
            "slope": self.slope,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.window, self.increasing = state["window"], state["increasing"]
        self.calibrator, self.slope = state.get("calibrator", "isotonic"), state.get("slope", 0.01)
        self.x_ = np.asarray(state["x"], dtype=np.float64)
        self.y_ = np.asarray(state["y"], dtype=np.float64)
        self.groups_ = np.asarray(state["groups"], dtype=np.int64)
        self._refit()

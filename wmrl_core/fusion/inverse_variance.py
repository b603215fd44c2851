r"""Inverse-variance fusion of the real (anchor) and world-model GRPO gradients.

Each step yields two estimates of the policy gradient :math:`g^*`:

* :math:`\hat g_R` from the :math:`n_R` anchor rollouts scored by real execution: unbiased,
  but built from few samples;
* :math:`\hat g_W` from the :math:`n_W` world-model rollouts scored by calibrated rewards
  :math:`c = \hat f(w)`: many samples, but each carries the world model's error.

**Derivation.** GRPO's gradient is :math:`\frac1n\sum_i A_i \nabla\log\pi(y_i)` with advantages
standardized within groups, so every rollout contributes a term of the same scale
:math:`\kappa = E[A^2 |\nabla\log\pi|^2]` and :math:`\operatorname{Var}\hat g_R = \kappa/n_R`.
Write the real reward within a group as :math:`r = \rho\,c' + \sqrt{1-\rho^2}\,\xi` (standardized
:math:`c'`, :math:`\xi` orthogonal to it). The world-model advantages only carry the part of the
real advantage that :math:`c` explains, :math:`\rho^2` of its variance; the remainder is noise
of the same scale. A world-model rollout is therefore worth :math:`\rho^2` of a real one:
its effective sample size is :math:`\rho^2 n_W` and :math:`\operatorname{Var}\hat g_W = \kappa/(\rho^2 n_W)`.
The minimum-variance convex combination :math:`w_R\hat g_R + w_W\hat g_W` takes weights
proportional to the inverse variances:

.. math::  w_R = \frac{n_R + \epsilon}{n_R + \rho^2 n_W + \epsilon},\qquad w_W = 1 - w_R .

:math:`\rho^2` is estimated on the anchors, where both rewards exist, as the squared pooled
within-group correlation of the real and calibrated rewards after standardizing each within its
group (the per-group z-scores :math:`z`, which is what GRPO sees with scaled advantages):

.. math:: \hat\rho^2 = \max\Big(0, \frac{\sum_j z^r_j z^c_j}{\sqrt{\sum_j (z^r_j)^2 \sum_j (z^c_j)^2}}\Big)^2 .

It is scale-free: any within-group affine rescaling of the calibrated rewards leaves it
unchanged, so an uncalibrated world model on another scale is not read as uninformative; a
negative correlation (the world model ranks backwards) counts as 0. A group whose calibrated
rewards are all equal has :math:`z^c = 0` and explains none of its real variance. The calibrated
values :math:`c_j` are *cross-fitted*: the isotonic map is fitted on the other half of the anchor
groups, so it cannot explain its own noise.
:math:`n_R`, :math:`n_W` count the rollouts of each stream that have a reward (a group whose
rewards are all equal is a zero gradient estimate, not a missing one).

Consequences (each tested): a perfect world model (:math:`\hat\rho^2 = 1`) gets its share of
samples :math:`n_W/(n_R+n_W)`; one independent of the truth (:math:`\hat\rho^2 \to 0`) gets weight
near 0 and the update becomes plain GRPO on the anchors; with no evidence at all
(:math:`n_R = 0, \hat\rho^2 = 0`) the real stream takes all the weight; weights are finite and sum to 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.isotonic import IsotonicRegression

from wmrl_core.fusion.base import FusionInputs, FusionPlan, LossTerm
from wmrl_core.fusion.settings import InverseVarianceSettings

__all__ = [
    "InverseVarianceSettings",
    "inverse_variance_fuser",
    "FusionWeights",
    "inverse_variance_weights",
    "explained_within_group_variance",
    "cross_fitted_calibration",
    "InverseVarianceFuser",
]


@dataclass(frozen=True)
class FusionWeights:
    w_real: float
    w_world_model: float
    rho2: float
    n_real: int
    n_world_model: int


def inverse_variance_weights(
    n_real: float, n_world_model: float, rho2: float, eps: float = 1e-8
) -> tuple[float, float]:
    """:math:`w_R = (n_R+\\epsilon)/(n_R+\\rho^2 n_W+\\epsilon)`, :math:`w_W = 1-w_R` (see module docstring)."""
    if n_real < 0 or n_world_model < 0:
        raise ValueError(f"sample counts must be >= 0, got {n_real}, {n_world_model}")
    rho2 = float(np.clip(rho2, 0.0, 1.0)) if np.isfinite(rho2) else 0.0
    w_real = (n_real + eps) / (n_real + rho2 * n_world_model + eps)
    return float(w_real), float(1.0 - w_real)


def _center_within_groups(values: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values minus their group mean, and a mask of rows in groups of size >= 2."""
    out = np.zeros_like(values)
    keep = np.zeros(values.shape, dtype=bool)
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        if idx.size >= 2:
            out[idx] = values[idx] - values[idx].mean()
            keep[idx] = True
    return out, keep


def _standardize_within_groups(values: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-group z-scores (0 in groups without spread), and a mask of rows in groups of size >= 2."""
    centered, keep = _center_within_groups(values, groups)
    out = np.zeros_like(values)
    for g in np.unique(groups[keep]):
        idx = np.flatnonzero(groups == g)
        std = centered[idx].std()
        if std > 1e-12:
            out[idx] = centered[idx] / std
    return out, keep


def explained_within_group_variance(real: np.ndarray, calibrated: np.ndarray, groups: np.ndarray) -> float:
    """:math:`\\hat\\rho^2 = \\max(0, \\sum z^r z^c / \\sqrt{\\sum (z^r)^2 \\sum (z^c)^2})^2` over per-group
    z-scores; 0 without spread (see module docstring)."""
    real, calibrated, groups = (np.asarray(a) for a in (real, calibrated, groups))
    z_r, keep = _standardize_within_groups(real.astype(np.float64), groups)
    z_c, _ = _standardize_within_groups(calibrated.astype(np.float64), groups)
    z_r, z_c = z_r[keep], z_c[keep]
    denom = float(np.sqrt(np.sum(z_r**2) * np.sum(z_c**2)))
    if denom <= 1e-12:
        return 0.0
    corr = float(np.sum(z_r * z_c)) / denom
    return float(np.clip(corr, 0.0, 1.0) ** 2)


def explained_variance_lower_bound(
    real: np.ndarray, calibrated: np.ndarray, groups: np.ndarray, quantile: float, *, draws: int = 400
) -> float:
    r"""The ``quantile`` of :math:`\hat\rho^2` (:func:`explained_within_group_variance`) over a
    bootstrap of whole groups: the explained variance the anchor groups vouch for at confidence
    :math:`1-q`. Groups are the independent units (rollouts of one group share a task and a
    centring), so they are what is resampled. The draws are seeded by the data, so the bound is a
    function of the pairs alone (a resumed run computes the same one).

    With the per-group sums :math:`S^{rc}_g = \sum_{j\in g} z^r_j z^c_j` (and :math:`S^{rr}_g`,
    :math:`S^{cc}_g`) and multinomial counts :math:`m_b` of the :math:`G` groups in draw :math:`b`,

    .. math:: \rho^{2}_{b} = \max\Big(0, \frac{m_b\cdot S^{rc}}{\sqrt{(m_b\cdot S^{rr})(m_b\cdot S^{cc})}}\Big)^2,
       \qquad \rho^2_{q} = \operatorname{quantile}_q\{\rho^2_b\}.

    Every group of at least two pairs is resampled, tied ones too: a stream that ties within a group has
    z-scores 0 there and adds nothing to its sums, so a draw with no group where both streams vary gives 0,
    and tied anchor groups widen the bound rather than being dropped. 0 with fewer than two groups of two
    pairs.
    """
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    real, calibrated, groups = (np.asarray(a) for a in (real, calibrated, groups))
    z_r, keep = _standardize_within_groups(real.astype(np.float64), groups)
    z_c, _ = _standardize_within_groups(calibrated.astype(np.float64), groups)
    keys = np.unique(groups[keep])
    if keys.size < 2:
        return 0.0
    sums = np.array(
        [[np.sum(z_r[m] * z_c[m]), np.sum(z_r[m] ** 2), np.sum(z_c[m] ** 2)] for m in (groups == k for k in keys)]
    )
    seed = np.frombuffer(np.round(sums, 9).tobytes(), dtype=np.uint32)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(keys.size, np.full(keys.size, 1.0 / keys.size), size=draws).astype(np.float64)
    rc, rr, cc = (counts @ sums).T
    denom = np.sqrt(rr * cc)
    corr = np.divide(rc, denom, out=np.zeros_like(rc), where=denom > 1e-12)
    return float(np.quantile(np.clip(corr, 0.0, 1.0) ** 2, quantile))


def cross_fitted_calibration(
    world_model: np.ndarray, real: np.ndarray, groups: np.ndarray, n_folds: int = 2
) -> np.ndarray:
    """Isotonic calibration of each pair fitted on the pairs of the *other* folds (folds by group).

    With fewer than two groups there is nothing to cross-fit: the raw values come back, so
    :math:`\\hat\\rho^2` then measures the uncalibrated world model.
    """
    world_model, real, groups = (np.asarray(a) for a in (world_model, real, groups))
    unique = np.unique(groups)
    if unique.size < 2:
        return world_model.astype(np.float64).copy()
    fold_of_group = {g: i % n_folds for i, g in enumerate(unique)}
    folds = np.array([fold_of_group[g] for g in groups])
    out = np.empty(world_model.shape, dtype=np.float64)
    for k in range(n_folds):
        test = folds == k
        if not test.any():
            continue
        train = ~test
        iso = IsotonicRegression(out_of_bounds="clip").fit(world_model[train], real[train])
        out[test] = iso.predict(world_model[test])
    return out


class InverseVarianceFuser:
    """Fusion weights of the real and world-model gradient streams (see module docstring).

    :param eps: prior weight of the real stream, in rollouts; keeps weights finite when
        every estimate is zero.
    :param min_pairs: below this many anchor pairs :math:`\\hat\\rho^2` is taken as 0 (trust
        only the anchors until there is evidence).
    """

    def __init__(self, *, eps: float = 1e-3, min_pairs: int = 4):
        if eps <= 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        self.eps, self.min_pairs = eps, min_pairs

    def estimate_rho2(
        self,
        world_model: np.ndarray,
        real: np.ndarray,
        groups: np.ndarray,
        *,
        calibrate: bool = True,
        quantile: float | None = None,
    ) -> float:
        """:math:`\\hat\\rho^2` from anchor pairs (raw world-model rewards, real rewards, group keys);
        with ``quantile``, its bootstrap lower bound (:func:`explained_variance_lower_bound`)."""
        world_model = np.asarray(world_model, dtype=np.float64)
        if world_model.size < self.min_pairs:
            return 0.0
        calibrated = cross_fitted_calibration(world_model, real, groups) if calibrate else world_model
        if quantile is not None:
            return explained_variance_lower_bound(real, calibrated, groups, quantile)
        return explained_within_group_variance(real, calibrated, groups)

    def weights(self, n_real: int, n_world_model: int, rho2: float) -> FusionWeights:
        w_r, w_w = inverse_variance_weights(n_real, n_world_model, rho2, self.eps)
        return FusionWeights(w_r, w_w, float(rho2), int(n_real), int(n_world_model))

    def plan(self, step: FusionInputs) -> FusionPlan:
        """:math:`w_R L(\\mathcal A; A^R) + w_W L(\\bar{\\mathcal A}; A^C)` with :math:`\\hat\\rho^2` from the
        calibrator's anchor pairs (this step's included); :math:`n_{\\text{eff}} = n_R + \\hat\\rho^2 n_W`."""
        rho2 = self.estimate_rho2(*step.pairs, calibrate=step.calibrated)
        weights = self.weights(step.n_real, step.n_world_model, rho2)
        terms = (
            LossTerm(weights.w_real, step.advantages, step.is_anchor),
            LossTerm(weights.w_world_model, step.advantages, ~step.is_anchor),
        )
        n_effective = step.n_real + (0.0 if np.isnan(rho2) else rho2) * step.n_world_model
        return FusionPlan(
            terms=terms,
            w_real=weights.w_real,
            w_world_model=weights.w_world_model,
            n_effective=float(n_effective),
            rho2=rho2,
        )

    def fit(self, step: FusionInputs) -> None:
        """Nothing to fit: :math:`\\hat\\rho^2` is read off the calibrator's pairs each step."""
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}  # eps and min_pairs are settings, read from the config

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


def inverse_variance_fuser(settings: InverseVarianceSettings) -> InverseVarianceFuser:
    """The ``inverse_variance`` method's factory (registered in :mod:`wmrl_core.fusion.plugin`)."""
    return InverseVarianceFuser(min_pairs=settings.min_pairs)

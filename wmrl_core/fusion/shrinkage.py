r"""Shrinkage fusion: the rectified update moved toward a lower-variance, possibly biased one by
as much as earlier anchors say pays.

**Why.** The rectified update :math:`\hat g_P` (:mod:`.rectified`) is unbiased whatever the
world model, but it keeps the anchors' residual variance,
:math:`\operatorname{Var}\hat g_P \ge (1-\rho^2)\operatorname{tr}\Sigma_R/k`, so on a benign world
model a biased combination over all groups has the smaller error
(the synthetic gradient-error results page). Combining an unbiased with a possibly biased
estimator (Green and Strawderman, 1991; Oberst et al., 2022):

.. math:: \hat g_\alpha = \hat g_P + \alpha\,(\hat g_T - \hat g_P),\qquad \alpha\in[0,1],

with the target :math:`\hat g_T` either the calibrated-advantage gradient over all groups
(``toward="calibrated"``, :math:`\hat g_C = \bar h^C_{\text{all}}`) or the inverse-variance
combination (``toward="inverse_variance"``, :math:`w_R\bar h^R_{\mathcal A} + w_W\bar h^C_{\mathcal U}`).

**The MSE-optimal weight.** With :math:`D = \hat g_T - \hat g_P`, :math:`E\hat g_P = g^*` and
:math:`b_T = E D` the target's bias,
:math:`E\lVert\hat g_\alpha - g^*\rVert^2 = \operatorname{tr}V_P + 2\alpha\operatorname{tr}C_{PD} + \alpha^2(\lVert b_T\rVert^2 + \operatorname{tr}V_D)`,
minimised at

.. math:: \alpha^* = \frac{-\operatorname{tr}C_{PD}}{\lVert b_T\rVert^2 + \operatorname{tr}V_D}
   = \frac{\operatorname{tr}(V_P - C_{PT})}{\lVert b_T\rVert^2 + \operatorname{tr}V_D}.

**Every estimator here is linear in three group means.** Write
:math:`X = (\bar h^R_{\mathcal A}, \bar h^C_{\mathcal A}, \bar h^C_{\mathcal U})` (real- and
calibrated-advantage gradients averaged over the :math:`k` anchor groups, and calibrated over the
:math:`u = B-k` others) and an estimator as :math:`p\cdot X`. With :math:`a = k/B`,
:math:`\mu = \lambda(1-a)`:

* rectified :math:`p = (1, -\mu, \mu)`; calibrated :math:`t = (0, a, 1-a)`;
  inverse variance :math:`t = (w_R, 0, w_W)`.

Groups are i.i.d. and the anchors a uniform subset, so with per-group trace moments
:math:`s_{RR} = \operatorname{tr}\operatorname{Cov}h^R`, :math:`s_{RC}`, :math:`s_{CC}`,

.. math:: \operatorname{tr}\operatorname{Cov}(p\cdot X, q\cdot X) =
   \frac{p_1q_1s_{RR} + (p_1q_2 + p_2q_1)s_{RC} + p_2q_2s_{CC}}{k} + \frac{p_3q_3s_{CC}}{u}

(:func:`trace_covariance`). All these estimators have :math:`p_1+p_2+p_3 = 1`, so with
:math:`b = E h^C - E h^R` (the calibrated stream's bias per group) their bias is
:math:`(p_2+p_3)\,b`: rectified has none, calibrated :math:`b`, inverse variance :math:`w_W b`, and
:math:`E D = (d_2 + d_3)\,b` for :math:`d = t - p` (:func:`shrinkage_alpha`).

**Estimates, cross-fitted.** The moments come from the per-group gradient vectors
(:mod:`.gradients`) of *earlier* steps' anchor groups, the last ``window`` of them, never this
step's (which are added after the step is planned): cluster-robust over groups,
:math:`\hat s_{XY} = \frac{1}{m-1}\sum_g\langle x_g - \bar x, y_g - \bar y\rangle`, and
:math:`\lVert b\rVert^2` by the unbiased pair statistic of the differences :math:`d_g = h^C_g - h^R_g`,
:math:`\widehat{\lVert b\rVert^2} = \frac{\lVert\sum_g d_g\rVert^2 - \sum_g\lVert d_g\rVert^2}{m(m-1)}`
(:func:`window_moments`), floored at 0 (a negative estimate would only raise :math:`\alpha`).

**A decoy and a useless world model.** A confidently wrong world model makes :math:`\lVert b\rVert^2`
large and :math:`\alpha\to0`: the rectified update. A world model independent of the truth has
:math:`E h^C \approx 0`, so its "bias" is :math:`-g^*`; when the anchors are noisy the MSE-optimal
:math:`\alpha` then still leans toward it, because shrinking toward a zero-mean direction shortens
the step. That is a smaller learning rate, not information, so :math:`\alpha = 0` unless the
rectified fuser's test finds the world model ranking within groups
(:meth:`~wmrl_core.fusion.rectified.RectifiedFuser.informative`): the same test that keeps its
:math:`\lambda` at 0.

**Effective samples** (a biased update's, by MSE):
:math:`n_{\text{eff}} = \min(n_R\,(s_{RR}/k)\,/\,\widehat{\mathrm{MSE}}(\alpha),\ n_R + n_W)`, the
anchors-only variance over the update's error, at most the step's rollouts (the estimated MSE of
a calibrated target can be near 0 when its bias estimate is floored).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from wmrl_core.fusion.base import FusionInputs, FusionPlan, LossTerm
from wmrl_core.fusion.gradients import (
    anchor_group_gradients,
    gradients_from_state,
    gradients_state,
    require_gradients,
)
from wmrl_core.fusion.inverse_variance import InverseVarianceFuser
from wmrl_core.fusion.rectified import RectifiedFuser, rectified_fuser
from wmrl_core.fusion.settings import SHRINKAGE_TARGETS, ShrinkageSettings

__all__ = [
    "SHRINKAGE_TARGETS",
    "ShrinkageSettings",
    "shrinkage_fuser",
    "WindowMoments",
    "trace_covariance",
    "shrinkage_alpha",
    "shrinkage_mse",
    "window_moments",
    "squared_mean_norm",
    "ShrinkageFuser",
]


def trace_covariance(p: np.ndarray, q: np.ndarray, s_rr: float, s_rc: float, s_cc: float, k: int, u: int) -> float:
    r""":math:`\operatorname{tr}\operatorname{Cov}(p\cdot X, q\cdot X) = [p_1q_1s_{RR} + (p_1q_2+p_2q_1)s_{RC} + p_2q_2s_{CC}]/k + p_3q_3s_{CC}/u`
    (module docstring); the :math:`u` term is 0 when there are no other groups."""
    if k < 1:
        raise ValueError(f"k (anchor groups) must be >= 1, got {k}")
    anchors = (p[0] * q[0] * s_rr + (p[0] * q[1] + p[1] * q[0]) * s_rc + p[1] * q[1] * s_cc) / k
    others = p[2] * q[2] * s_cc / u if u > 0 else 0.0
    return float(anchors + others)


def shrinkage_mse(alpha: float, p: np.ndarray, t: np.ndarray, moments: WindowMoments, k: int, u: int) -> float:
    r""":math:`\widehat{\mathrm{MSE}}(\alpha) = \operatorname{tr}V_P + 2\alpha\operatorname{tr}C_{PD} + \alpha^2((d_2+d_3)^2\lVert b\rVert^2 + \operatorname{tr}V_D)`."""
    d = np.asarray(t, dtype=np.float64) - np.asarray(p, dtype=np.float64)
    s = (moments.s_rr, moments.s_rc, moments.s_cc)
    v_p = trace_covariance(p, p, *s, k, u)
    c_pd = trace_covariance(p, d, *s, k, u)
    v_d = trace_covariance(d, d, *s, k, u)
    return float(v_p + 2 * alpha * c_pd + alpha**2 * ((d[1] + d[2]) ** 2 * moments.bias2 + v_d))


def shrinkage_alpha(p: np.ndarray, t: np.ndarray, moments: WindowMoments, k: int, u: int) -> float:
    r""":math:`\alpha^* = \operatorname{clip}(-\operatorname{tr}C_{PD} / ((d_2+d_3)^2\lVert b\rVert^2 + \operatorname{tr}V_D), 0, 1)`
    with :math:`d = t - p` (module docstring); 0 when the denominator vanishes (the two updates agree)."""
    d = np.asarray(t, dtype=np.float64) - np.asarray(p, dtype=np.float64)
    s = (moments.s_rr, moments.s_rc, moments.s_cc)
    denominator = (d[1] + d[2]) ** 2 * moments.bias2 + trace_covariance(d, d, *s, k, u)
    if not denominator > 1e-300:
        return 0.0
    return float(np.clip(-trace_covariance(p, d, *s, k, u) / denominator, 0.0, 1.0))


class WindowMoments:
    """Per-group trace moments :math:`s_{RR}, s_{RC}, s_{CC}` and :math:`\\widehat{\\lVert b\\rVert^2}` of a window."""

    __slots__ = ("s_rr", "s_rc", "s_cc", "bias2", "groups")

    def __init__(self, s_rr: float, s_rc: float, s_cc: float, bias2: float, groups: int):
        self.s_rr, self.s_rc, self.s_cc, self.bias2, self.groups = s_rr, s_rc, s_cc, bias2, groups


def squared_mean_norm(vectors: np.ndarray) -> float:
    r""":math:`\frac{\lVert\sum_g d_g\rVert^2 - \sum_g\lVert d_g\rVert^2}{m(m-1)} = \frac{1}{m(m-1)}\sum_{g\ne h}\langle d_g, d_h\rangle`:
    unbiased for :math:`\lVert E d\rVert^2` over :math:`m \ge 2` independent rows (may be negative)."""
    d = np.asarray(vectors, dtype=np.float64)
    m = d.shape[0]
    if d.ndim != 2 or m < 2:
        raise ValueError(f"need a (groups >= 2, dim) array, got shape {d.shape}")
    total = d.sum(axis=0)
    return float((total @ total - np.einsum("gd,gd->", d, d)) / (m * (m - 1)))


def window_moments(real_gradients: np.ndarray, calibrated_gradients: np.ndarray) -> WindowMoments:
    r""":math:`\hat s_{XY} = \frac{1}{m-1}\sum_g\langle x_g-\bar x, y_g-\bar y\rangle` for the (m, d) rows of
    real- and calibrated-advantage gradients, and
    :math:`\widehat{\lVert b\rVert^2} = \max(0, (\lVert\sum d_g\rVert^2 - \sum\lVert d_g\rVert^2)/(m(m-1)))`
    with :math:`d_g = h^C_g - h^R_g` (module docstring). Needs :math:`m \ge 2`."""
    h_r, h_c = (np.asarray(a, dtype=np.float64) for a in (real_gradients, calibrated_gradients))
    if h_r.shape != h_c.shape or h_r.ndim != 2:
        raise ValueError(f"gradients must be two (groups, dim) arrays of one shape, got {h_r.shape} and {h_c.shape}")
    m = h_r.shape[0]
    if m < 2:
        raise ValueError(f"window moments need at least 2 groups, got {m}")
    d_r, d_c = h_r - h_r.mean(axis=0), h_c - h_c.mean(axis=0)
    return WindowMoments(
        s_rr=float(np.einsum("gd,gd->", d_r, d_r) / (m - 1)),
        s_rc=float(np.einsum("gd,gd->", d_r, d_c) / (m - 1)),
        s_cc=float(np.einsum("gd,gd->", d_c, d_c) / (m - 1)),
        bias2=max(0.0, squared_mean_norm(h_c - h_r)),
        groups=m,
    )


class ShrinkageFuser:
    r""":math:`(1-\alpha)\,\text{rectified} + \alpha\,\text{target}` with :math:`\alpha` from earlier anchor
    groups' gradients (module docstring).

    :param rectified: the rectified fuser (its :math:`\tilde\lambda` and its test of the world model).
    :param toward: ``inverse_variance`` or ``calibrated``.
    :param window: earlier anchor groups whose gradients estimate :math:`\alpha` (at least 3).
    :param min_pairs: ``inverse_variance`` target's pairs before the world model gets weight.
    """

    needs_group_gradients = True

    def __init__(
        self, *, rectified: RectifiedFuser, toward: str = "inverse_variance", window: int = 20, min_pairs: int = 4
    ):
        if toward not in SHRINKAGE_TARGETS:
            raise ValueError(f"toward={toward!r} is unknown; use one of {', '.join(SHRINKAGE_TARGETS)}")
        if window < 3:
            raise ValueError(f"window must be >= 3 anchor groups (the bias estimate needs pairs), got {window}")
        self.rectified, self.toward, self.window = rectified, toward, window
        self.inverse_variance = InverseVarianceFuser(min_pairs=min_pairs)
        self._gradients: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=window)

    def _target(self, step: FusionInputs) -> tuple[np.ndarray, tuple[LossTerm, ...], float]:
        """The target's coefficients on :math:`X`, its loss terms and its world-model weight."""
        a = step.anchor_share
        if self.toward == "calibrated":
            everything = np.ones(step.is_anchor.shape, dtype=bool)
            return np.array([0.0, a, 1.0 - a]), (LossTerm(1.0, step.calibrated_advantages, everything),), 1.0
        plan = self.inverse_variance.plan(step)
        return np.array([plan.w_real, 0.0, plan.w_world_model]), plan.terms, plan.w_world_model

    def plan(self, step: FusionInputs) -> FusionPlan:
        r"""The rectified plan's terms times :math:`1-\alpha` and the target's times :math:`\alpha`."""
        base = self.rectified.plan(step)
        lam = base.lam
        k = int(np.unique(step.group_ids[step.is_anchor]).size)
        u = int(np.unique(step.group_ids[~step.is_anchor]).size)
        p = np.array([1.0, -lam * (1.0 - step.anchor_share), lam * (1.0 - step.anchor_share)])
        t, target_terms, target_w = self._target(step)
        alpha, moments = 0.0, None
        if k and len(self._gradients) >= 3 and self.rectified.informative():
            moments = window_moments(
                np.stack([g[0] for g in self._gradients]), np.stack([g[1] for g in self._gradients])
            )
            alpha = shrinkage_alpha(p, t, moments, k, u)
        terms = tuple(LossTerm((1.0 - alpha) * x.coef, x.advantages, x.rows) for x in base.terms)
        if alpha > 0:
            terms += tuple(LossTerm(alpha * x.coef, x.advantages, x.rows) for x in target_terms)
        n_effective = base.n_effective
        if moments is not None and moments.s_rr > 0:
            mse = shrinkage_mse(alpha, p, t, moments, k, u)
            n_effective = float(step.n_real * (moments.s_rr / k) / max(mse, 1e-12 * moments.s_rr))
            # an estimated MSE near 0 (a floored bias estimate) is not evidence of more than every rollout
            n_effective = min(n_effective, float(step.n_real + step.n_world_model))
        return FusionPlan(
            terms=terms,
            w_real=1.0 - alpha * (1.0 - float(t[0])),
            w_world_model=(1.0 - alpha) * lam + alpha * target_w,
            n_effective=n_effective,
            rho2=base.rho2,
            lam=lam,
            extra={
                "fusion/alpha": alpha,
                "fusion/bias2_over_s_rr": (moments.bias2 / moments.s_rr)
                if moments and moments.s_rr > 0
                else float("nan"),
            },
        )

    def fit(self, step: FusionInputs) -> None:
        """The rectified fuser's window, and this step's anchor groups' gradients for later steps."""
        self.rectified.fit(step)
        gradient = require_gradients(step.group_gradient, "fusion.method=shrinkage")
        self._gradients.extend(anchor_group_gradients(step, gradient))

    def state_dict(self) -> dict[str, Any]:
        return {
            "rectified": self.rectified.state_dict(),
            "gradients": gradients_state(self._gradients),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rectified.load_state_dict(state["rectified"])
        self._gradients = gradients_from_state(state["gradients"], self.window)


def shrinkage_fuser(settings: ShrinkageSettings) -> ShrinkageFuser:
    """The ``shrinkage`` method's factory (registered in :mod:`wmrl_core.fusion.plugin`)."""
    return ShrinkageFuser(
        rectified=rectified_fuser(settings),
        toward=settings.shrinkage_toward,
        window=settings.shrinkage_window,
        min_pairs=settings.min_pairs,
    )

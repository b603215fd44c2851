r"""Rectified (prediction-powered) fusion of the real and world-model gradient streams.

**Setting.** A step draws :math:`B` groups (a task and its :math:`G` rollouts). :math:`k` of them,
the anchors :math:`\mathcal A`, are chosen uniformly at random and independently of their content
(``AnchorSampler``) and executed for real. Every group also has calibrated world-model rewards
:math:`c = \hat f(w)`, where :math:`\hat f` was fitted on *earlier* steps' anchor pairs, so it is
fixed before this step's groups are seen. With :math:`s_{g,i} = \nabla\log\pi(y_{g,i})`, write a
group's GRPO gradient with real advantages as :math:`h^R_g = \frac1G\sum_i A^R_{g,i}s_{g,i}` and
with calibrated advantages as :math:`h^C_g`. The target is :math:`g^* = E[h^R]`, what GRPO with
every group executed estimates.

**Estimator** (prediction-powered inference, Angelopoulos et al., 2023; PPI++ 2024):

.. math:: \hat g = \bar h^R_{\mathcal A} + \lambda\,\big(\bar h^C_{\text{all}} - \bar h^C_{\mathcal A}\big).

*Unbiased for any* :math:`\lambda`: given the batch, :math:`\mathcal A` is a uniform subset chosen
independently of the groups, of :math:`\hat f` and of :math:`\lambda`, so
:math:`E[\bar h^C_{\mathcal A}\mid\text{batch}] = \bar h^C_{\text{all}}`: the correction has mean
zero and :math:`E\hat g = E\bar h^R_{\mathcal A} = g^*`, however biased the world model is. A useless
world model costs variance, never bias; :math:`\lambda = 0` is plain GRPO on the anchors.

**As a loss.** :math:`L = L(\mathcal A; A^R) + \lambda\,[L(\text{all}; A^C) - L(\mathcal A; A^C)]`,
each term ``grpo_loss`` over its rows with the configured aggregation. *Normalisation:* each term
is a mean over its own rows, so each estimates the same population mean per-rollout term. With
``sequence_mean`` (or equal lengths, as in the bandit) each term is an average of per-rollout
terms over uniformly chosen groups and the correction has mean zero exactly; with ``token_mean``
a term is a ratio of token sums, zero-mean up to :math:`O(1/k)`.

**Power tuning.** Groups i.i.d., :math:`\mu = \lambda(1-k/B)`; since
:math:`\bar h^C_{\text{all}} - \bar h^C_{\mathcal A} = (1-k/B)(\bar h^C_{\mathcal U} - \bar h^C_{\mathcal A})`
with :math:`\mathcal U` the other groups,

.. math:: \operatorname{Var}\hat g = \frac{\sigma_R^2 - 2\mu\sigma_{RC} + \mu^2\sigma_C^2}{k} + \frac{\mu^2\sigma_C^2}{B-k},

minimised at :math:`\lambda^* = \sigma_{RC}/\sigma_C^2` (PPI++'s
:math:`\operatorname{Cov}(Y,f)/((1+n/N)\operatorname{Var} f)` for a correction over the
:math:`N = B-k` unlabelled groups is the same estimator written with :math:`\lambda' = \lambda(1-k/B)`).
For a vector gradient, a scalar :math:`\lambda` minimising the trace of the covariance is
:math:`\sum_d\operatorname{Cov}_d/\sum_d\operatorname{Var}_d`. Treating the rollouts' score vectors
as uncorrelated with a common squared norm, and the mean gradient as small next to per-rollout
second moments (the usual regime of policy gradients), this is the regression slope of real on
calibrated advantages over anchor rollouts,

.. math:: \hat\lambda = \operatorname{clip}\Big(\frac{\sum_j A^R_j A^C_j}{\sum_j (A^C_j)^2}, 0, 1\Big),

**Duplicate solutions** (``lambda_moments="solution"``, the default). The score vector
depends only on the solution, :math:`s_i = s(y_i)`, and a group's advantages sum to zero, so
:math:`h_g = \frac1G\sum_u S_{g,u}\,s(u)` with :math:`S_{g,u} = \sum_{i\in g:\,y_i=u} A_i` the
summed advantage of the rollouts of group :math:`g` that produced solution :math:`u`. Rollouts
that share a solution share their score vector exactly; only *distinct* solutions are treated as
uncorrelated with a common squared norm. The trace moments are then

.. math:: \hat\lambda = \operatorname{clip}\Big(\frac{\sum_{g,u} S^R_{g,u} S^C_{g,u}}{\sum_{g,u} (S^C_{g,u})^2}, 0, 1\Big),

which is the formula above when every rollout of a group is distinct. For a tabular softmax
(the synthetic bandit: :math:`s(u) = e_u - \pi`, and :math:`\sum_i A_i = 0` cancels the
:math:`\pi`) it is exact, :math:`h^R_g\cdot h^C_g = G^{-2}\sum_u S^R_u S^C_u`. The per-rollout
form (``lambda_moments="rollout"``) counts duplicates as independent: when a policy concentrates,
most rollouts of a group repeat one solution, their advantages cancel in the gradient (
:math:`S_u \approx 0`), but each still adds real-reward noise times calibrated-score noise,
mean zero, to the numerator and a positive :math:`(A^C)^2` to the denominator, so the slope
is pulled towards 0 exactly when the world model is doing the useful work of ranking the few
distinct solutions.

**Shrinking a noisy** :math:`\hat\lambda`. The variance of the update is quadratic in
:math:`\lambda` around :math:`\lambda^*`, and :math:`\hat\lambda` comes from earlier steps (independent of this
step's draw), so the expected excess variance from tuning is proportional to
:math:`E(\hat\lambda - \lambda^*)^2`. Once a policy repeats itself only a few (group, solution) sums are
non-zero in the window, and for a world model independent of the truth the ratio is then
zero-mean noise that clipping at 0 turns into a positive :math:`\hat\lambda`, which adds pure noise
to the update. Among multiples :math:`c\hat\lambda`, the squared error is
smallest at :math:`c = \lambda^{*2}/(\lambda^{*2} + \operatorname{Var}\hat\lambda)`; with
:math:`E\hat\lambda^2 = \lambda^{*2} + \operatorname{Var}\hat\lambda` its plug-in is the positive-part
James-Stein factor

.. math:: \tilde\lambda = \operatorname{clip}\Big(\hat\lambda\,\Big(1 - \frac{\widehat{\operatorname{Var}}\,\hat\lambda}{\hat\lambda^2}\Big)_+, 0, 1\Big),
   \qquad \widehat{\operatorname{Var}}\,\hat\lambda = \frac{\sum_g (r_g - \hat\lambda c_g)^2}{(\sum_g c_g)^2},

with :math:`r_g = \sum_u S^R_{g,u}S^C_{g,u}`, :math:`c_g = \sum_u (S^C_{g,u})^2` a group's terms: the
cluster-robust (sandwich) variance of a ratio of sums over independent groups, times the
small-sample factor :math:`m/(m-1)` for the :math:`m` groups with :math:`c_g > 0` (late in training
most anchor groups repeat one solution and have :math:`c_g = 0`; with a single informative group
the slope fits it exactly and the sandwich reads 0, so below two the variance is taken as
infinite and :math:`\tilde\lambda = 0`).

**Few informative groups: a test against the null variance.** The plain factor keeps a slope
whenever its t statistic :math:`t = \hat\lambda/\widehat{\mathrm{se}}` exceeds 1, and
:math:`1 - 1/t^2` of it (89% at :math:`t = 3`). With :math:`m` informative groups the ratio's
t statistic has about :math:`m - 1` degrees of freedom, and early in a run, or with one anchor
group a step, :math:`m` is 2 or 3: under a world model independent of the truth
:math:`P(t > 3) = 10\%` at one degree of freedom, so :math:`\tilde\lambda \approx 0.9\hat\lambda`
on one step in ten, and the window carries the same lucky groups for many steps (measured with
the ``noise`` world model: the synthetic noise-weight results page). The point estimate of the
variance from two clusters is the trouble: it is as likely to be far too small as not. A
variance that does not need many groups is the slope's *null* variance: were the calibrated
advantages independent of the real ones within each group,
:math:`r_g = \sum_u S^R_u S^C_u = \sum_i a_i b_i` (with :math:`a_i = S^R_{u(i)}`, the summed real
advantage of rollout :math:`i`'s solution, and :math:`b_i = A^C_i`) would be a linear statistic
of a random permutation of :math:`b`, whose variance is exactly
:math:`V_g = \frac{1}{n-1}\sum_i (a_i-\bar a)^2 \sum_i (b_i - \bar b)^2` (the permutation
distribution of a linear statistic), so :math:`\operatorname{Var}_0\hat\lambda = \sum_g V_g/(\sum_g c_g)^2`
whatever the number of groups. The world model gets weight only where the slope passes the
one-sided test against it, :math:`\hat\lambda > q\sqrt{\operatorname{Var}_0\hat\lambda}` with
:math:`q = z_{\text{level}}` (``level`` 0.999 by default, :math:`q = 3.09`), and then the plain
factor above shrinks it by its sandwich variance. A useless world model passes on about
:math:`1 - \text{level}` of windows at any number of groups; a useful one passes as soon as the
anchors show it (for a within-group correlation :math:`\rho`, after roughly
:math:`(q/\rho)^2` anchor rollouts), and keeps :math:`1 - 1/t^2` of its slope. The null
variance is not used for the shrinkage itself: under a useful world model the slope's variance
is smaller than under independence, and shrinking by the larger of the two variances lowered
the late weight of useful world models. Why 0.999: a window holds about ten steps' groups, so one
lucky window keeps a weight for ten steps. The level and the alternatives (a t critical value on
the sandwich variance, the larger of the two variances) were chosen on runs with the ``noise``
world model and with useful ones (the synthetic noise-weight results page).

The moments are computed on earlier steps' anchors, back to the ``window``-th most recent group
with :math:`c_g > 0` (:class:`RectifiedFuser`), never on this step's, so that
:math:`\lambda` is fixed before the step's anchors are drawn and the correction stays exactly
zero-mean. Clipping to [0, 1]: a negative slope means the world model points the wrong way
(use none of it), and above 1 the estimate is mostly noise.

**Effective samples.** Against :math:`\lambda = 0`, the variance shrinks by
:math:`v(\lambda) = 1 - [2\mu\sigma_{RC} - \mu^2\sigma_C^2 B/(B-k)]/\sigma_R^2`, so the :math:`n_R`
anchor rollouts plus the world model are worth :math:`n_{\text{eff}} = n_R / v(\lambda)` real ones;
at :math:`\lambda^*` this is :math:`n_R/(1-\rho^2(1-k/B))` with :math:`\rho` the correlation of the
two advantages. Moments are sums of :math:`(S^R)^2, S^RS^C, (S^C)^2` (or of the per-rollout
products) divided by the number of anchor rollouts; :math:`v` depends only on their ratios.
"""

from __future__ import annotations

from collections import deque
from dataclasses import fields
from typing import Any

import numpy as np
from scipy.stats import norm as normal

from wmrl_core.fusion.base import FusionInputs, FusionPlan, LossTerm
from wmrl_core.fusion.gradients import require_gradients
from wmrl_core.fusion.settings import LAMBDA_MOMENTS, RectifiedSettings

__all__ = [
    "LAMBDA_MOMENTS",
    "RectifiedSettings",
    "rectified_fuser",
    "rectified_settings",
    "rectified_loss",
    "power_tuned_lambda",
    "slope_variance",
    "shrunk_lambda",
    "permutation_null_variance",
    "solution_moments",
    "solution_keys",
    "variance_ratio",
    "effective_real_samples",
    "gradient_slope_terms",
    "RectifiedFuser",
]


def rectified_loss(anchors_real: Any, all_calibrated: Any, anchors_calibrated: Any, lam: float) -> Any:
    """:math:`L = L(\\mathcal A; A^R) + \\lambda\\,[L(\\text{all}; A^C) - L(\\mathcal A; A^C)]` (scalars or tensors)."""
    return anchors_real + lam * (all_calibrated - anchors_calibrated)


def power_tuned_lambda(sum_rc: float, sum_cc: float, eps: float = 1e-12) -> float:
    """:math:`\\hat\\lambda = \\operatorname{clip}(\\sum A^RA^C / \\sum (A^C)^2, 0, 1)`; 0 when the
    calibrated advantages are all zero (nothing to regress on)."""
    if not (np.isfinite(sum_rc) and np.isfinite(sum_cc)) or sum_cc <= eps:
        return 0.0
    return float(np.clip(sum_rc / sum_cc, 0.0, 1.0))


def slope_variance(sum_cc: float, sum_rc2: float, sum_rc_cc: float, sum_cc2: float, lam: float, n_groups: int) -> float:
    r""":math:`\widehat{\operatorname{Var}}\,\hat\lambda = \frac{m}{m-1}\sum_g (r_g - \hat\lambda c_g)^2 / (\sum_g c_g)^2`
    from the sums :math:`\sum_g c_g`, :math:`\sum_g r_g^2`, :math:`\sum_g r_gc_g`, :math:`\sum_g c_g^2` and
    the number :math:`m` of groups with :math:`c_g > 0` (cluster-robust variance of
    :math:`\hat\lambda = \sum r_g/\sum c_g`, with the usual :math:`m/(m-1)` small-sample factor);
    infinite below two such groups (one group fits its own slope exactly: no evidence of its
    noise), NaN without calibrated spread."""
    if not sum_cc > 0:
        return float("nan")
    if n_groups < 2:
        return float("inf")
    residual = sum_rc2 - 2.0 * lam * sum_rc_cc + lam**2 * sum_cc2
    return float(n_groups / (n_groups - 1) * max(residual, 0.0) / sum_cc**2)


def shrunk_lambda(lam_hat: float, var: float, q: float = 1.0) -> float:
    r""":math:`\tilde\lambda = \operatorname{clip}(\hat\lambda(1 - q^2\widehat{\operatorname{Var}}/\hat\lambda^2)_+, 0, 1)`
    (module docstring); :math:`q = 1` is the plain positive-part James-Stein factor. 0 for a
    non-finite slope, a NaN or an infinite variance."""
    if not np.isfinite(lam_hat) or np.isnan(var) or lam_hat == 0.0:
        return 0.0
    factor = max(0.0, 1.0 - q**2 * var / lam_hat**2)
    return float(np.clip(lam_hat * factor, 0.0, 1.0))


def permutation_null_variance(real_terms: np.ndarray, calibrated_advantages: np.ndarray) -> float:
    r""":math:`V_g = \frac{1}{n-1}\sum_i (a_i - \bar a)^2 \sum_i (b_i - \bar b)^2`: the variance of a
    group's :math:`r_g = \sum_i a_i b_i` over the :math:`n!` permutations of its calibrated
    advantages :math:`b` (module docstring), with :math:`a_i = S^R_{u(i)}` the summed real
    advantage of rollout :math:`i`'s solution. 0 for fewer than two rollouts."""
    a, b = (np.asarray(x, dtype=np.float64) for x in (real_terms, calibrated_advantages))
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"terms must be 1-D of equal length, got {a.shape} and {b.shape}")
    if a.size < 2:
        return 0.0
    return float(np.sum((a - a.mean()) ** 2) * np.sum((b - b.mean()) ** 2) / (a.size - 1))


def solution_moments(
    real_advantages: np.ndarray, calibrated_advantages: np.ndarray, keys: np.ndarray
) -> tuple[float, float, float]:
    r""":math:`(\sum_u (S^R_u)^2, \sum_u S^R_uS^C_u, \sum_u (S^C_u)^2)` with
    :math:`S_u = \sum_{i:\,\text{key}_i = u} A_i`: advantages summed over rollouts that share a
    (group, solution) key before the products (see module docstring). Distinct keys for every
    rollout give the per-rollout sums :math:`\sum A^RA^R, \sum A^RA^C, \sum A^CA^C`."""
    a_r, a_c, keys = (np.asarray(a) for a in (real_advantages, calibrated_advantages, keys))
    if not (a_r.shape == a_c.shape == keys.shape) or a_r.ndim != 1:
        raise ValueError(f"advantages and keys must be 1-D of equal length, got {a_r.shape}, {a_c.shape}, {keys.shape}")
    _, inverse = np.unique(keys, return_inverse=True)
    s_r = np.bincount(inverse, weights=a_r.astype(np.float64))
    s_c = np.bincount(inverse, weights=a_c.astype(np.float64))
    return float(s_r @ s_r), float(s_r @ s_c), float(s_c @ s_c)


def _hashable(solution: Any) -> Any:
    if isinstance(solution, np.ndarray):
        return (solution.shape, solution.dtype.str, solution.tobytes())
    hash(solution)  # raises TypeError for other unhashable solutions
    return solution


def solution_keys(group_ids: np.ndarray, solutions: list[Any]) -> np.ndarray:
    """An int per rollout, equal for rollouts of one group with equal solutions (their score
    vectors are the same). Solutions that cannot be compared (unhashable, not arrays) get a key
    each: no rollout is merged, which is the per-rollout form."""
    group_ids = np.asarray(group_ids)
    if len(solutions) != group_ids.size:
        raise ValueError(f"{len(solutions)} solutions for {group_ids.size} group ids")
    try:
        pairs = [(int(g), _hashable(s)) for g, s in zip(group_ids, solutions, strict=True)]
    except TypeError:
        return np.arange(group_ids.size)
    index: dict[Any, int] = {}
    return np.array([index.setdefault(p, len(index)) for p in pairs], dtype=np.int64)


def variance_ratio(lam: float, anchor_share: float, m_rr: float, m_rc: float, m_cc: float) -> float:
    """:math:`v(\\lambda) = 1 - [2\\mu m_{RC} - \\mu^2 m_{CC}/(1-a)]/m_{RR}`, :math:`\\mu = \\lambda(1-a)`,
    :math:`a = k/B` the anchor share: the rectified estimator's variance over plain GRPO on the
    anchors (1 when :math:`\\lambda = 0`; NaN without real-advantage spread)."""
    if not 0.0 < anchor_share <= 1.0:
        raise ValueError(f"anchor_share must be in (0, 1], got {anchor_share}")
    if m_rr <= 0 or not np.isfinite(m_rr):
        return float("nan")
    if anchor_share == 1.0:  # every group is an anchor: the correction is identically 0
        return 1.0
    mu = lam * (1.0 - anchor_share)
    return float(1.0 - (2.0 * mu * m_rc - mu**2 * m_cc / (1.0 - anchor_share)) / m_rr)


def effective_real_samples(
    n_real: float, lam: float, anchor_share: float, m_rr: float, m_rc: float, m_cc: float
) -> float:
    """:math:`n_{\\text{eff}} = n_R / v(\\lambda)`: how many real rollouts the step's update is worth."""
    v = variance_ratio(lam, anchor_share, m_rr, m_rc, m_cc)
    if not np.isfinite(v):
        return float(n_real)
    return float(n_real / max(v, 1e-6))


def gradient_slope_terms(real_gradients: np.ndarray, calibrated_gradients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Per-group terms of the gradient-moment slope
    :math:`\hat\lambda = \sum_g r_g / \sum_g c_g`: :math:`r_g = \langle h^R_g - \bar h^R, h^C_g - \bar h^C\rangle`,
    :math:`c_g = \lVert h^C_g - \bar h^C\rVert^2`, the trace-optimal :math:`\sigma_{RC}/\sigma_C^2` with
    the trace moments estimated from the groups' gradient vectors (rows of the two (m, d) arrays)
    instead of from their advantages.
    """
    h_r, h_c = (np.asarray(a, dtype=np.float64) for a in (real_gradients, calibrated_gradients))
    if h_r.shape != h_c.shape or h_r.ndim != 2:
        raise ValueError(f"gradients must be two (groups, dim) arrays of one shape, got {h_r.shape} and {h_c.shape}")
    d_r, d_c = h_r - h_r.mean(axis=0), h_c - h_c.mean(axis=0)
    return np.einsum("gd,gd->g", d_r, d_c), np.einsum("gd,gd->g", d_c, d_c)


class RectifiedFuser:
    r"""Keeps the anchor groups' advantage moments back to the ``window``-th most recent
    *informative* group (one whose calibrated advantages are not all zero, :math:`c_g > 0`) and
    power-tunes :math:`\tilde\lambda` from them (see module docstring).

    Counting informative groups rather than steps keeps the slope's variance estimable: late in
    training most anchor groups repeat one solution and say nothing about :math:`\lambda`, and a
    window of steps would then hold one or two informative groups. Groups without calibrated
    spread in between are kept (they count in the effective-sample moments); at most
    ``MAX_GROUPS_PER_WINDOW * window`` groups are kept in all.

    Call :meth:`lam` *before* a step's anchors enter (:meth:`update`), so the step's
    :math:`\lambda` is independent of them.

    :param window: informative groups that tune :math:`\lambda`.
    :param moments: ``solution`` (advantages of equal solutions summed), ``rollout``, or
        ``gradient`` (the slope from per-group gradient vectors, :func:`gradient_slope_terms`;
        the test against the null still reads the advantages, which need no geometry).
    :param level: one-sided normal level of the test of the slope against its variance under the
        null (:meth:`informative`; 0.999: module docstring); ``None``: no test. Once the test passes,
        :math:`\lambda` is the plain positive-part James-Stein factor (:func:`shrunk_lambda` at ``q = 1``).
    :param min_groups: :math:`\lambda = 0` until the window holds this many informative groups.
    """

    MAX_GROUPS_PER_WINDOW = 20

    def __init__(
        self, *, window: int = 20, moments: str = "solution", level: float | None = 0.999, min_groups: int = 2
    ):
        if window < 2:
            raise ValueError(f"window must be >= 2 informative groups (a slope's variance needs two), got {window}")
        if moments not in LAMBDA_MOMENTS:
            raise ValueError(f"moments={moments!r} is unknown; use one of {', '.join(LAMBDA_MOMENTS)}")
        if level is not None and not 0.5 <= level < 1.0:
            raise ValueError(f"level must be in [0.5, 1) or None (the plain James-Stein factor), got {level}")
        if not 2 <= min_groups <= window:
            raise ValueError(f"min_groups must be in [2, window={window}], got {min_groups}")
        self.window, self.moments_by, self.level, self.min_groups = window, moments, level, min_groups
        self._groups: deque[tuple[float, float, float, int, float]] = deque()
        self._vectors: deque[tuple[np.ndarray, np.ndarray] | None] = deque()

    @property
    def needs_group_gradients(self) -> bool:
        """Whether :meth:`fit` reads ``FusionInputs.group_gradient``."""
        return self.moments_by == "gradient"

    def plan(self, step: FusionInputs) -> FusionPlan:
        r""":math:`L(\mathcal A; A^R) + \tilde\lambda\,[L(\text{all}; A^C) - L(\mathcal A; A^C)]` with
        :math:`\tilde\lambda` from earlier steps' anchors only (this step's enter in :meth:`fit`)."""
        lam = self.lam()
        terms = [LossTerm(1.0, step.advantages, step.is_anchor)]
        if lam != 0:
            everything = np.ones(step.is_anchor.shape, dtype=bool)
            terms += [
                LossTerm(lam, step.calibrated_advantages, everything),
                LossTerm(-lam, step.calibrated_advantages, step.is_anchor),
            ]
        n_effective = self.effective_samples(step.n_real, anchor_share=step.anchor_share)
        return FusionPlan(terms=tuple(terms), w_real=1.0, w_world_model=lam, n_effective=n_effective, lam=lam)

    def fit(self, step: FusionInputs) -> None:
        """Add the step's anchor groups to the window (their solutions merged by ``moments``)."""
        anchor = np.flatnonzero(step.is_anchor)
        keys, vectors = None, None
        if self.moments_by != "rollout" and step.solutions is not None:
            keys = solution_keys(step.group_ids[anchor], [step.solutions[int(i)] for i in anchor])
        if self.needs_group_gradients:
            gradient = require_gradients(step.group_gradient, "fusion.kwargs.lambda_moments=gradient")
            vectors = {}
            for g in np.unique(step.group_ids[anchor]):
                rows = step.is_anchor & (step.group_ids == g)
                vectors[int(g)] = (gradient(step.advantages, rows), gradient(step.calibrated_advantages, rows))
        self.update(step.advantages[anchor], step.calibrated_advantages[anchor], keys, step.group_ids[anchor], vectors)

    def update(
        self,
        real_advantages: np.ndarray,
        calibrated_advantages: np.ndarray,
        keys: np.ndarray | None = None,
        groups: np.ndarray | None = None,
        vectors: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> None:
        """Add one step's anchor rollouts (real and calibrated advantages of the same rows).

        :param keys: :func:`solution_keys` of the rows: rollouts with equal keys have their
            advantages summed before the products (:func:`solution_moments`); ``None``: every
            rollout on its own (the per-rollout moments).
        :param groups: group of each row, the independent units of :func:`slope_variance`;
            ``None``: every key its own unit.
        :param vectors: per group, its real- and calibrated-advantage gradients (``gradient`` moments).
        """
        a_r = np.asarray(real_advantages, dtype=np.float64)
        a_c = np.asarray(calibrated_advantages, dtype=np.float64)
        if a_r.shape != a_c.shape or a_r.ndim != 1:
            raise ValueError(f"advantages must be 1-D of equal length, got {a_r.shape} and {a_c.shape}")
        keys = np.arange(a_r.size) if keys is None else np.asarray(keys)
        groups = keys if groups is None else np.asarray(groups)
        keep = np.isfinite(a_r) & np.isfinite(a_c)
        for g in np.unique(groups[keep]):
            idx = keep & (groups == g)
            _, inverse = np.unique(keys[idx], return_inverse=True)
            summed_real = np.bincount(inverse, weights=a_r[idx])[inverse]  # S^R of each rollout's solution
            null_var = permutation_null_variance(summed_real, a_c[idx])
            self._groups.append((*solution_moments(a_r[idx], a_c[idx], keys[idx]), int(idx.sum()), null_var))
            self._vectors.append(None if vectors is None else vectors.get(int(g)))
        self._trim()

    def _trim(self) -> None:
        informative = sum(g[2] > 1e-12 for g in self._groups)
        while self._groups and (
            informative - (self._groups[0][2] > 1e-12) >= self.window
            or len(self._groups) > self.MAX_GROUPS_PER_WINDOW * self.window
        ):
            informative -= self._groups.popleft()[2] > 1e-12
            self._vectors.popleft()

    def moments(self) -> tuple[float, float, float, int]:
        """The window's sums of :math:`(S^R)^2, S^RS^C, (S^C)^2` per anchor rollout, and its rollouts."""
        n = sum(g[3] for g in self._groups)
        if n == 0:
            return float("nan"), float("nan"), float("nan"), 0
        rr, rc, cc = (sum(g[i] for g in self._groups) for i in range(3))
        return rr / n, rc / n, cc / n, int(n)

    def slope(self, moments: str | None = None) -> tuple[float, float]:
        r"""The window's unclipped :math:`\hat\lambda = \sum r_g/\sum c_g` and its :func:`slope_variance`,
        from the advantage moments, or with ``moments="gradient"`` (the fuser's own setting by
        default) from the groups' gradient vectors (:func:`gradient_slope_terms`)."""
        if (moments or self.moments_by) == "gradient":
            kept = [v for v in self._vectors if v is not None]
            if len(kept) < 2:
                return 0.0, float("nan")
            r_g, c_g = gradient_slope_terms(np.stack([v[0] for v in kept]), np.stack([v[1] for v in kept]))
        else:
            r_g = np.array([g[1] for g in self._groups])
            c_g = np.array([g[2] for g in self._groups])
        if not c_g.size or c_g.sum() <= 1e-12:
            return 0.0, float("nan")
        lam_hat = float(r_g.sum() / c_g.sum())
        return lam_hat, slope_variance(c_g.sum(), r_g @ r_g, r_g @ c_g, c_g @ c_g, lam_hat, int(np.sum(c_g > 1e-12)))

    def informative_groups(self) -> int:
        """:math:`m`: the window's groups with calibrated spread (:math:`c_g > 0`)."""
        return int(sum(g[2] > 1e-12 for g in self._groups))

    def null_variance(self) -> float:
        r""":math:`\sum_g V_g / (\sum_g c_g)^2`: the variance of :math:`\hat\lambda` were the calibrated
        advantages independent of the real ones (:func:`permutation_null_variance`); NaN without spread."""
        c = sum(g[2] for g in self._groups)
        return sum(g[4] for g in self._groups) / c**2 if c > 1e-12 else float("nan")

    def informative(self) -> bool:
        """Whether the window shows the world model ranking within groups: at least ``min_groups``
        informative groups, and the advantage slope significant against its null variance at
        ``level`` (:meth:`null_variance`, one-sided normal critical value; always, without a level)."""
        if self.informative_groups() < self.min_groups:
            return False
        if self.level is None:
            return True
        lam_hat, _ = self.slope("solution")
        return bool(lam_hat > float(normal.ppf(self.level)) * np.sqrt(self.null_variance()))

    def lam(self, moments: str | None = None) -> float:
        """0 unless :meth:`informative`; then :func:`shrunk_lambda` of the slope (from ``moments``,
        the fuser's own by default) by its sandwich variance."""
        if not self.informative():
            return 0.0
        return shrunk_lambda(*self.slope(moments))

    def effective_samples(self, n_real: int, anchor_share: float) -> float:
        m_rr, m_rc, m_cc, n = self.moments()
        if not n or anchor_share <= 0:
            return float(n_real)
        return effective_real_samples(n_real, self.lam(), anchor_share, m_rr, m_rc, m_cc)

    def state_dict(self) -> dict[str, Any]:
        vectors = [None if v is None else [v[0].tolist(), v[1].tolist()] for v in self._vectors]
        return {"window": self.window, "groups": [list(g) for g in self._groups], "vectors": vectors}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # a checkpoint holding "steps" (a window of steps, each a sum over its anchor groups)
        # reads each step as one unit, and its window as informative groups
        self.window = max(2, int(state["window"]))
        # a group saved without its null variance (fifth entry) counts it as 0: the sandwich alone
        groups = state.get("groups", state.get("steps", []))
        self._groups = deque((*g[:4], *(g[4:5] or [0.0])) for g in groups)
        vectors = state.get("vectors") or [None] * len(self._groups)
        self._vectors = deque(None if v is None else (np.asarray(v[0]), np.asarray(v[1])) for v in vectors)
        self._trim()


def rectified_settings(section: Any) -> RectifiedSettings:
    """The rectified settings in the ``fusion`` config section ``section`` (a ``shrinkage`` run's
    ``fusion.kwargs`` hold them too), the defaults for those it lacks: for tools that rebuild a
    run's lambda from its config."""
    names = {f.name for f in fields(RectifiedSettings)}
    return RectifiedSettings(**{k: v for k, v in section.kwargs.items() if k in names})


def rectified_fuser(settings: RectifiedSettings) -> RectifiedFuser:
    """The ``rectified`` method's factory (registered in :mod:`wmrl_core.fusion.plugin`)."""
    return RectifiedFuser(
        window=settings.lambda_window,
        moments=settings.lambda_moments,
        level=settings.lambda_level,
        min_groups=settings.lambda_min_groups,
    )

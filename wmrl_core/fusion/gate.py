r"""An anytime-valid gate on the world model: opens only when the anchors, pooled over the whole
run, show it ranking rollouts within groups the way real execution does.

**Evidence per anchor group.** For anchor group :math:`g` with world-model scores :math:`w` and
real rewards :math:`r` (both finite, at least two rollouts), the within-group rank correlation
(Spearman's: Pearson's of the average ranks :math:`a = \operatorname{rank}(w)`, :math:`b = \operatorname{rank}(r)`)

.. math:: X_g = \frac{\sum_i (a_i - \bar a)(b_i - \bar b)}{\sqrt{\sum_i (a_i-\bar a)^2 \sum_i (b_i - \bar b)^2}} \in [-1, 1]

(0 when either is constant). Ranks, because GRPO uses a world model's order within the group and
because one miscalibrated score far out (an exponential world model's 40 beside 0.3) would
otherwise decide a Pearson correlation alone. **The null** is a world model that carries no information about
the real ranking: within a group its scores are exchangeable given the real rewards (a pure-noise
world model is the case in point). Under it :math:`E[X_g \mid \text{past}] = 0` exactly, because
the mean of :math:`\sum_i a_i b_{\pi(i)}` over the permutations :math:`\pi` of centred :math:`a` is 0.

**Evidence that grows with the group.** A correlation in :math:`[-1, 1]` caps what one group can
show (a bet :math:`1 + \beta X_g` at most doubles the wealth), yet a group of 8 that a strong world
model orders exactly has null probability :math:`1/8!`. Each group therefore contributes the
permutation e-value of an exponential tilt,

.. math:: E_g(\eta) = \frac{e^{\eta X_g}}{\frac{1}{|\Pi|}\sum_{\pi\in\Pi} e^{\eta X_g^\pi}},

with :math:`X_g^\pi` the correlation after permuting the world-model scores by :math:`\pi`, and
:math:`\Pi` every permutation of the group (up to 8 rollouts) or, for larger groups, the identity
and ``n_permutations - 1`` drawn at random (then :math:`E_g` has mean 1 under the null because the
observed order is exchangeable with the drawn ones). :math:`E[E_g(\eta)\mid\text{past}] = 1` under
the null, for any :math:`\eta` fixed beforehand.

**Testing by betting** (Shafer 2021; Waudby-Smith and Ramdas 2024). The gate's wealth is an
average over a grid of tilts :math:`\eta\in H` (``etas``),

.. math:: K_n = \frac{1}{|H|}\sum_{\eta\in H}\prod_{g \le n} E_g(\eta),

a mixture of test martingales and so a test martingale: by Ville's inequality
:math:`P(\sup_n K_n \ge 1/\alpha) \le \alpha` under the null, so the gate opens
(:math:`K_n \ge 1/\alpha`) on at most :math:`\alpha` of the runs of a useless world model, whatever
the number of steps or of anchor groups a step. Small tilts suit a weak world model (their
log-growth is near the optimum :math:`\mu^2/2\sigma^2` per group), large ones a strong world model,
which then opens the gate within a few groups; the mixture pays :math:`\log|H|` for not knowing
which. Evidence is every anchor group since the gate last closed, not a window.

**Closing.** Once open, a second wealth bets (with aGRAPA's plug-in bet, :func:`agrapa_bet`) that the agreement has fallen below
``close_below`` (:math:`c`): :math:`L_n = \prod (1 + \gamma_g (c - X_g))`, a supermartingale while
:math:`E[X_g] \ge c`; at :math:`L_n \ge 1/\alpha_{\text{close}}` the gate closes (a world model that
drifts, or the confident decoy once the policy samples the solutions it ranks wrongly) and the
opening wealth restarts at 1 on later groups. The per-run bound holds for the first opening: a
useless world model opens at all on at most :math:`\alpha` of runs.

**A validation prior** (optional). A world model may declare a within-group rank correlation
measured on data it was not fitted on, with its number of groups :math:`n`
(``validation = {"rank_correlation": tau, "groups": n}``). It counts as :math:`n` pseudo-groups of
agreement :math:`\tau` at the bet :math:`\beta_{\max}/2`, capped at ``prior_cap`` (by default
:math:`\alpha^{-1/2}`, half the evidence needed): it can shorten the wait for the anchors, never
open the gate alone, and a world model that declares none gets none.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import logsumexp
from scipy.stats import rankdata

__all__ = ["within_group_correlation", "permutation_log_evalues", "agrapa_bet", "AgreementGate", "ETAS"]

ETAS = (0.5, 1.0, 2.0, 4.0, 8.0)
"""The default grid of tilts :math:`H`."""
EXACT_UP_TO = 8
"""Groups of up to this many rollouts enumerate every permutation (8! = 40,320)."""


@lru_cache(maxsize=16)
def _all_permutations(n: int) -> np.ndarray:
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64)


def _centered_ranks(world_model: np.ndarray, real: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The finite pairs' average ranks, centred; ``None`` with fewer than two."""
    w, r = (np.asarray(a, dtype=np.float64) for a in (world_model, real))
    if w.shape != r.shape or w.ndim != 1:
        raise ValueError(f"scores and rewards must be 1-D of equal length, got {w.shape} and {r.shape}")
    keep = np.isfinite(w) & np.isfinite(r)
    if keep.sum() < 2:
        return None
    a, b = rankdata(w[keep]), rankdata(r[keep])
    return a - a.mean(), b - b.mean()


def within_group_correlation(world_model: np.ndarray, real: np.ndarray) -> float:
    r""":math:`X_g`, the rank correlation of one group's world-model scores and real rewards
    (module docstring); NaN when fewer than two rollouts have both, 0 when either is constant."""
    centered = _centered_ranks(world_model, real)
    if centered is None:
        return math.nan
    w, r = centered
    denom = math.sqrt(float(w @ w) * float(r @ r))
    if denom <= 1e-12:
        return 0.0
    return float(np.clip((w @ r) / denom, -1.0, 1.0))


def permutation_log_evalues(
    world_model: np.ndarray,
    real: np.ndarray,
    etas: tuple[float, ...] = ETAS,
    *,
    n_permutations: int = 4096,
    rng: np.random.Generator | None = None,
) -> np.ndarray | None:
    r""":math:`\log E_g(\eta)` for each :math:`\eta` of ``etas`` (module docstring): the tilted
    correlation over its mean across permutations of the world-model scores. Every permutation
    for groups of up to :data:`EXACT_UP_TO` rollouts, else the identity and ``n_permutations - 1``
    drawn from ``rng``. ``None`` (no evidence) with fewer than two finite pairs; zeros (evidence 1)
    when either side is constant."""
    centered = _centered_ranks(world_model, real)
    if centered is None:
        return None
    w, r = centered
    n = w.size
    denom = math.sqrt(float(w @ w) * float(r @ r))
    eta = np.asarray(etas, dtype=np.float64)
    if denom <= 1e-12:
        return np.zeros(eta.shape)
    x_obs = float(w @ r) / denom
    if n <= EXACT_UP_TO:  # the permutation distribution depends on the two sets of ranks only
        normalizer = _exact_log_normalizer(tuple(np.sort(w)), tuple(np.sort(r)), tuple(eta.tolist()))
        return eta * x_obs - np.asarray(normalizer)
    rng = rng if rng is not None else np.random.default_rng(0)
    drawn = np.argsort(rng.random((n_permutations - 1, n)), axis=1)
    perms = np.vstack([np.arange(n)[None, :], drawn])  # the observed order is one of them
    x_perm = (w[perms] @ r) / denom
    return eta * x_obs - (logsumexp(np.outer(eta, x_perm), axis=1) - math.log(len(perms)))


@lru_cache(maxsize=4096)
def _exact_log_normalizer(w_sorted: tuple, r_sorted: tuple, etas: tuple) -> tuple:
    r""":math:`\log\frac{1}{n!}\sum_\pi e^{\eta X^\pi}` for every tilt, over all permutations."""
    w, r = np.asarray(w_sorted), np.asarray(r_sorted)
    x_perm = (w[_all_permutations(w.size)] @ r) / math.sqrt(float(w @ w) * float(r @ r))
    eta = np.asarray(etas)
    return tuple(logsumexp(np.outer(eta, x_perm), axis=1) - math.log(x_perm.size))


def agrapa_bet(total: float, total_sq: float, n: int, cap: float) -> float:
    r""":math:`\beta = \operatorname{clip}(\hat\mu/(\hat\sigma^2+\hat\mu^2), 0, \text{cap})` with
    :math:`\hat\mu = \text{total}/(n+1)`, :math:`\hat\sigma^2 + \hat\mu^2 = (\text{total\_sq} + 1/4)/(n+1)`:
    the running moments of earlier observations with one prior pseudo-observation of mean 0 and
    second moment 1/4 (so the first bet is 0 and early bets are small)."""
    if n < 0 or cap < 0:
        raise ValueError(f"n and cap must be >= 0, got {n} and {cap}")
    mean = total / (n + 1)
    second = (total_sq + 0.25) / (n + 1)
    return float(np.clip(mean / second, 0.0, cap))


class AgreementGate:
    """The world-model gate (module docstring).

    :param level: :math:`\\alpha`, the probability that a useless world model ever opens the gate in a run.
    :param close_level: :math:`\\alpha_{\\text{close}}` of the closing test.
    :param close_below: :math:`c`, the agreement below which the anchors close the gate.
    :param max_bet: :math:`\\beta_{\\max} < 1`, the closing test's largest stake on one group.
    :param etas: the tilts :math:`H` averaged by the opening wealth.
    :param prior_cap: the largest wealth a validation prior may give (``None``: :math:`\\alpha^{-1/2}`).
    :param seed: seeds the permutations drawn for groups of more than :data:`EXACT_UP_TO` rollouts.

    Fitted attributes: ``wealth_`` (opening wealth), ``close_wealth_``, ``open_`` (bool),
    ``groups_`` (anchor groups with evidence since the run began), ``opened_at_`` / ``closed_at_``
    (the group counts at each opening and closing).
    """

    def __init__(
        self,
        *,
        level: float = 0.05,
        close_level: float = 0.05,
        close_below: float = 0.0,
        max_bet: float = 0.5,
        etas: tuple[float, ...] = ETAS,
        prior_cap: float | None = None,
        seed: int = 0,
    ):
        if not 0 < level < 1 or not 0 < close_level < 1:
            raise ValueError(f"level and close_level must be in (0, 1), got {level} and {close_level}")
        if not 0 < max_bet < 1:
            raise ValueError(f"max_bet must be in (0, 1) so that wealth stays positive, got {max_bet}")
        if not -1 < close_below < 1:
            raise ValueError(f"close_below must be in (-1, 1), got {close_below}")
        if not etas or min(etas) <= 0:
            raise ValueError(f"etas must be a non-empty tuple of positive tilts, got {etas}")
        self.level, self.close_level, self.close_below, self.max_bet = level, close_level, close_below, max_bet
        self.etas = tuple(float(e) for e in etas)
        self.prior_cap = (1.0 / level) ** 0.5 if prior_cap is None else prior_cap
        self.seed = seed
        self._log_wealths = np.zeros(len(self.etas))
        self.prior_wealth_ = 1.0
        self.close_wealth_, self.open_ = 1.0, False
        self.groups_ = 0
        self.opened_at_: list[int] = []
        self.closed_at_: list[int] = []
        self._close_moments = [0.0, 0.0, 0]  # sum, sum of squares, count of c - X since opening

    @property
    def wealth_(self) -> float:
        """:math:`K_n`: the prior's wealth times the mean over tilts of each tilt's wealth."""
        top = float(self._log_wealths.max())
        log_mean = top + math.log(float(np.mean(np.exp(self._log_wealths - top))))
        return float(self.prior_wealth_ * math.exp(min(log_mean, 700.0)))

    def set_prior(self, rank_correlation: float, groups: int) -> None:
        """Credit a declared out-of-sample rank correlation (module docstring), before any anchor."""
        if not -1 <= rank_correlation <= 1 or groups < 0:
            raise ValueError(
                f"a validation prior needs a correlation in [-1, 1] and groups >= 0, got {rank_correlation}, {groups}"
            )
        if self.groups_:
            raise ValueError("a validation prior must be set before the first anchor group")
        log_wealth = groups * math.log1p(self.max_bet / 2 * max(rank_correlation, 0.0))
        self.prior_wealth_ = float(min(math.exp(min(log_wealth, 700.0)), self.prior_cap))
        self._maybe_open()

    def update(self, world_model: np.ndarray, real: np.ndarray) -> None:
        """Bet on one anchor group (its world-model scores and real rewards); a group with fewer
        than two finite pairs is no evidence and is skipped."""
        if not self.open_:
            rng = np.random.default_rng([self.seed, self.groups_])
            log_e = permutation_log_evalues(world_model, real, self.etas, rng=rng)
            if log_e is None:
                return
            self.groups_ += 1
            self._log_wealths = self._log_wealths + log_e
            self._maybe_open()
            return
        x = within_group_correlation(world_model, real)
        if not np.isfinite(x):
            return
        self.groups_ += 1
        y = self.close_below - x  # in [c - 1, c + 1]
        cap = self.max_bet / (1.0 + abs(self.close_below))
        bet = agrapa_bet(self._close_moments[0], self._close_moments[1], int(self._close_moments[2]), cap)
        self.close_wealth_ *= 1.0 + bet * y
        self._close_moments = [self._close_moments[0] + y, self._close_moments[1] + y * y, self._close_moments[2] + 1]
        if self.close_wealth_ >= 1.0 / self.close_level:
            self.open_ = False
            self.closed_at_.append(self.groups_)
            self._log_wealths = np.zeros(len(self.etas))
            self.prior_wealth_ = 1.0  # a prior the anchors contradicted is not credited again

    def _maybe_open(self) -> None:
        if not self.open_ and self.wealth_ >= 1.0 / self.level:
            self.open_ = True
            self.opened_at_.append(self.groups_)
            self.close_wealth_, self._close_moments = 1.0, [0.0, 0.0, 0]

    def metrics(self) -> dict[str, float]:
        """``fusion/gate_*``: open (0/1), log10 of the opening wealth and of the closing one, groups seen."""
        return {
            "fusion/gate_open": float(self.open_),
            "fusion/gate_log10_wealth": math.log10(self.wealth_),
            "fusion/gate_log10_close_wealth": math.log10(self.close_wealth_) if self.open_ else math.nan,
            "fusion/gate_groups": float(self.groups_),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "log_wealths": self._log_wealths.tolist(),
            "prior_wealth": self.prior_wealth_,
            "close_wealth": self.close_wealth_,
            "open": self.open_,
            "groups": self.groups_,
            "opened_at": list(self.opened_at_),
            "closed_at": list(self.closed_at_),
            "close_moments": list(self._close_moments),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._log_wealths = np.asarray(state["log_wealths"], dtype=np.float64)
        if self._log_wealths.shape != (len(self.etas),):
            raise ValueError(
                f"the gate's saved wealth has {self._log_wealths.size} tilts, this gate {len(self.etas)}: "
                "resume with the same fusion.kwargs.etas"
            )
        self.prior_wealth_, self.close_wealth_ = float(state["prior_wealth"]), float(state["close_wealth"])
        self.open_, self.groups_ = bool(state["open"]), int(state["groups"])
        self.opened_at_, self.closed_at_ = list(state["opened_at"]), list(state["closed_at"])
        self._close_moments = list(state["close_moments"])

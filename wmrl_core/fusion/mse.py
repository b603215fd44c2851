r"""MSE-weighted fusion behind an anytime-valid gate: the world model carries the update when the
anchors show it ranks like real execution, and falls back to GRPO on the anchors when they show
it does not or show its bias.

**The update.** A convex combination of the anchors' real-advantage gradient and the calibrated
gradient of the other groups,

.. math:: \hat g_w = (1-w)\,\bar h^R_{\mathcal A} + w\,\bar h^C_{\mathcal U},
   \qquad w = \mathbb 1[\text{gate open}]\;\min(w_{\text{IV}},\ w_{\text{MSE}}).

**The gate** (:class:`~wmrl_core.fusion.gate.AgreementGate`) bets on the within-group agreement of
world-model scores and real rewards over every anchor group since the run began; a world model
that carries no information opens it on at most ``level`` of runs, whatever their length, and
later anchors that contradict it close it again.

**The weight.** :math:`w_{\text{IV}} = \hat\rho^2 n_W/(n_R + \hat\rho^2 n_W)`
(:mod:`.inverse_variance`: a world-model rollout is worth :math:`\hat\rho^2` of a real one, with
:math:`\hat\rho^2` the squared within-group correlation of real and cross-fitted calibrated rewards,
so a world model that explains nothing gets nothing). It assumes the calibrated stream is unbiased;
the anchors also measure its bias. With :math:`k` anchor groups and :math:`u` others, per-group
gradient trace moments :math:`s_{RR}, s_{CC}` and the calibrated stream's bias per group
:math:`b = E[h^C - h^R]`, one update's error against :math:`g^*` (what GRPO with every group
executed estimates) is :math:`(1-w)^2 s_{RR}/k + w^2(s_{CC}/u + \lVert b\rVert^2)`. Training sums
updates: over :math:`H` of them the sampling errors average out and the bias does not, so the
error of their mean is that of one update with its bias counted :math:`H` times,

.. math:: \operatorname{MSE}_H(w) = (1-w)^2\,\frac{s_{RR}}{k} + w^2\Big(\frac{s_{CC}}{u} + H\lVert b\rVert^2\Big),
   \qquad w_{\text{MSE}} = \frac{s_{RR}/k}{s_{RR}/k + s_{CC}/u + H\lVert b\rVert^2}

(``bias_horizon`` :math:`H`; :math:`H = 1` is the one-step MSE, which keeps following a confident
decoy whose bias is small next to the noise of two anchor groups, until the policy sits on it).

Taking the smaller of the two is the MSE-optimal shrinkage of the anchors-only update toward the
inverse-variance one (:mod:`.shrinkage` with the anchors as the unbiased start:
:math:`\alpha^* w_{\text{IV}} = \min(w_{\text{IV}}, w_{\text{MSE}})` before clipping): near
``inverse_variance`` when the anchors agree with the world model, toward the anchors alone when
they show bias (the confident decoy). :math:`w_{\text{MSE}}` alone would mix in a useless world
model, because shrinking a noisy update toward a zero-mean one lowers its MSE by shortening the
step; :math:`w_{\text{IV}}` and the gate refuse that.

**Estimates, cross-fitted.** The gate reads every anchor group up to and including this step's
(an anytime-valid test keeps its level whenever it is read, and waiting a step would cost a
useful world model a step of weight); the weight's size does not: :math:`\hat\rho^2` reads the
anchor pairs of earlier steps only, and the moments (:func:`~wmrl_core.fusion.shrinkage.window_moments`: cluster-robust over groups, the
bias by the unbiased pair statistic floored at 0) the per-group gradients of the last ``window``
earlier anchor groups, so a step's weight never reads its own anchors. With ``rho2_quantile`` :math:`q`, :math:`w_{\text{IV}}`
reads the :math:`q`-quantile of :math:`\hat\rho^2` over a bootstrap of the anchor groups
(:func:`~wmrl_core.fusion.inverse_variance.explained_variance_lower_bound`) instead of the point
estimate: with one anchor group a step, a world model that carries nothing and opened the gate by
chance (at most ``level`` of runs) has a squared correlation of a few dozen pairs, positive by
construction and selected by the opening, which :math:`n_W/n_R \approx 10`-fold weighting turns
into a weight of 0.2-0.5; its lower bound is near 0. A trainer without per-group
gradients (TRL, verl) gets :math:`w = \mathbb 1[\text{open}]\,w_{\text{IV}}`; so does WMRL's own
before three anchor groups have gradients.

**Effective samples.** :math:`n_{\text{eff}} = n_R\,(s_{RR}/k)/\widehat{\operatorname{MSE}}(w)`, the
anchors-only variance over the update's error, at most every rollout of the step; without moments
:math:`n_R + \hat\rho^2 n_W` while the world model has weight and :math:`n_R` while it has none.
"""

from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import asdict
from typing import Any

import numpy as np

from wmrl_core.fusion.base import FusionInputs, FusionPlan, LossTerm
from wmrl_core.fusion.gate import AgreementGate
from wmrl_core.fusion.gradients import anchor_group_gradients, gradients_from_state, gradients_state
from wmrl_core.fusion.inverse_variance import InverseVarianceFuser
from wmrl_core.fusion.settings import MSEWeightedSettings
from wmrl_core.fusion.shrinkage import WindowMoments, window_moments

__all__ = ["MSEWeightedSettings", "MSEWeightedFuser", "mse_weight", "convex_mse", "mse_weighted_fuser"]


def mse_weight(moments: WindowMoments, k: int, u: int, horizon: float = 1.0) -> float:
    r""":math:`w_{\text{MSE}} = (s_{RR}/k)/(s_{RR}/k + s_{CC}/u + H\lVert b\rVert^2)` (module docstring);
    0 without other groups or without anchor spread."""
    if k < 1 or u < 1 or not moments.s_rr > 0:
        return 0.0
    anchors = moments.s_rr / k
    return float(anchors / (anchors + moments.s_cc / u + horizon * moments.bias2))


def convex_mse(w: float, moments: WindowMoments, k: int, u: int, horizon: float = 1.0) -> float:
    r""":math:`\operatorname{MSE}_H(w) = (1-w)^2 s_{RR}/k + w^2 (s_{CC}/u + H\lVert b\rVert^2)`; the second
    term 0 when ``u = 0``."""
    if k < 1:
        raise ValueError(f"k (anchor groups) must be >= 1, got {k}")
    others = moments.s_cc / u + horizon * moments.bias2 if u > 0 else 0.0
    return float((1 - w) ** 2 * moments.s_rr / k + w**2 * others)


class MSEWeightedFuser:
    """:math:`(1-w)\\,L(\\mathcal A; A^R) + w\\,L(\\mathcal U; A^C)` with the gated weight of the module docstring."""

    def __init__(
        self,
        *,
        level: float = 0.05,
        close_level: float = 0.05,
        close_below: float = 0.0,
        max_bet: float = 0.5,
        window: int = 60,
        min_pairs: int = 4,
        validation_prior: bool = True,
        bias_horizon: float = 20.0,
        rho2_quantile: float | None = 0.05,
    ):
        MSEWeightedSettings(  # validates
            level, close_level, close_below, max_bet, window, min_pairs, validation_prior, bias_horizon, rho2_quantile
        )
        self.bias_horizon, self.validation_prior = bias_horizon, validation_prior
        self.rho2_quantile = rho2_quantile
        self.gate = AgreementGate(level=level, close_level=close_level, close_below=close_below, max_bet=max_bet)
        self.window = window
        self.inverse_variance = InverseVarianceFuser(min_pairs=min_pairs)
        self._gradients: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=window)
        self._planned_gate: AgreementGate | None = None  # plan's gate, which fit keeps

    def _earlier_pairs(self, step: FusionInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x, y, g = step.pairs
        end = len(x) - min(step.step_pairs, len(x))
        return x[:end], y[:end], g[:end]

    def set_validation_prior(self, validation: Any) -> None:
        """The world model's declared out-of-sample ranking, ``{"rank_correlation": r, "groups": n}``, into
        the gate (:meth:`AgreementGate.set_prior`) unless ``validation_prior`` is off.

        :raises ValueError: naming what is missing or out of range.
        """
        if not self.validation_prior:
            return
        try:
            rank_correlation, groups = float(validation["rank_correlation"]), int(validation["groups"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"a world model's `validation` must be a mapping with a float `rank_correlation` and an int `groups` "
                f"(measured on data it was not fitted on), got {validation!r}"
            ) from exc
        self.gate.set_prior(rank_correlation, groups)

    def _step_groups(self, step: FusionInputs) -> list[tuple[np.ndarray, np.ndarray]]:
        """This step's anchor groups as (raw world-model scores, real rewards)."""
        x, y, keys = (a[len(a) - min(step.step_pairs, len(a)) :] for a in step.pairs)
        return [(x[keys == key], y[keys == key]) for key in np.unique(keys)]

    def _gate_after(self, step: FusionInputs) -> AgreementGate:
        gate = copy.deepcopy(self.gate)
        for world_model, real in self._step_groups(step):
            gate.update(world_model, real)
        return gate

    def plan(self, step: FusionInputs) -> FusionPlan:
        gate = self._planned_gate = self._gate_after(step)
        rho2 = self.inverse_variance.estimate_rho2(
            *self._earlier_pairs(step), calibrate=step.calibrated, quantile=self.rho2_quantile
        )
        w_iv = self.inverse_variance.weights(step.n_real, step.n_world_model, rho2).w_world_model
        k = int(np.unique(step.group_ids[step.is_anchor]).size)
        u = int(np.unique(step.group_ids[~step.is_anchor]).size)
        moments = None
        if step.group_gradient is not None and len(self._gradients) >= 3 and k:
            moments = window_moments(
                np.stack([g[0] for g in self._gradients]), np.stack([g[1] for g in self._gradients])
            )
        w_mse = mse_weight(moments, k, u, self.bias_horizon) if moments is not None else math.nan
        w = min(w_iv, w_mse) if moments is not None else w_iv
        w = w if gate.open_ else 0.0
        terms = (LossTerm(1.0 - w, step.advantages, step.is_anchor), LossTerm(w, step.advantages, ~step.is_anchor))
        if moments is not None and moments.s_rr > 0 and k:
            n_effective = (
                step.n_real
                * (moments.s_rr / k)
                / max(convex_mse(w, moments, k, u, self.bias_horizon), 1e-12 * moments.s_rr)
            )
            n_effective = min(n_effective, float(step.n_real + step.n_world_model))
        else:
            n_effective = step.n_real + (rho2 * step.n_world_model if w > 0 else 0.0)
        return FusionPlan(
            terms=terms,
            w_real=1.0 - w,
            w_world_model=w,
            n_effective=float(n_effective),
            rho2=rho2,
            extra={
                "fusion/w_inverse_variance": w_iv,
                "fusion/w_mse": w_mse,
                "fusion/bias2_over_s_rr": moments.bias2 / moments.s_rr
                if moments is not None and moments.s_rr > 0
                else math.nan,
                **gate.metrics(),
            },
        )

    def fit(self, step: FusionInputs) -> None:
        """The gate keeps its bets on this step's anchor groups; their gradients join the window."""
        planned, self._planned_gate = self._planned_gate, None
        self.gate = planned if planned is not None else self._gate_after(step)
        if step.group_gradient is None:
            return
        self._gradients.extend(anchor_group_gradients(step, step.group_gradient))

    def state_dict(self) -> dict[str, Any]:
        return {
            "gate": self.gate.state_dict(),
            "gradients": gradients_state(self._gradients),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.gate.load_state_dict(state["gate"])
        self._gradients = gradients_from_state(state["gradients"], self.window)


def mse_weighted_fuser(settings: MSEWeightedSettings) -> MSEWeightedFuser:
    """The registered factory: a fresh fuser from its settings."""
    return MSEWeightedFuser(**asdict(settings))

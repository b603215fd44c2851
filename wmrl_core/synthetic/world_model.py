r"""The synthetic world model, imperfect in controllable ways.

``quality="miscalibrated"`` (default): the prediction for arm *a* of task *t* is

.. math:: w = f(\mu_{t,a} + s_{t,a}\,|\xi|) + \sigma_{wm}\,\eta,\qquad f(x) = e^{k(x-1)},\quad \xi,\eta\sim N(0,1)

— a convex, monotone miscalibration ``f`` of an *optimistic* prediction (the error
:math:`s|\xi|` is never negative) whose spread :math:`s_{t,a}` depends on the solution, plus
zero-mean noise of size ``noise``. With the half-normal moment generating function
:math:`E[e^{t|\xi|}] = 2e^{t^2/2}\Phi(t)`,

.. math:: E[w] = 2\,e^{k(\mu-1) + k^2s^2/2}\,\Phi(ks).

With ``k = 3`` the decoy (:math:`\mu = 0.6`, :math:`s = 0.6`) scores about 2.9 against the best
arm's (:math:`\mu = 0.9`, :math:`s = 0.05`) 0.84 and any other arm's (:math:`\mu\le 0.75`,
:math:`s = 0.1`) at most 0.61, so the raw world model's optimum is the decoy, 0.3 below the true
optimum. A monotone calibration learns :math:`E[r\mid w]`; because the decoy's predictions
spread over the best arm's, it only partly separates them (about 0.77 against 0.73 in
expectation under a uniform policy).

``quality="confident_decoy"``: :math:`w = f(\mu'_{t,a}) + \sigma_{wm}\eta` with
:math:`\mu' = \mu` except that the decoy is predicted at :math:`0.9 + \text{decoy_margin}`,
just above the best arm, with the same small noise as every arm (with the defaults the decoy
scores 0.79, the best arm 0.74, noise sd 0.02). The world model ranks the decoy above the best
arm nearly every time, so no monotone calibration can put them in the right order: at best it
pools the two into one level (a tie, no preference), and only an unbiased correction from real
rewards can undo it.

``quality="independent"``: :math:`w = f(u)`, :math:`u\sim U(0,1)` independent of the truth.
``quality="perfect"``: :math:`w = \mu_{t,a}` (plus ``noise``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from wmrl_core.synthetic.bandit import SyntheticBanditEnvironment, _task_index
from wmrl_core.types import CostModel, Task

__all__ = ["SyntheticWorldModel"]

QUALITIES = ("miscalibrated", "confident_decoy", "independent", "perfect")


class SyntheticWorldModel:
    """:param env: the synthetic environment (its truth is what the model gets wrong).
    :param quality: ``miscalibrated``, ``confident_decoy``, ``independent`` or ``perfect``.
    :param curvature: ``k`` of the miscalibration :math:`f(x)=e^{k(x-1)}`.
    :param noise: standard deviation of the additive zero-mean noise.
    :param decoy_margin: ``confident_decoy``: how far above the best arm's mean the decoy is predicted.
    :param cost_per_call_s: declared cost of one batched call; ``cost_per_item_s`` per solution.
    """

    def __init__(
        self,
        env: SyntheticBanditEnvironment,
        *,
        quality: str = "miscalibrated",
        curvature: float = 3.0,
        noise: float = 0.02,
        cost_per_call_s: float = 0.1,
        cost_per_item_s: float = 0.001,
        seed: int = 0,
        decoy_margin: float = 0.02,
    ):
        if quality not in QUALITIES:
            raise ValueError(f"quality={quality!r} is unknown; use one of {', '.join(QUALITIES)}")
        if not isinstance(env, SyntheticBanditEnvironment):
            raise TypeError("the synthetic world model needs environment.name=synthetic-bandit")
        self.truth = env.truth
        self.quality, self.curvature, self.noise, self.decoy_margin = quality, curvature, noise, decoy_margin
        self.cost = CostModel(per_call_s=cost_per_call_s, per_item_s=cost_per_item_s)
        self._rng = np.random.default_rng([seed, 0x3D])

    def _f(self, x: np.ndarray) -> np.ndarray:
        return np.exp(self.curvature * (x - 1.0))

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[float]:
        t = np.array([_task_index(task) for task in tasks])
        a = np.array([int(s) for s in solutions])
        n = len(a)
        mu, spread = self.truth.mu[t, a], self.truth.spread[t, a]
        if self.quality == "miscalibrated":
            pred = self._f(mu + spread * np.abs(self._rng.standard_normal(n)))
        elif self.quality == "confident_decoy":
            pred = self._f(self._believed_mean(t, a))
        elif self.quality == "independent":
            pred = self._f(self._rng.uniform(0.0, 1.0, n))
        else:
            pred = mu.copy()
        pred = pred + self.noise * self._rng.standard_normal(n)
        return pred.tolist()

    def _believed_mean(self, t: np.ndarray, a: np.ndarray) -> np.ndarray:
        """``confident_decoy``: the truth, except the decoy sits ``decoy_margin`` above the best arm."""
        mu = self.truth.mu[t, a].copy()
        decoy = a == self.truth.decoy[t]
        mu[decoy] = self.truth.mu[t[decoy]].max(axis=-1) + self.decoy_margin
        return mu

    def expected_prediction(self, task_index: int, arm: int) -> float:
        """:math:`E[w]` in closed form (used by tests and docs to locate the raw optimum)."""
        from scipy.stats import norm

        mu, s, k = self.truth.mu[task_index, arm], self.truth.spread[task_index, arm], self.curvature
        if self.quality == "miscalibrated":
            return float(2.0 * np.exp(k * (mu - 1.0) + 0.5 * (k * s) ** 2) * norm.cdf(k * s))
        if self.quality == "confident_decoy":
            return float(self._f(self._believed_mean(np.array([task_index]), np.array([arm])))[0])
        if self.quality == "independent":
            return float((1.0 - np.exp(-k)) / k)
        return float(mu)

    def state_dict(self) -> dict:
        return {"rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self._rng.bit_generator.state = state["rng"]

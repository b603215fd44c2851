r"""The synthetic world model, imperfect in controllable ways.

``quality="miscalibrated"`` (default): the prediction for arm *a* of task *t* is

.. math:: w = f(\mu_{t,a} + s_{t,a}\,\xi) + \sigma_{wm}\,\eta,\qquad f(x) = e^{k(x-1)},\quad \xi,\eta\sim N(0,1)

— a convex, monotone miscalibration ``f`` of a prediction whose spread :math:`s_{t,a}`
depends on the solution, plus zero-mean noise of size ``noise``. By Jensen,
:math:`E[w] = e^{k(\mu-1) + k^2 s^2/2}`: with ``k = 3`` the decoy
(:math:`\mu=0.6, s=0.45`) scores :math:`e^{-0.29}` against the best arm's
(:math:`\mu=0.9, s=0.05`) :math:`e^{-0.29}`… and every further bit of spread tips it over,
so the raw world model's optimum is the decoy, 0.3 below the true optimum. The isotonic
debiaser learns :math:`E[r\mid w]`, which undoes ``f`` and shrinks the noisy decoy
predictions back to its true mean.

``quality="independent"``: :math:`w = f(u)`, :math:`u\sim U(0,1)` independent of the truth.
``quality="perfect"``: :math:`w = \mu_{t,a}` (plus ``noise``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from wmrl_core.synthetic.bandit import SyntheticBanditEnvironment, _task_index
from wmrl_core.types import CostModel, Task

__all__ = ["SyntheticWorldModel"]

QUALITIES = ("miscalibrated", "independent", "perfect")


class SyntheticWorldModel:
    """:param env: the synthetic environment (its truth is what the model gets wrong).
    :param quality: ``miscalibrated``, ``independent`` or ``perfect``.
    :param curvature: ``k`` of the miscalibration :math:`f(x)=e^{k(x-1)}`.
    :param noise: standard deviation of the additive zero-mean noise.
    :param cost_per_call_s: declared cost of one batched call; ``cost_per_item_s`` per solution.
    """

    def __init__(self, env: SyntheticBanditEnvironment, *, quality: str = "miscalibrated", curvature: float = 3.0,
                 noise: float = 0.02, cost_per_call_s: float = 0.1, cost_per_item_s: float = 0.001, seed: int = 0):
        if quality not in QUALITIES:
            raise ValueError(f"quality={quality!r} is unknown; use one of {', '.join(QUALITIES)}")
        if not isinstance(env, SyntheticBanditEnvironment):
            raise TypeError("the synthetic world model needs environment.name=synthetic-bandit")
        self.truth = env.truth
        self.quality, self.curvature, self.noise = quality, curvature, noise
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
        elif self.quality == "independent":
            pred = self._f(self._rng.uniform(0.0, 1.0, n))
        else:
            pred = mu.copy()
        pred = pred + self.noise * self._rng.standard_normal(n)
        return pred.tolist()

    def expected_prediction(self, task_index: int, arm: int) -> float:
        """:math:`E[w]` in closed form (used by tests and docs to locate the raw optimum)."""
        mu, s, k = self.truth.mu[task_index, arm], self.truth.spread[task_index, arm], self.curvature
        if self.quality == "miscalibrated":
            return float(np.exp(k * (mu - 1.0) + 0.5 * (k * s) ** 2))
        if self.quality == "independent":
            return float((1.0 - np.exp(-k)) / k)
        return float(mu)

    def state_dict(self) -> dict:
        return {"rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self._rng.bit_generator.state = state["rng"]

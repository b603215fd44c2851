"""A cheap world model: CartPole's physics for the first ``lookahead`` steps, then a guess.

Every rollout of a batch is simulated at once (one vectorised Euler step per time step, the
equations of gymnasium's ``CartPoleEnv``). A plan still up after ``lookahead`` steps is credited the
rest of the horizon in proportion to its margin from failure there:

.. math:: \\hat s = \\big(n_k + [\\text{up at } k]\\,(H - k)\\,\\max(0,\\ 1 - \\max(|\\theta|/\\theta_{max},\\ |x|/x_{max}))\\big) / H

with :math:`n_k` the steps survived among the first :math:`k`. Biased (a pole near upright but
falling fast gets full credit), so the engine's calibration and fusion decide what it is worth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from wmrl_core.types import Task

__all__ = ["CartPoleLookahead"]

GRAVITY, MASS_CART, MASS_POLE, HALF_LENGTH, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
THETA_MAX, X_MAX = 12 * 2 * np.pi / 360, 2.4


def cartpole_step(state: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """One Euler step of CartPole-v1 for a batch: ``state`` (N, 4), ``actions`` (N,) in {0, 1}."""
    x, x_dot, theta, theta_dot = state.T
    force = np.where(actions == 1, FORCE, -FORCE)
    cos, sin = np.cos(theta), np.sin(theta)
    total = MASS_CART + MASS_POLE
    temp = (force + MASS_POLE * HALF_LENGTH * theta_dot**2 * sin) / total
    theta_acc = (GRAVITY * sin - cos * temp) / (HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * cos**2 / total))
    x_acc = temp - MASS_POLE * HALF_LENGTH * theta_acc * cos / total
    return np.stack(
        [x + TAU * x_dot, x_dot + TAU * x_acc, theta + TAU * theta_dot, theta_dot + TAU * theta_acc], axis=1
    )


class CartPoleLookahead:
    """Predicts a plan's score from the first ``lookahead`` simulated steps.

    :param env: the environment; its ``horizon`` normalises the prediction.
    :param lookahead: steps simulated exactly (k); the rest of the horizon is guessed.
    """

    def __init__(self, env: Any, *, lookahead: int = 10):
        if lookahead < 1:
            raise ValueError(f"lookahead is the number of simulated steps, at least 1; got {lookahead}")
        self.horizon = int(env.horizon)
        self.lookahead = min(int(lookahead), self.horizon)

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[float | None]:
        plans = [np.asarray(s) for s in solutions]
        valid = np.array([p.shape == (self.horizon,) for p in plans], dtype=bool)
        predictions: list[float | None] = [None] * len(plans)  # an unreadable plan: no prediction
        if not valid.any():
            return predictions
        rows = np.flatnonzero(valid)
        actions = np.stack([plans[i] for i in rows])
        state = np.stack([np.asarray(tasks[i].data["state"], dtype=np.float64) for i in rows])
        up = np.ones(len(rows), dtype=bool)
        survived = np.zeros(len(rows))
        for t in range(self.lookahead):
            state = cartpole_step(state, actions[:, t])
            survived += up  # the step on which the pole falls still earns its reward
            up &= (np.abs(state[:, 0]) <= X_MAX) & (np.abs(state[:, 2]) <= THETA_MAX)
        margin = np.clip(1.0 - np.maximum(np.abs(state[:, 2]) / THETA_MAX, np.abs(state[:, 0]) / X_MAX), 0.0, 1.0)
        scores = (survived + up * (self.horizon - self.lookahead) * margin) / self.horizon
        for i, score in zip(rows, scores):
            predictions[i] = float(score)
        return predictions

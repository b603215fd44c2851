"""Closed-loop controllers: what acts in a LIBERO episode, one instance per episode.

A controller maps the latest observation (and ``info``, which holds privileged state when
the environment was built with ``privileged_info=True``) to an action chunk of shape
``(k, 7)``; the episode runner executes the chunk step by step and asks again when it is
used up. A *controller factory* builds one controller per episode and declares what the
environment must provide.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from wmrl_libero.gym_env import ACTION_DIM, NOOP_ACTION
from wmrl_libero.suites import TaskInfo

__all__ = [
    "Controller",
    "ControllerFactory",
    "OpenLoopController",
    "ConstantController",
    "RandomController",
    "simple_factory",
]


class Controller(Protocol):
    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> np.ndarray:
        """The next action chunk, float array (k, 7) in [-1, 1]."""


@dataclass
class ControllerFactory:
    """Builds a controller per episode.

    :param make: ``make(task, init_state) -> Controller``.
    :param name: recorded in evaluation results.
    :param image_size: camera image side in pixels the controller needs; ``None``: physics only.
    :param privileged: the controller reads ``info["privileged"]`` (simulator state).
    """

    make: Callable[[TaskInfo, int], Controller]
    name: str
    image_size: int | None = None
    privileged: bool = False


class OpenLoopController:
    """Replays a fixed action sequence (T, 7); no-ops (gripper unchanged) after its end."""

    def __init__(self, actions: np.ndarray):
        actions = np.asarray(actions, dtype=np.float32).reshape(-1, ACTION_DIM)
        self.actions = actions
        self._t = 0

    def act(self, obs, info) -> np.ndarray:
        if self._t < len(self.actions):
            chunk = self.actions[self._t :]
            self._t = len(self.actions)
            return chunk
        last = self.actions[-1:].copy() if len(self.actions) else NOOP_ACTION[None].copy()
        last[:, :6] = 0.0
        return last


class ConstantController:
    """Always the same action: a baseline that never solves a task."""

    def __init__(self, action: np.ndarray = NOOP_ACTION):
        self.action = np.asarray(action, dtype=np.float32).reshape(1, ACTION_DIM)

    def act(self, obs, info) -> np.ndarray:
        return self.action


class RandomController:
    """Uniform random actions in [-1, 1], seeded per episode."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def act(self, obs, info) -> np.ndarray:
        return self.rng.uniform(-1, 1, (1, ACTION_DIM)).astype(np.float32)


def simple_factory(name: str) -> ControllerFactory:
    """``zero`` (no-op) or ``random`` baselines."""
    if name == "zero":
        return ControllerFactory(lambda task, init: ConstantController(), "zero")
    if name == "random":
        return ControllerFactory(lambda task, init: RandomController(1000 * task.index + init), "random")
    raise KeyError(name)

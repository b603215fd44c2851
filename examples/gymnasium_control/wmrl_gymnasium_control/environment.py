"""Real execution: roll an open-loop plan out in gymnasium's ``CartPole-v1``.

A task is a reset seed, so its initial state is fixed; ``train`` and ``heldout`` seeds are disjoint.
A solution is a list of ``horizon`` actions in ``{0, 1}``; its score is the undiscounted return
divided by ``horizon`` (the share of steps the pole stayed up, in [0, 1], higher is better).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from wmrl_core.types import CostModel, Outcome, Task

__all__ = ["CartPoleSeeds", "HELDOUT_SEED_BASE"]

STATE_DIM = 4  # (x, x_dot, theta, theta_dot)
HELDOUT_SEED_BASE = 1_000_000  # held-out seeds start here: disjoint from any train seed below it


class CartPoleSeeds:
    """CartPole episodes from fixed seeds; executing a plan is one episode per solution.

    :param horizon: actions per plan, and the episode's step limit (CartPole's own limit is 500).
    :param num_train: train tasks, seeds ``seed .. seed + num_train - 1``.
    :param num_heldout: held-out tasks, seeds ``HELDOUT_SEED_BASE + seed ..``.
    :param seed: the first seed of each split.
    :param execution_cost_s: declared seconds per executed solution (``None``: charge wall time).
    """

    splits = ("train", "heldout")

    def __init__(
        self,
        *,
        horizon: int = 50,
        num_train: int = 16,
        num_heldout: int = 8,
        seed: int = 0,
        execution_cost_s: float | None = None,
    ):
        if horizon < 1 or horizon > 500:
            raise ValueError(f"horizon must be in 1..500 (CartPole-v1's limit), got {horizon}")
        if seed < 0 or seed + num_train > HELDOUT_SEED_BASE:
            raise ValueError(f"train seeds {seed}..{seed + num_train - 1} must stay below {HELDOUT_SEED_BASE}")
        self.horizon = int(horizon)
        self.env = gym.make("CartPole-v1", max_episode_steps=self.horizon)
        self.n_actions = int(self.env.action_space.n)
        self.state_dim = STATE_DIM
        self.cost = None if execution_cost_s is None else CostModel(per_item_s=float(execution_cost_s))
        seeds = {
            "train": range(seed, seed + num_train),
            "heldout": range(HELDOUT_SEED_BASE + seed, HELDOUT_SEED_BASE + seed + num_heldout),
        }
        self._tasks = {split: [self._task(s) for s in split_seeds] for split, split_seeds in seeds.items()}

    def _task(self, seed: int) -> Task:
        state, _ = self.env.reset(seed=seed)
        state = np.asarray(state, dtype=np.float64)
        if state.shape != (STATE_DIM,):  # the policy's inputs and the world model's physics assume it
            raise ValueError(
                f"CartPole-v1's observation is (x, x_dot, theta, theta_dot), shape (4,); got {state.shape}"
            )
        return Task(
            id=f"cartpole-seed-{seed}",
            description=f"Balance the pole for {self.horizon} steps from the state of reset(seed={seed}).",
            features=state,
            data={"seed": seed, "state": state},
        )

    def tasks(self, split: str = "train") -> list[Task]:
        if split not in self._tasks:
            raise ValueError(f"unknown split {split!r}; CartPoleSeeds has {sorted(self._tasks)}")
        return list(self._tasks[split])

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        return [self._rollout(task, plan) for task, plan in zip(tasks, solutions)]

    def _rollout(self, task: Task, plan: Any) -> Outcome:
        problem = self._invalid(plan)
        if problem:
            return Outcome(status="invalid_solution", info={"error": problem})
        try:
            self.env.reset(seed=task.data["seed"])
            steps = 0
            for action in plan:
                _, _, terminated, truncated, _ = self.env.step(int(action))
                steps += 1
                if terminated or truncated:
                    break
        except Exception as error:  # a simulator failure is an outcome, never an exception
            return Outcome(status="crashed", info={"error": f"{type(error).__name__}: {error}"})
        return Outcome(score=steps / self.horizon, info={"steps": steps})

    def _invalid(self, plan: Any) -> str:
        """Why ``plan`` is not ``horizon`` actions of the action space ('' when it is)."""
        try:
            actions = np.asarray(plan)
        except Exception as error:
            return f"not an array of actions: {error}"
        if actions.shape != (self.horizon,):
            return f"a plan has shape ({self.horizon},), got {actions.shape}"
        if not np.issubdtype(actions.dtype, np.integer) or not np.isin(actions, range(self.n_actions)).all():
            return f"actions must be integers in 0..{self.n_actions - 1}"
        return ""

    def close(self) -> None:
        self.env.close()

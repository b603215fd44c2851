r"""A contextual bandit with known truth, and its real environment.

Each task *t* has ``num_arms`` arms (a solution is an arm index). Arm *a* has a true mean
:math:`\mu_{t,a}\in[0,1]`; real execution returns :math:`\mu_{t,a} + \sigma_{exec}\,\varepsilon`
and is charged ``execution_cost_s`` per solution.

Every task has one **best arm** (:math:`\mu = 0.9`, spread 0.05), one **decoy**
(:math:`\mu = 0.6`, spread ``decoy_spread``), and others with :math:`\mu\in[0.05, 0.75]` and spread
``base_spread``. The spread is what the world model (``world_model.py``) gets wrong about
an arm, and a convex miscalibration turns a large spread into an inflated mean prediction:
the raw world model prefers the decoy, which is truly worse.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from wmrl_core.types import CostModel, Outcome, Task

__all__ = ["BanditTruth", "SyntheticBanditEnvironment"]

BEST_MU, DECOY_MU, BEST_SPREAD = 0.9, 0.6, 0.05


class BanditTruth:
    """True means and world-model spreads, drawn once from ``seed``.

    :param num_tasks: number of tasks (contexts).
    :param num_arms: arms per task (>= 3: best, decoy, others).
    :param decoy_spread: world-model prediction spread of the decoy arm.
    :param base_spread: spread of the other arms.
    :param seed: draws the instance; the synthetic configs pass the run's seed (``truth_seed``)
        so that each seed trains on its own bandit and intervals cover instance-to-instance variation.

    ``best[t]`` and ``decoy[t]`` are the best and decoy arm of task *t*.
    """

    def __init__(
        self,
        *,
        num_tasks: int = 8,
        num_arms: int = 10,
        decoy_spread: float = 0.6,
        base_spread: float = 0.1,
        seed: int = 0,
    ):
        if num_arms < 3:
            raise ValueError(f"num_arms must be >= 3 (best, decoy, others), got {num_arms}")
        if num_tasks < 1:
            raise ValueError(f"num_tasks must be >= 1, got {num_tasks}")
        rng = np.random.default_rng([seed, 0xB4])
        self.mu = rng.uniform(0.05, 0.75, size=(num_tasks, num_arms))
        self.spread = np.full((num_tasks, num_arms), base_spread)
        self.best = np.zeros(num_tasks, dtype=np.int64)
        self.decoy = np.zeros(num_tasks, dtype=np.int64)
        for t in range(num_tasks):
            best, decoy = rng.choice(num_arms, size=2, replace=False)
            self.mu[t, best], self.spread[t, best] = BEST_MU, BEST_SPREAD
            self.mu[t, decoy], self.spread[t, decoy] = DECOY_MU, decoy_spread
            self.best[t], self.decoy[t] = best, decoy
        self.num_tasks, self.num_arms = num_tasks, num_arms

    @property
    def optimum(self) -> float:
        """Mean true reward of the best arms: the ceiling of ``eval/true_reward``."""
        return float(self.mu.max(axis=1).mean())


def _task_index(task: Task) -> int:
    return int(task.data["index"])


class SyntheticBanditEnvironment:
    """Real environment of the synthetic domain.

    :param execution_cost_s: declared cost of one real execution (seconds).
    :param execution_noise: standard deviation :math:`\\sigma_{exec}` of real rewards.
    :param execution_sleep_s: wall seconds ``execute`` sleeps per solution, to emulate slow
        execution in benchmarks (``wmrl experiment ray-execution``); 0 by default.
    Other keyword arguments define the truth (see :class:`BanditTruth`).
    """

    def __init__(
        self,
        *,
        num_tasks: int = 8,
        num_arms: int = 10,
        decoy_spread: float = 0.6,
        base_spread: float = 0.1,
        execution_noise: float = 0.1,
        execution_cost_s: float = 1.0,
        truth_seed: int = 0,
        seed: int = 0,
        execution_sleep_s: float = 0.0,
    ):
        if execution_sleep_s < 0:
            raise ValueError(f"execution_sleep_s must be >= 0 seconds, got {execution_sleep_s}")
        self.truth = BanditTruth(
            num_tasks=num_tasks, num_arms=num_arms, decoy_spread=decoy_spread, base_spread=base_spread, seed=truth_seed
        )
        self.execution_noise = execution_noise
        self.execution_sleep_s = execution_sleep_s
        self.cost = CostModel(per_item_s=execution_cost_s)
        self._rng = np.random.default_rng([seed, 0xE7])
        self._tasks = [
            Task(
                id=f"bandit-{t}",
                description=f"Pick the best of {num_arms} arms in context {t}.",
                features=np.eye(num_tasks, dtype=np.float32)[t],
                data={"index": t},
            )
            for t in range(num_tasks)
        ]

    def tasks(self, split: str = "train") -> list[Task]:
        if split not in ("train", "heldout"):
            raise ValueError(f"unknown split {split!r}; the synthetic bandit has 'train' (= 'heldout')")
        return list(self._tasks)  # a bandit is evaluated on the contexts it trains on

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        outcomes = []
        for task, arm in zip(tasks, solutions, strict=True):
            if self.execution_sleep_s:
                time.sleep(self.execution_sleep_s)
            mu = self.truth.mu[_task_index(task), int(arm)]
            outcomes.append(Outcome(score=float(mu + self.execution_noise * self._rng.standard_normal())))
        return outcomes

    def true_reward(self, task: Task, solution: Any) -> float:
        return float(self.truth.mu[_task_index(task), int(solution)])

    def state_dict(self) -> dict:
        return {"rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self._rng.bit_generator.state = state["rng"]

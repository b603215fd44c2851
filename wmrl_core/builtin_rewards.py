"""Built-in reward extractors (a plugin like any other)."""

from __future__ import annotations

import math

from wmrl_core import hookimpl
from wmrl_core.contracts import is_rewarded
from wmrl_core.types import Outcome, Task

__all__ = ["ScoreReward"]


class ScoreReward:
    """Reward = the outcome's score when it is ``ok`` and finite; ``failure_reward`` for the
    solution's own failures (rewarded statuses, ``wmrl_core.contracts.STATUSES``); ``None``
    (no reward) for statuses that are not the solution's fault (``sandbox_error``,
    ``no_prediction``), whatever ``failure_reward`` is.

    :param failure_reward: reward of a failed or score-less outcome; ``None`` drops the
        rollout from the update (NaN) instead of penalizing it.
    """

    def __init__(self, env: object = None, *, failure_reward: float | None = None):
        if failure_reward is not None and not math.isfinite(failure_reward):
            raise ValueError(f"failure_reward must be finite or None, got {failure_reward}")
        self.failure_reward = failure_reward

    def __call__(self, task: Task, outcome: Outcome) -> float | None:
        if outcome.ok and outcome.score is not None:  # ok implies a score; the type checker cannot know
            return float(outcome.score)
        return self.failure_reward if is_rewarded(outcome.status) else None


@hookimpl
def wmrl_register_reward_extractors(table):
    table.add(
        "score",
        "wmrl_core.builtin_rewards:ScoreReward",
        description="the outcome's score; failures get failure_reward (default: dropped)",
    )

"""The ``autoresearch-score`` reward extractor: outcome -> direction-aware, comparable reward.

``reward = normalized_score(metric, outcome.score)`` for an ok outcome: accuracy, balanced
accuracy and macro-F1 as they are; R^2 clipped to ``[-1, 1]``; RMSE and MAE as
``1 - error / constant-prediction error`` clipped to ``[-1, 1]`` (see
:mod:`wmrl_autoresearch.tasks.task_metrics`). Higher is always better and every task shares the scale
(1 = perfect, 0 = no better than a constant for the error metrics). A competition's reward is
its leaderboard percentile in ``[0, 1]`` (:mod:`wmrl_autoresearch.tasks.competition_task`).

Failures (timeout, oom, crashed, invalid_output, missing_output, or an ok outcome whose score
is missing/NaN/inf) get ``penalty`` (default ``-1.0``, the worst normalized score), or the
status's entry in ``penalties``. Statuses that are not the solution's fault
(``sandbox_error``, ``no_prediction``: ``wmrl_core.contracts.STATUSES``) return ``None``
(the engine drops such rollouts); ``penalties`` cannot name them. The result is always a finite float or ``None``: NaN and infinities never reach
training.

Works on real outcomes and on world-model predictions alike: only ``status`` and ``score``
(the predicted raw metric value) are read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from wmrl_autoresearch.tasks.task import AutoResearchTask
from wmrl_core.contracts import STATUSES, check_status, is_rewarded
from wmrl_core.types import Outcome, as_outcome

__all__ = ["AutoResearchScoreReward", "make_reward_extractor", "REWARD_EXTRACTOR_NAME"]

REWARD_EXTRACTOR_NAME = "autoresearch-score"


class AutoResearchScoreReward:
    """Callable ``(task, outcome) -> float | None``.

    :param penalty: reward of a failed execution, a finite float.
    :param penalties: per-status overrides, e.g. ``{"timeout": -0.5, "sandbox_error": -1.0}``.
    """

    def __init__(self, penalty: float = -1.0, penalties: Mapping[str, float] | None = None):
        self.penalty = self._finite("penalty", penalty)
        self.penalties = {
            check_status(str(k)): self._finite(f"penalties[{k!r}]", v) for k, v in (penalties or {}).items()
        }
        unrewarded = sorted(k for k in self.penalties if not is_rewarded(k))
        if unrewarded:
            raise ValueError(
                f"penalties for {unrewarded}: these statuses are not the solution's fault ("
                + "; ".join(STATUSES[k].meaning for k in unrewarded)
                + ") and give no reward; remove them from `penalties`"
            )

    @staticmethod
    def _finite(name: str, value: Any) -> float:
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"reward {name} must be a finite number, got {value}")
        return value

    def _failure(self, status: str) -> float | None:
        if not is_rewarded(status):
            return None
        return self.penalties.get(status, self.penalty)

    def __call__(self, task: Any, outcome: Outcome | float | None) -> float | None:
        outcome = as_outcome(outcome)
        ar_task = getattr(task, "data", task)
        if not isinstance(ar_task, AutoResearchTask):
            raise TypeError(
                f"autoresearch-score needs tasks whose .data is an AutoResearchTask, got {type(ar_task).__name__}; "
                "use it with the `autoresearch` environment"
            )
        if outcome.status != "ok":
            return self._failure(outcome.status)
        score = outcome.score
        if score is None or not isinstance(score, (int, float)) or not math.isfinite(float(score)):
            return self._failure("invalid_output")
        return ar_task.normalize(float(score))


def make_reward_extractor(
    env: Any = None, penalty: float = -1.0, penalties: Mapping[str, float] | None = None
) -> AutoResearchScoreReward:
    """Registered factory (called as ``factory(env=env, **kwargs)``)."""
    return AutoResearchScoreReward(penalty=penalty, penalties=penalties)

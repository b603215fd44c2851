"""Task metrics: how a prediction vector is scored, which direction is better, and how a raw
metric value maps to a task-independent normalized score.

Normalized score (what :mod:`wmrl_autoresearch.grading.rewards` turns into a reward; higher is
better, comparable across tasks, always in ``[-1, 1]``):

==================  ===========  ==========================================================
metric              direction    normalized score
==================  ===========  ==========================================================
accuracy            higher       the value itself (``[0, 1]``)
balanced_accuracy   higher       the value itself (``[0, 1]``)
macro_f1            higher       the value itself (``[0, 1]``)
r2                  higher       ``clip(r2, -1, 1)``
rmse                lower        ``clip(1 - rmse / baseline, -1, 1)``; baseline = RMSE of
                                 predicting the mean of the test targets (their std)
mae                 lower        ``clip(1 - mae / baseline, -1, 1)``; baseline = MAE of
                                 predicting the median of the test targets
==================  ===========  ==========================================================

So 0 means "no better than a constant prediction" for the regression error metrics and
1 is perfect for every metric.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Metric", "METRICS", "get_metric", "constant_baseline", "normalized_score"]


def _accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(y_true == y_pred))


def _balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    recalls = [np.mean(y_pred[y_true == label] == label) for label in np.unique(y_true)]
    return float(np.mean(recalls))


def _macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import f1_score

    # labels= the true classes: a predicted label that does not exist is simply wrong
    return float(f1_score(y_true, y_pred, labels=np.unique(y_true), average="macro", zero_division=0))


def _rmse(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))


def _mae(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(np.abs(y_true - y_pred)))


def _r2(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    ss_res = float(np.sum((y_true - y_pred) ** 2))
    ss_tot = float(np.sum((y_true - np.mean(y_true)) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot


@dataclass(frozen=True)
class Metric:
    """A scoring rule.

    :param name: as written in task definitions.
    :param kind: ``"classification"`` (labels compared as strings) or ``"regression"`` (floats).
    :param higher_is_better: direction of the raw value.
    :param fn: ``fn(y_true, y_pred) -> float``.
    """

    name: str
    kind: str
    higher_is_better: bool
    fn: Callable[[np.ndarray, np.ndarray], float]

    def __call__(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        return self.fn(y_true, y_pred)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("accuracy", "classification", True, _accuracy),
        Metric("balanced_accuracy", "classification", True, _balanced_accuracy),
        Metric("macro_f1", "classification", True, _macro_f1),
        Metric("rmse", "regression", False, _rmse),
        Metric("mae", "regression", False, _mae),
        Metric("r2", "regression", True, _r2),
    )
}
"""Every supported metric, by name; the order is the one-hot order of task features."""


def get_metric(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; use one of {', '.join(METRICS)}") from None


def constant_baseline(metric: Metric, y_test: np.ndarray) -> float | None:
    """Error of the best constant prediction on the test targets (regression errors only)."""
    if metric.name == "rmse":
        return _rmse(y_test, np.full_like(y_test, np.mean(y_test), dtype=float))
    if metric.name == "mae":
        return _mae(y_test, np.full_like(y_test, np.median(y_test), dtype=float))
    return None


def normalized_score(metric: Metric, value: float, baseline: float | None = None) -> float:
    """Map a raw metric value to ``[-1, 1]``, higher is better (see the module docstring).

    :raises ValueError: for a non-finite value or a missing/zero baseline of an error metric.
    """
    if not math.isfinite(value):
        raise ValueError(f"{metric.name} value {value} is not finite")
    if metric.higher_is_better:
        return float(min(1.0, max(-1.0, value)))
    if baseline is None or not math.isfinite(baseline) or baseline <= 0:
        raise ValueError(
            f"{metric.name} needs a positive constant-prediction baseline to be normalized, got {baseline}; "
            "build the task with AutoResearchTask.create so the baseline is computed"
        )
    return float(min(1.0, max(-1.0, 1.0 - value / baseline)))

"""Tasks whose data is read only when it is needed.

Listing tasks, describing them to agents and computing the policy's meta-features use only
the task's :class:`TaskCard` (stored in the pool manifest); the tables are built the first
time a solution is run or graded (``x_train``, ``y_test`` ...), once per process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from wmrl_autoresearch.tasks.task import AutoResearchTask, task_features

__all__ = ["DeferredTask", "TaskCard", "card_of"]


@dataclass(frozen=True)
class TaskCard:
    """What is known about a task without its data (everything that ``task.json`` and the
    description show, the metric baseline, and the meta-feature vector)."""

    id: str
    kind: str
    metric: str
    split: str
    columns: tuple[str, ...]
    n_train: int
    n_test: int
    classes: tuple[str, ...]
    categorical_columns: tuple[str, ...]
    has_missing: bool
    baseline: float | None
    fingerprint: str
    features: tuple[float, ...]
    time_limit_s: float = 60.0
    memory_mb: int = 1024
    cpus: float = 1.0
    source: str = ""
    licence: str = ""
    summary: str = ""

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("columns", "classes", "categorical_columns", "features"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskCard:
        return cls(**{**d, **{k: tuple(d[k]) for k in ("columns", "classes", "categorical_columns", "features")}})


def card_of(task: AutoResearchTask, licence: str = "") -> TaskCard:
    """The card of a built task (what the manifest stores)."""
    return TaskCard(
        id=task.id,
        kind=task.kind,
        metric=task.metric,
        split=task.split,
        columns=tuple(task.columns),
        n_train=task.n_train,
        n_test=task.n_test,
        classes=tuple(task.classes),
        categorical_columns=tuple(task.categorical_columns),
        has_missing=task.has_missing,
        baseline=task.baseline,
        fingerprint=task.fingerprint,
        features=tuple(float(v) for v in task_features(task)),  # float32, exact
        time_limit_s=task.time_limit_s,
        memory_mb=task.memory_mb,
        cpus=task.cpus,
        source=task.source,
        licence=licence or task.licence,
        summary=task.summary,
    )


class DeferredTask(AutoResearchTask):
    """An :class:`AutoResearchTask` built from its card; ``load()`` makes the real task on first data access.

    The loaded task must match the card (columns, row counts, fingerprint): a dataset package
    that changed under the manifest gives a clear error instead of silently different data.
    """

    def __init__(self, card: TaskCard, load: Callable[[], AutoResearchTask]):
        self.card = card
        self.id, self.kind, self.metric, self.split = card.id, card.kind, card.metric, card.split
        self.columns = tuple(card.columns)
        self.time_limit_s, self.memory_mb, self.cpus = card.time_limit_s, card.memory_mb, card.cpus
        self.source, self.licence, self.summary, self.baseline = card.source, card.licence, card.summary, card.baseline
        self._load = load
        self._task: AutoResearchTask | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DeferredTask(id={self.id!r}, split={self.split!r}, loaded={self.loaded})"

    @property
    def loaded(self) -> bool:
        return self._task is not None

    def materialize(self) -> AutoResearchTask:
        """The task with its data (built on the first call, then kept)."""
        with self._lock:
            if self._task is None:
                task = self._load()
                got = (tuple(task.columns), task.n_train, task.n_test, task.fingerprint)
                want = (self.columns, self.card.n_train, self.card.n_test, self.card.fingerprint)
                if got != want:
                    raise ValueError(
                        f"task {self.id}: the data built now differs from the pool manifest (columns/rows/fingerprint "
                        f"{got[1:]} vs {want[1:]}); a dataset package changed: run `wmrl-autoresearch build-pool`"
                    )
                self._task = task
            return self._task

    # the tables: read on first access
    x_train = property(lambda self: self.materialize().x_train)
    y_train = property(lambda self: self.materialize().y_train)
    x_test = property(lambda self: self.materialize().x_test)
    y_test = property(lambda self: self.materialize().y_test)

    # everything else: from the card
    n_train = property(lambda self: self.card.n_train)
    n_test = property(lambda self: self.card.n_test)
    classes = property(lambda self: list(self.card.classes))
    categorical_columns = property(lambda self: list(self.card.categorical_columns))
    has_missing = property(lambda self: self.card.has_missing)
    fingerprint = property(lambda self: self.card.fingerprint)

    def meta_features(self) -> np.ndarray:
        return np.asarray(self.card.features, dtype=np.float32)

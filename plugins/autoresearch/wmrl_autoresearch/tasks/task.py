"""What an AutoResearch task is, how it is shown to agents, and how it becomes a WMRL ``Task``.

A task is a supervised-learning problem: a training table the agent sees (features plus the
``target`` column), a test table whose targets the agent never sees, a metric with a known
direction, and time/resource limits. A solution is a Python script that reads the visible
files and writes ``predictions.csv``; the grader scores it against the hidden targets.

Files visible to a solution (in ``$DATA_DIR``, ``/data`` inside the sandbox):

* ``train.csv``: header ``<feature columns...>,target``; one row per training example.
* ``test.csv``: header ``id,<feature columns...>``; no target.
* ``task.json``: id, description, kind, metric, direction, limits, column names.

Missing values are empty cells; categorical features are strings.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_autoresearch.tasks.labels import label_strings
from wmrl_autoresearch.tasks.task_metrics import METRICS, Metric, constant_baseline, get_metric, normalized_score

__all__ = [
    "AutoResearchTask",
    "FEATURE_NAMES",
    "N_FEATURES",
    "task_features",
    "to_wmrl_task",
    "split_revealing_features",
    "write_visible_files",
    "SPLITS",
]

SPLITS = ("train", "heldout")
KINDS = ("classification", "regression")


@dataclass(eq=False)
class AutoResearchTask:
    """One task. Build it with :meth:`create`, which validates it and computes derived fields.

    :param id: unique, stable name (lowercase, digits, ``-``).
    :param kind: ``"classification"`` or ``"regression"``.
    :param metric: a name from :data:`wmrl_autoresearch.tasks.task_metrics.METRICS`.
    :param split: ``"train"`` (the training suite) or ``"heldout"`` (never trained on).
    :param columns: feature column names, in file order.
    :param x_train: (n_train, n_features) object array: floats (NaN = missing) or strings.
    :param y_train: (n_train,) training targets (visible).
    :param x_test: (n_test, n_features) test features (visible).
    :param y_test: (n_test,) test targets: hidden, only the grader reads them.
    :param time_limit_s: CPU-time limit of one run of a solution, CPU seconds (see
        :class:`~wmrl_autoresearch.sandbox.limits.SandboxLimits`; the wall clock is only a safety net).
    :param memory_mb: memory limit of the sandbox, MiB.
    :param cpus: CPU quota of the sandbox, in cores.
    :param source: where the data comes from (one line).
    :param summary: what the data is about (one sentence, shown to the agent).
    :param licence: licence of the data (shown by ``wmrl-autoresearch tasks``).
    """

    id: str
    kind: str
    metric: str
    split: str
    columns: tuple[str, ...]
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray = field(repr=False)
    time_limit_s: float = 60.0
    memory_mb: int = 1024
    cpus: float = 1.0
    source: str = ""
    summary: str = ""
    baseline: float | None = None  # constant-prediction error for rmse/mae (see metrics)
    licence: str = ""

    @classmethod
    def create(
        cls,
        *,
        id: str,
        kind: str,
        metric: str,
        split: str,
        columns: Sequence[str],
        x_train: Any,
        y_train: Any,
        x_test: Any,
        y_test: Any,
        **kwargs: Any,
    ) -> AutoResearchTask:
        """Validate and normalise the arrays (labels of classification tasks become strings)."""
        if kind not in KINDS:
            raise ValueError(f"task {id!r}: kind {kind!r} must be one of {KINDS}")
        m = get_metric(metric)
        if m.kind != kind:
            raise ValueError(f"task {id!r}: metric {metric!r} is for {m.kind} tasks, not {kind}")
        if split not in SPLITS:
            raise ValueError(f"task {id!r}: split {split!r} must be one of {SPLITS}")
        if not id or any(c not in "abcdefghijklmnopqrstuvwxyz0123456789-_." for c in id):
            raise ValueError(f"task id {id!r} must be non-empty lowercase letters, digits, '-', '_' or '.'")
        columns = tuple(str(c) for c in columns)
        if "target" in columns or "id" in columns:
            raise ValueError(f"task {id!r}: feature columns may not be named 'target' or 'id'; rename them")
        x_train, x_test = _as_table(x_train, len(columns)), _as_table(x_test, len(columns))
        y_train, y_test = np.asarray(y_train), np.asarray(y_test)
        if len(x_train) != len(y_train) or len(x_test) != len(y_test) or len(y_test) == 0 or len(y_train) == 0:
            raise ValueError(
                f"task {id!r}: {len(x_train)} train rows vs {len(y_train)} targets, "
                f"{len(x_test)} test rows vs {len(y_test)} targets; both parts must be non-empty and aligned"
            )
        if kind == "classification":
            y_train, y_test = label_strings(y_train), label_strings(y_test)
        else:
            y_train, y_test = y_train.astype(float), y_test.astype(float)
            if not (np.isfinite(y_train).all() and np.isfinite(y_test).all()):
                raise ValueError(f"task {id!r}: regression targets must be finite numbers")
        task = cls(
            id=id,
            kind=kind,
            metric=metric,
            split=split,
            columns=columns,
            x_train=x_train,
            y_train=y_train,
            x_test=x_test,
            y_test=y_test,
            **kwargs,
        )
        if not m.higher_is_better:
            task.baseline = constant_baseline(m, y_test)
            if not task.baseline or task.baseline <= 0:
                raise ValueError(f"task {id!r}: test targets are constant, {metric} cannot be normalized")
        return task

    # ---------------------------------------------------------------- derived views

    @property
    def metric_spec(self) -> Metric:
        return get_metric(self.metric)

    @property
    def n_train(self) -> int:
        return len(self.y_train)

    @property
    def n_test(self) -> int:
        return len(self.y_test)

    @property
    def n_features(self) -> int:
        return len(self.columns)

    @property
    def classes(self) -> list[str]:
        """Sorted class labels seen in training (classification), else empty."""
        return sorted(set(self.y_train.tolist())) if self.kind == "classification" else []

    @property
    def categorical_columns(self) -> list[str]:
        """Feature columns holding strings."""
        return [c for j, c in enumerate(self.columns) if _is_categorical(self.x_train[:, j])]

    @property
    def has_missing(self) -> bool:
        """Whether some training feature cells are empty."""
        return _has_missing(self.x_train)

    def meta_features(self) -> np.ndarray:
        """:func:`task_features` of this task (a deferred task answers from its cached card)."""
        return task_features(self)

    def normalize(self, value: float) -> float:
        """The reward scale of a raw metric value: :func:`~.task_metrics.normalized_score` (a competition
        answers with its leaderboard percentile, :mod:`.competition_task`)."""
        return normalized_score(self.metric_spec, value, self.baseline)

    def write_visible(self, directory: str | os.PathLike) -> Path:
        """Write the files a solution sees into ``directory`` (:func:`write_visible_files`); returns it."""
        return write_visible_files(self, directory)

    @cached_property
    def fingerprint(self) -> str:
        """Hash of the visible data and settings: a cache key for the task's files."""
        h = hashlib.sha256()
        for part in (
            self.id,
            self.metric,
            repr(self.columns),
            self.x_train.tobytes() if self.x_train.dtype != object else repr(self.x_train.tolist()),
            repr(self.y_train.tolist()),
            repr(self.x_test.tolist()),
        ):
            h.update(part.encode() if isinstance(part, str) else part)
        return h.hexdigest()[:16]

    def description(self) -> str:
        """The natural-language statement given to agents (what to predict, metric, budget)."""
        m = self.metric_spec
        direction = "higher is better" if m.higher_is_better else "lower is better"
        if self.kind == "classification":
            target = (
                f"the class label (one of {len(self.classes)} classes: {', '.join(self.classes[:12])}"
                + (", ..." if len(self.classes) > 12 else "")
                + ")"
            )
        else:
            target = "a real number"
        categorical = self.categorical_columns
        extra = f" Categorical (string) columns: {', '.join(categorical)}." if categorical else ""
        missing = " Some cells are empty (missing values)." if self.has_missing else ""
        return (
            f"AutoResearch task `{self.id}` ({self.kind}). {self.summary}\n"
            f"Predict `target` ({target}) for every row of test.csv.\n"
            f"Data (directory $DATA_DIR, default /data): train.csv has {self.n_train} rows with "
            f"{self.n_features} feature columns and `target`; test.csv has {self.n_test} rows with `id` and the "
            f"same feature columns, without `target`.{extra}{missing}\n"
            f"Output: write $OUTPUT_DIR/predictions.csv (default /output) with header `id,prediction` and one row "
            f"per test row.\n"
            f"Metric: {m.name} on the hidden test targets ({direction}).\n"
            f"{self.budget_text()}"
        )

    def budget_text(self) -> str:
        """The last line of :meth:`description`: the run's limits and the software at hand."""
        return (
            f"Budget: {self.time_limit_s:g} CPU-seconds, {self.memory_mb} MiB memory, {self.cpus:g} CPU core(s), "
            f"no network. Python 3.11 with numpy, pandas, scikit-learn and torch (CPU)."
        )

    def public_metadata(self) -> dict[str, Any]:
        """Contents of ``task.json``: nothing here reveals the test targets."""
        return {
            "id": self.id,
            "kind": self.kind,
            "metric": self.metric,
            "higher_is_better": self.metric_spec.higher_is_better,
            "columns": list(self.columns),
            "classes": self.classes,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "time_limit_s": self.time_limit_s,
            "memory_mb": self.memory_mb,
            "cpus": self.cpus,
            "description": self.description(),
        }


def _as_table(x: Any, n_columns: int) -> np.ndarray:
    arr = np.asarray(x, dtype=object)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.shape[1] != n_columns:
        raise ValueError(f"feature table has shape {arr.shape}, expected (rows, {n_columns})")
    return arr


def _is_categorical(column: np.ndarray) -> bool:
    return any(isinstance(v, str) for v in column.tolist())


def _has_missing(table: np.ndarray) -> bool:
    return any((isinstance(v, float) and math.isnan(v)) or v is None for v in table.ravel().tolist())


# --------------------------------------------------------------------------- features

FEATURE_NAMES: tuple[str, ...] = (
    "log10_n_train",  # 0  log10(1 + training rows)
    "log10_n_test",  # 1  log10(1 + test rows)
    "log10_n_features",  # 2  log10(1 + feature columns)
    "is_classification",  # 3  1 classification, 0 regression
    "log2_n_classes",  # 4  log2(number of classes); 0 for regression
    "class_balance",  # 5  rarest / most common class frequency in train; 1 for regression
    "frac_categorical",  # 6  share of feature columns holding strings
    "frac_missing",  # 7  share of empty cells in train features
    *(f"metric_{name}" for name in METRICS),  # 8..13 one-hot metric, order of METRICS
    "higher_is_better",  # 14 1 when the raw metric grows with quality
    "log10_time_limit_s",  # 15 log10(time limit in seconds)
    "log2_memory_gb",  # 16 log2(memory limit in GiB)
    "log10_target_std",  # 17 log10(1 + std of train targets), regression; 0 otherwise
)
"""Layout of ``Task.features`` (float32, fixed length :data:`N_FEATURES`).

Every feature describes the task's data and budget only: nothing tells the training split from
the held-out one (a split flag is constant over training, so a model never learns its weight and
every held-out input is shifted by an untrained amount)."""

N_FEATURES = len(FEATURE_NAMES)


def task_features(task: AutoResearchTask) -> np.ndarray:
    """Fixed-length float32 meta-feature vector of a task, laid out as :data:`FEATURE_NAMES`."""
    values: dict[str, float] = {
        "log10_n_train": math.log10(1 + task.n_train),
        "log10_n_test": math.log10(1 + task.n_test),
        "log10_n_features": math.log10(1 + task.n_features),
        "is_classification": float(task.kind == "classification"),
        "log2_n_classes": math.log2(max(1, len(task.classes))),
        "class_balance": 1.0,
        "frac_categorical": float(np.mean([_is_categorical(task.x_train[:, j]) for j in range(task.n_features)])),
        "frac_missing": float(
            np.mean([(isinstance(v, float) and math.isnan(v)) or v is None for v in task.x_train.ravel().tolist()])
        ),
        "higher_is_better": float(task.metric_spec.higher_is_better),
        "log10_time_limit_s": math.log10(max(task.time_limit_s, 1e-3)),
        "log2_memory_gb": math.log2(max(task.memory_mb, 1) / 1024.0),
        "log10_target_std": 0.0,
    }
    if task.kind == "classification":
        _, counts = np.unique(task.y_train.astype(str), return_counts=True)
        values["class_balance"] = float(counts.min() / counts.max())
    else:
        values["log10_target_std"] = math.log10(1 + float(np.std(task.y_train)))
    for name in METRICS:
        values[f"metric_{name}"] = float(task.metric == name)
    return np.array([values[name] for name in FEATURE_NAMES], dtype=np.float32)


def split_revealing_features(train: np.ndarray, heldout: np.ndarray) -> list[str]:
    """Names of the features that are constant over ``train`` yet take another value on some ``heldout`` row.

    Such a feature never varies where a model learns, so its weight stays at its initial value
    and every held-out input is shifted by it: it tells the split, not the data.

    :param train: (n_train_tasks, N_FEATURES) feature vectors of the training split.
    :param heldout: (n_heldout_tasks, N_FEATURES) feature vectors of the held-out split.
    """
    train, heldout = np.atleast_2d(np.asarray(train, dtype=float)), np.atleast_2d(np.asarray(heldout, dtype=float))
    if train.shape[1] != len(FEATURE_NAMES) or heldout.shape[1] != len(FEATURE_NAMES) or not len(train):
        raise ValueError(
            f"feature tables have shapes {train.shape} and {heldout.shape}; both need {len(FEATURE_NAMES)} columns "
            "(FEATURE_NAMES) and the training one at least one row"
        )
    constant = np.all(train == train[0], axis=0)
    differs = np.any(heldout != train[0], axis=0)
    return [name for name, c, d in zip(FEATURE_NAMES, constant, differs) if c and d]


def to_wmrl_task(task: AutoResearchTask):
    """The engine's view of a task: id, description, features, and the task itself as data."""
    from wmrl_core.types import Task

    return Task(id=task.id, description=task.description(), features=task.meta_features(), data=task)


# --------------------------------------------------------------------------- visible files


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return "" if math.isnan(value) else repr(float(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return str(value)


def write_visible_files(task: AutoResearchTask, directory: str | os.PathLike) -> Path:
    """Write ``train.csv``, ``test.csv`` and ``task.json`` (world-readable) into ``directory``.

    The hidden test targets are never written. Returns the directory.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*task.columns, "target"])
        for row, y in zip(task.x_train.tolist(), task.y_train.tolist()):
            w.writerow([*(_cell(v) for v in row), _cell(y)])
    with open(out / "test.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", *task.columns])
        for i, row in enumerate(task.x_test.tolist()):
            w.writerow([i, *(_cell(v) for v in row)])
    (out / "task.json").write_text(json.dumps(task.public_metadata(), indent=2))
    for name in ("train.csv", "test.csv", "task.json"):
        os.chmod(out / name, 0o644)
    os.chmod(out, 0o755)
    return out

"""User tasks from files: a YAML (or JSON) list of tasks, or a CSV index with one task per row.

Each task names its data as CSV file(s) with a header and a target column; paths are
relative to the description file. Keys (YAML) / columns (CSV index):

==============  ========  ==================================================================
key             required  meaning
==============  ========  ==================================================================
id              yes       unique task id (lowercase letters, digits, ``-``, ``_``, ``.``)
kind            yes       ``classification`` or ``regression``
metric          yes       accuracy, balanced_accuracy, macro_f1 (classification); rmse, mae, r2
target          yes       name of the target column
data            one of    a CSV with all rows; split by ``test_fraction`` and ``seed``
train_data      one of    a CSV of training rows, together with ``test_data`` (whose target
test_data                 column is kept hidden from solutions)
split           no        ``train`` (default) or ``heldout``
test_fraction   no        share of ``data`` rows held out for testing (default 0.3)
seed            no        split seed (default 0)
time_limit_s    no        CPU-time limit of a run, CPU seconds (default 60)
memory_mb       no        memory limit, MiB (default 1024)
cpus            no        CPU cores (default 1)
summary         no        one sentence about the data, shown to agents
==============  ========  ==================================================================

Example ``my_tasks.yaml``::

    tasks:
      - id: housing-prices
        kind: regression
        metric: rmse
        data: housing.csv
        target: price
        split: heldout
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_autoresearch.tasks.labels import label_strings
from wmrl_autoresearch.tasks.task import AutoResearchTask, to_wmrl_task

__all__ = ["load_task_file", "tasks_from_files", "TASK_FILES_ENV"]

TASK_FILES_ENV = "WMRL_AUTORESEARCH_TASK_FILES"
"""Environment variable: task description files to load, separated by ``os.pathsep`` (``:``)."""

_KNOWN_KEYS = {
    "id",
    "kind",
    "metric",
    "target",
    "data",
    "train_data",
    "test_data",
    "split",
    "test_fraction",
    "seed",
    "time_limit_s",
    "memory_mb",
    "cpus",
    "summary",
}


def _cell(text: str) -> Any:
    text = text.strip()
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return text


def _read_csv(path: Path, target: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    if not path.is_file():
        raise FileNotFoundError(f"task data file {path} does not exist; fix the path in the task description")
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f))
    if len(rows) < 2:
        raise ValueError(f"{path}: needs a header and at least one row")
    header = [h.strip() for h in rows[0]]
    if target not in header:
        raise ValueError(f"{path}: no target column {target!r}; columns are {header}")
    t = header.index(target)
    columns = [h for j, h in enumerate(header) if j != t]
    body = [r for r in rows[1:] if any(c.strip() for c in r)]
    for k, r in enumerate(body, start=2):
        if len(r) != len(header):
            raise ValueError(f"{path} line {k}: {len(r)} fields, header has {len(header)}")
    x = np.array([[_cell(c) for j, c in enumerate(r) if j != t] for r in body], dtype=object).reshape(len(body), -1)
    y = np.array([_cell(r[t]) for r in body], dtype=object)
    return columns, x, y


def _task_from_entry(entry: dict[str, Any], base: Path) -> AutoResearchTask:
    unknown = set(entry) - _KNOWN_KEYS
    name = entry.get("id", "?")
    if unknown:
        raise ValueError(f"task {name!r}: unknown keys {sorted(unknown)}; known keys: {sorted(_KNOWN_KEYS)}")
    for key in ("id", "kind", "metric", "target"):
        if not entry.get(key):
            raise ValueError(f"task {name!r}: missing required key {key!r}")
    target = str(entry["target"])
    kind = str(entry["kind"])
    seed = int(entry.get("seed") or 0)
    if entry.get("data"):
        from sklearn.model_selection import train_test_split

        columns, x, y = _read_csv(base / str(entry["data"]), target)
        if kind == "classification":
            y = label_strings(y)
        stratify = y if kind == "classification" and min(np.unique(y, return_counts=True)[1]) >= 2 else None
        x_tr, x_te, y_tr, y_te = train_test_split(
            x, y, test_size=float(entry.get("test_fraction") or 0.3), random_state=seed, stratify=stratify
        )
    elif entry.get("train_data") and entry.get("test_data"):
        columns, x_tr, y_tr = _read_csv(base / str(entry["train_data"]), target)
        test_columns, x_te, y_te = _read_csv(base / str(entry["test_data"]), target)
        if test_columns != columns:
            raise ValueError(f"task {name!r}: train columns {columns} differ from test columns {test_columns}")
    else:
        raise ValueError(f"task {name!r}: give either `data` or both `train_data` and `test_data`")
    if kind == "regression":
        try:
            y_tr, y_te = y_tr.astype(float), y_te.astype(float)
        except ValueError:
            raise ValueError(f"task {name!r}: regression target {target!r} has non-numeric values") from None
    return AutoResearchTask.create(
        id=str(entry["id"]),
        kind=kind,
        metric=str(entry["metric"]),
        split=str(entry.get("split") or "train"),
        columns=columns,
        x_train=x_tr,
        y_train=y_tr,
        x_test=x_te,
        y_test=y_te,
        time_limit_s=float(entry.get("time_limit_s") or 60.0),
        memory_mb=int(entry.get("memory_mb") or 1024),
        cpus=float(entry.get("cpus") or 1.0),
        summary=str(entry.get("summary") or ""),
        source=f"user task file ({base})",
    )


def load_task_file(path: str | os.PathLike) -> list[AutoResearchTask]:
    """Tasks described by a ``.yaml``/``.yml``/``.json`` file (key ``tasks``: a list) or a ``.csv`` index."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"task description file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix in {".yaml", ".yml", ".json"}:
        if suffix == ".json":
            doc = json.loads(path.read_text())
        else:
            import yaml

            doc = yaml.safe_load(path.read_text())
        entries = doc.get("tasks") if isinstance(doc, dict) else doc
        if not isinstance(entries, list):
            raise ValueError(f"{path}: expected a list of tasks under the key `tasks`")
    elif suffix == ".csv":
        with open(path, newline="", encoding="utf-8-sig") as f:
            entries = [
                {k.strip(): v.strip() for k, v in row.items() if k and v and v.strip()} for row in csv.DictReader(f)
            ]
    else:
        raise ValueError(f"{path}: task descriptions must be .yaml, .yml, .json or .csv (a task index)")
    tasks = [_task_from_entry(dict(e), path.parent) for e in entries]
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate task ids {sorted({i for i in ids if ids.count(i) > 1})}")
    return tasks


def tasks_from_files(paths: Iterable[str] | str | None = None, environment: str = "autoresearch") -> list:
    """Task-set entry point: tasks from description files (default: ``$WMRL_AUTORESEARCH_TASK_FILES``).

    :return: ``list[wmrl_core.types.Task]``.
    """
    if paths is None:
        paths = [p for p in os.environ.get(TASK_FILES_ENV, "").split(os.pathsep) if p]
    elif isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [to_wmrl_task(t) for p in paths for t in load_task_file(p)]

"""MLE-bench's two-place layout of a competition, read without MLE-bench installed.

A competition lives in two places, as MLE-bench (github.com/openai/mle-bench) lays it out:

* its **registry entry** ``<registry>/<id>/`` (``mlebench/competitions/<id>/`` in a checkout):
  ``config.yaml`` (``id``, ``name``, ``competition_type``, ``dataset.answers`` and
  ``dataset.sample_submission`` as paths relative to the data directory, ``grader.name``,
  ``grader.grade_fn`` as ``module:function``, ``preparer``), ``description.md``, ``grade.py`` with
  ``grade(submission: DataFrame, answers) -> float`` and ``leaderboard.csv`` (the public
  leaderboard: a ``score`` column, best first);
* its **prepared data** ``<data>/<id>/prepared/public/`` (what an agent sees: training data, test
  inputs, ``sample_submission.csv``, a description) and ``<data>/<id>/prepared/private/`` (the
  answers, read only by the grader, outside any sandbox).

Two optional keys of ``config.yaml`` that MLE-bench does not read: ``grader.higher_is_better`` (or
``grader.lower_is_better``), the score's direction where the leaderboard cannot tell it.

Here: reading an entry (:func:`read_entry`), loading its grader (:func:`load_grade_fn`), its answers
(:func:`load_answers`) and leaderboard (:func:`read_leaderboard`), the score's direction
(:func:`score_direction`), the leaderboard percentile (:func:`leaderboard_percentile`) and whether
a program policy can solve it as a table (:func:`tabular_layout`).
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wmrl_core.errors import DataError

__all__ = [
    "CompetitionEntry",
    "CompetitionError",
    "KNOWN_DIRECTIONS",
    "TabularLayout",
    "leaderboard_percentile",
    "list_entries",
    "load_answers",
    "load_grade_fn",
    "read_entry",
    "read_leaderboard",
    "read_submission",
    "score_direction",
    "tabular_layout",
]


class CompetitionError(DataError):
    """A competition cannot become a task; the message says why and what to do."""


KNOWN_DIRECTIONS: dict[str, bool] = {
    **dict.fromkeys(
        ("accuracy", "balanced_accuracy", "auc", "roc_auc", "auc-roc", "f1", "macro_f1", "f1_score", "r2", "map"),
        True,
    ),
    **dict.fromkeys(("rmse", "mse", "mae", "rmsle", "log_loss", "logloss", "mcrmse", "error_rate"), False),
}
"""Direction of common grader names (``True``: higher is better), the last resort of
:func:`score_direction`."""


@dataclass(frozen=True)
class CompetitionEntry:
    """One competition: its registry entry and where its prepared data lies.

    :param answers: ``<data>/<dataset.answers>``, the private answers (never mounted in a sandbox).
    :param sample_submission: ``<data>/<dataset.sample_submission>``, the shape every submission takes.
    :param declared_higher_is_better: ``grader.higher_is_better`` (or ``not grader.lower_is_better``) of
        ``config.yaml``; ``None`` when not declared.
    """

    id: str
    name: str
    competition_type: str
    registry_dir: Path
    public_dir: Path
    private_dir: Path
    answers: Path
    sample_submission: Path
    grader_name: str
    grade_fn: str
    declared_higher_is_better: bool | None = None

    @property
    def leaderboard_path(self) -> Path:
        return self.registry_dir / "leaderboard.csv"

    def description_text(self) -> str:
        """``description.md`` of the registry entry, else the one in ``prepared/public/``, else the name."""
        for path in (self.registry_dir / "description.md", self.public_dir / "description.md"):
            if path.is_file():
                return path.read_text(encoding="utf-8", errors="replace").strip()
        return self.name


def list_entries(registry: str | Path) -> list[Path]:
    """Registry entries (folders holding a ``config.yaml``) under ``registry``, sorted by name.

    :raises CompetitionError: when ``registry`` is not a folder.
    """
    registry = Path(registry)
    if not registry.is_dir():
        raise CompetitionError(
            f"competition registry {registry} is not a folder; point it at MLE-bench's mlebench/competitions/"
        )
    return sorted(p.parent for p in registry.glob("*/config.yaml"))


def _declared_direction(grader: dict[str, Any]) -> bool | None:
    if "higher_is_better" in grader:
        return bool(grader["higher_is_better"])
    if "lower_is_better" in grader:
        return not bool(grader["lower_is_better"])
    return None


def read_entry(entry_dir: str | Path, data_dir: str | Path) -> CompetitionEntry:
    """The entry in ``entry_dir`` with its data under ``data_dir``; checks that the data is prepared.

    :raises CompetitionError: for an unreadable or incomplete ``config.yaml``, or data not prepared.
    """
    import yaml

    entry_dir, data_dir = Path(entry_dir), Path(data_dir)
    try:
        config = yaml.safe_load((entry_dir / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CompetitionError(f"config.yaml cannot be read: {exc}") from None
    if not isinstance(config, dict):
        raise CompetitionError("config.yaml is not a mapping")
    dataset, grader = config.get("dataset") or {}, config.get("grader") or {}
    missing = [
        key
        for key, value in (
            ("dataset.answers", dataset.get("answers")),
            ("dataset.sample_submission", dataset.get("sample_submission")),
            ("grader.grade_fn", grader.get("grade_fn")),
        )
        if not value
    ]
    if missing:
        raise CompetitionError(f"config.yaml lacks {', '.join(missing)}")
    if ":" not in str(grader["grade_fn"]):
        raise CompetitionError(f"grader.grade_fn {grader['grade_fn']!r} is not `module:function`")
    cid = str(config.get("id") or entry_dir.name)
    entry = CompetitionEntry(
        id=cid,
        name=str(config.get("name") or cid),
        competition_type=str(config.get("competition_type") or ""),
        registry_dir=entry_dir,
        public_dir=data_dir / cid / "prepared" / "public",
        private_dir=data_dir / cid / "prepared" / "private",
        answers=data_dir / str(dataset["answers"]),
        sample_submission=data_dir / str(dataset["sample_submission"]),
        grader_name=str(grader.get("name") or "score"),
        grade_fn=str(grader["grade_fn"]),
        declared_higher_is_better=_declared_direction(grader),
    )
    for what, path in (
        ("prepared/public", entry.public_dir),
        ("prepared/private", entry.private_dir),
        ("the sample submission", entry.sample_submission),
        ("the answers", entry.answers),
    ):
        if not path.exists() or (path.is_dir() and not any(path.iterdir())):
            raise CompetitionError(
                f"data not prepared: {what} ({path}) is missing; run `mlebench prepare -c {cid} --data-dir {data_dir}`"
            )
    if entry.public_dir.resolve() in entry.answers.resolve().parents:
        raise CompetitionError(f"the answers {entry.answers} lie inside prepared/public, which agents see")
    return entry


def load_grade_fn(entry: CompetitionEntry) -> Callable[[Any, Any], Any]:
    """The competition's ``grade(submission, answers)``: ``grader.grade_fn`` imported, or, when its module
    is not importable (MLE-bench not installed), the function of that name in the entry's ``grade.py``.

    The grader is the competition's own code and runs in this process: point the registry only at
    code you trust (an MLE-bench checkout).

    :raises CompetitionError: naming the import error (a ``grade.py`` that imports ``mlebench`` needs
        MLE-bench installed: ``pip install -e`` the checkout).
    """
    module_name, _, fn_name = entry.grade_fn.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if not (exc.name and module_name.startswith(exc.name)):
            raise CompetitionError(f"the grader {module_name} needs {exc.name}, which is not installed") from None
        module = _module_from_file(entry)
    except Exception as exc:  # the grader's own import-time failure
        raise CompetitionError(f"the grader {module_name} failed to import: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise CompetitionError(f"the grader module {module.__name__} has no function {fn_name}()")
    return fn


def _module_from_file(entry: CompetitionEntry):
    path = entry.registry_dir / "grade.py"
    if not path.is_file():
        raise CompetitionError(f"grader module {entry.grade_fn} is not importable and {path} does not exist")
    name = "wmrl_competition_grader_" + re.sub(r"\W", "_", entry.id)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling inside grade.py look their module up
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        del sys.modules[name]
        raise CompetitionError(
            f"{path} imports {exc.name}, which is not installed"
            + (
                " (install the MLE-bench checkout: pip install -e PATH)"
                if (exc.name or "").startswith("mlebench")
                else ""
            )
        ) from None
    except Exception as exc:
        del sys.modules[name]
        raise CompetitionError(f"{path} failed to load: {type(exc).__name__}: {exc}") from None
    return module


# pandas 3 parses floats exactly by default and deprecates the switch MLE-bench passes
_EXACT_FLOATS = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}


def read_csv(source: Any) -> pd.DataFrame:
    """A CSV as MLE-bench reads it (floats round-tripped exactly)."""
    return pd.read_csv(source, **_EXACT_FLOATS)


def load_answers(path: Path) -> Any:
    """The private answers: a DataFrame for ``.csv``, a list of records for ``.jsonl``.

    :raises CompetitionError: for another format.
    """
    if path.suffix == ".csv":
        return read_csv(path)
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    raise CompetitionError(f"answers {path.name}: only .csv and .jsonl answers are read")


def read_submission(data: bytes) -> pd.DataFrame:
    """A submission's bytes as the DataFrame its grader receives (MLE-bench's reading)."""
    return read_csv(io.BytesIO(data))


def read_leaderboard(path: Path) -> np.ndarray | None:
    """The leaderboard's scores in file order (best first, as Kaggle's); ``None`` without ``leaderboard.csv``.

    :raises CompetitionError: for a file without a numeric ``score`` column.
    """
    if not path.is_file():
        return None
    try:
        board = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise CompetitionError(f"leaderboard.csv cannot be read: {exc}") from None
    if "score" not in board.columns:
        raise CompetitionError(f"leaderboard.csv has no `score` column (columns: {list(board.columns)[:8]})")
    scores = pd.to_numeric(board["score"], errors="coerce").to_numpy(dtype=float)
    scores = scores[np.isfinite(scores)]
    if not len(scores):
        raise CompetitionError("leaderboard.csv holds no finite score")
    return scores


def score_direction(
    entry: CompetitionEntry, leaderboard: np.ndarray | None, grade_module: Any = None
) -> tuple[bool, str]:
    """``(higher_is_better, where it comes from)``, in this order: ``config.yaml``'s ``grader.higher_is_better``;
    the grader module's ``HIGHER_IS_BETTER`` / ``LOWER_IS_BETTER``; the leaderboard's order (MLE-bench's
    rule: its first score better than its last); the grader's name (:data:`KNOWN_DIRECTIONS`).

    :raises CompetitionError: when none of them tells.
    """
    if entry.declared_higher_is_better is not None:
        return entry.declared_higher_is_better, "config.yaml"
    for attribute, higher in (("HIGHER_IS_BETTER", True), ("LOWER_IS_BETTER", False)):
        value = getattr(grade_module, attribute, None)
        if isinstance(value, bool):
            return value == higher, f"grader ({attribute})"
    if leaderboard is not None and len(leaderboard) >= 2 and leaderboard[0] != leaderboard[-1]:
        return bool(leaderboard[0] > leaderboard[-1]), "leaderboard order"
    known = KNOWN_DIRECTIONS.get(entry.grader_name.lower())
    if known is not None:
        return known, f"grader name `{entry.grader_name}`"
    raise CompetitionError(
        f"the direction of `{entry.grader_name}` is unknown (no leaderboard order to read it from); "
        "set grader.higher_is_better: true|false in config.yaml"
    )


def leaderboard_percentile(score: float, leaderboard: Sequence[float], *, higher_is_better: bool) -> float:
    r"""Share of the leaderboard's entries that ``score`` beats, ties counted half:

    .. math:: p = \frac{\#\{i : s_i \text{ worse than } x\} + \tfrac12 \#\{i : s_i = x\}}{n} \in [0, 1]

    (worse: lower when higher is better, higher otherwise). 1 beats every entry, 0 beats none.

    :raises ValueError: for an empty leaderboard or a non-finite score.
    """
    scores = np.asarray(leaderboard, dtype=float)
    if not len(scores):
        raise ValueError("the leaderboard is empty")
    if not math.isfinite(score):
        raise ValueError(f"score {score} is not finite")
    beaten = np.sum(scores < score) if higher_is_better else np.sum(scores > score)
    tied = np.sum(scores == score)
    return float((beaten + 0.5 * tied) / len(scores))


@dataclass(frozen=True)
class TabularLayout:
    """A competition a tabular program can solve: ``train.csv`` holds the features and ``target``;
    ``test.csv`` holds ``id`` and the same features; a submission is ``id,target``.

    :param features: feature columns, in ``test.csv``'s order.
    :param train_has_id: ``train.csv`` holds the id column too (dropped before fitting).
    """

    target: str
    id: str
    features: tuple[str, ...]
    train_has_id: bool


def _header(path: Path) -> list[str]:
    return [str(c) for c in pd.read_csv(path, nrows=0).columns]


def tabular_layout(entry: CompetitionEntry) -> tuple[TabularLayout | None, str]:
    """``(layout, "")`` when the competition is one table with a known target and id column (read from
    ``sample_submission.csv``: exactly ``id,target``), else ``(None, why not)``."""
    train, test = entry.public_dir / "train.csv", entry.public_dir / "test.csv"
    for path in (train, test):
        if not path.is_file():
            return None, f"no {path.name} in prepared/public"
    try:
        sample, train_cols, test_cols = _header(entry.sample_submission), _header(train), _header(test)
    except (OSError, ValueError) as exc:
        return None, f"a CSV header cannot be read: {exc}"
    if len(sample) != 2:
        return None, f"sample_submission.csv has {len(sample)} columns ({', '.join(sample[:5])}), not `id,target`"
    id_col, target = sample
    if id_col not in test_cols:
        return None, f"test.csv has no id column `{id_col}`"
    if target not in train_cols:
        return None, f"train.csv has no target column `{target}`"
    if target in test_cols:
        return None, f"test.csv holds the target column `{target}`"
    features = tuple(c for c in test_cols if c != id_col)
    train_features = {c for c in train_cols if c not in (target, id_col)}
    if not features or set(features) != train_features:
        return None, "train.csv and test.csv hold different feature columns"
    return TabularLayout(target, id_col, features, id_col in train_cols), ""

"""A prepared MLE-bench-format competition as an AutoResearch task.

What a solution sees in ``$DATA_DIR`` (``/data``, read-only) is exactly the competition's
``prepared/public/`` folder (sub-folders included); ``prepared/private/`` never enters a sandbox.
It writes its submission, in ``sample_submission.csv``'s shape, to ``$OUTPUT_DIR/predictions.csv``
(the sandbox's one output file; MLE-bench calls it ``submission.csv``). The competition's own
``grade.py`` scores it outside the sandbox (:mod:`wmrl_autoresearch.grading.submission`).

``Outcome.score`` is the grader's raw score; :meth:`CompetitionTask.normalize` turns it into the
reward scale: the leaderboard percentile (:func:`~.mlebench.leaderboard_percentile`) where
``leaderboard.csv`` ships, else the normalised score of the pool's tasks: the score itself, clipped to
``[-1, 1]``, when higher is better; ``1 - score / s0`` clipped, with ``s0`` the sample submission's
score, when lower is better.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wmrl_autoresearch.tasks.labels import label_strings
from wmrl_autoresearch.tasks.mlebench import CompetitionEntry, TabularLayout, leaderboard_percentile
from wmrl_autoresearch.tasks.task import FEATURE_NAMES, AutoResearchTask, task_features
from wmrl_autoresearch.tasks.task_metrics import METRICS, Metric

__all__ = ["CompetitionTask", "MAX_LISTED_FILES", "NOT_TABULAR_KIND", "public_files"]

NOT_TABULAR_KIND = "other"
"""``kind`` of a competition that is not one table with a known target (images, text, several targets)."""

MAX_LISTED_FILES = 40
"""Files of ``prepared/public/`` named in the description; the rest are counted."""

_CLASSIFICATION_MAX_LEVELS = 20  # an integer target with at most this many values is a class label


def _graded_by_the_competition(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    raise TypeError("a competition is graded by its own grade.py (wmrl_autoresearch.grading.submission)")


def public_files(public_dir: Path) -> list[tuple[str, int]]:
    """``(path relative to public_dir, bytes)`` of every file under it, sorted."""
    return sorted((str(p.relative_to(public_dir)), p.stat().st_size) for p in public_dir.rglob("*") if p.is_file())


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link a world-readable file; copy (mode 0644) one the sandbox user could not read.

    A hard link shares its inode: changing its mode would change the user's file, so it is never chmod-ed."""
    if os.stat(src).st_mode & 0o004:
        try:
            os.link(src, dst)
            return
        except OSError:  # another file system
            pass
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)


class CompetitionTask(AutoResearchTask):
    """One prepared, vetted competition (built by :func:`wmrl_autoresearch.vetting.competitions.load_competitions`).

    :param entry: where the competition lies.
    :param split: ``"train"`` or ``"heldout"``.
    :param grade_fn: the competition's ``grade(submission, answers) -> float``.
    :param higher_is_better: the score's direction; ``direction_source`` says who told it.
    :param leaderboard: the public leaderboard's scores (best first), or ``None``: then rewards are the
        normalised score.
    :param sample_score: the grader's score of ``sample_submission.csv`` (the constant-prediction baseline).
    :param n_submission_rows: rows of ``sample_submission.csv`` (= rows every submission has).
    :param tabular: the layout a tabular program uses, or ``None`` with ``not_tabular`` saying why.
    """

    def __init__(
        self,
        entry: CompetitionEntry,
        *,
        split: str,
        grade_fn: Callable[[Any, Any], Any],
        higher_is_better: bool,
        direction_source: str,
        leaderboard: np.ndarray | None,
        sample_score: float,
        n_submission_rows: int,
        submission_columns: tuple[str, ...],
        tabular: TabularLayout | None,
        not_tabular: str = "",
        answers_loader: Callable[[], Any] | None = None,
        time_limit_s: float = 60.0,
        memory_mb: int = 1024,
        cpus: float = 1.0,
    ):
        self.entry = entry
        self.id, self.split, self.metric = entry.id, split, entry.grader_name
        self.grade_fn = grade_fn
        self.higher_is_better, self.direction_source = bool(higher_is_better), direction_source
        self.leaderboard = None if leaderboard is None else np.asarray(leaderboard, dtype=float)
        self.sample_score = float(sample_score)
        self.n_submission_rows = int(n_submission_rows)
        self.submission_columns = tuple(submission_columns)
        self.tabular, self.not_tabular = tabular, not_tabular
        self.columns = tabular.features if tabular else ()
        self.time_limit_s, self.memory_mb, self.cpus = float(time_limit_s), int(memory_mb), float(cpus)
        self.source = f"MLE-bench-format competition ({entry.registry_dir})"
        self.summary, self.licence, self.baseline = entry.name, "the competition's rules", None
        self._answers_loader = answers_loader
        self._answers: Any = None

    def __repr__(self) -> str:
        return f"CompetitionTask(id={self.id!r}, split={self.split!r}, grader={self.metric!r})"

    # ---------------------------------------------------------------- the visible tables (tabular only)

    @cached_property
    def _tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        if self.tabular is None:
            return pd.DataFrame(), pd.DataFrame()
        return pd.read_csv(self.entry.public_dir / "train.csv"), pd.read_csv(self.entry.public_dir / "test.csv")

    @cached_property
    def kind(self) -> str:  # type: ignore[override]
        """``classification`` / ``regression`` from the grader's name or the training target, else ``other``."""
        if self.tabular is None:
            return NOT_TABULAR_KIND
        if self.metric in METRICS:
            return METRICS[self.metric].kind
        y = self._tables[0][self.tabular.target].dropna()
        if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
            return "classification"
        integral = np.all(np.mod(y.to_numpy(dtype=float), 1) == 0)
        return "classification" if integral and y.nunique() <= _CLASSIFICATION_MAX_LEVELS else "regression"

    @property
    def x_train(self) -> np.ndarray:  # type: ignore[override]
        return self._tables[0].reindex(columns=list(self.columns)).to_numpy(dtype=object)

    @property
    def y_train(self) -> np.ndarray:  # type: ignore[override]
        if self.tabular is None:
            return np.array([], dtype=object)
        y = self._tables[0][self.tabular.target].to_numpy()
        return label_strings(y) if self.kind == "classification" else y.astype(float)

    @property
    def x_test(self) -> np.ndarray:  # type: ignore[override]
        return self._tables[1].reindex(columns=list(self.columns)).to_numpy(dtype=object)

    @property
    def y_test(self):  # type: ignore[override]
        raise AttributeError(
            f"competition {self.id}: its answers stay with its grader (CompetitionTask.answers()), never in a table"
        )

    @property
    def n_test(self) -> int:  # type: ignore[override]
        return self.n_submission_rows

    # ---------------------------------------------------------------- grading and rewards

    @property
    def metric_spec(self) -> Metric:  # type: ignore[override]
        return Metric(self.metric, self.kind, self.higher_is_better, _graded_by_the_competition)

    def answers(self) -> Any:
        """A fresh copy of the private answers (graders may change what they are given)."""
        if self._answers is None:
            if self._answers_loader is None:
                raise RuntimeError(f"competition {self.id} was built without its answers")
            self._answers = self._answers_loader()
        return self._answers.copy(deep=True) if isinstance(self._answers, pd.DataFrame) else _deep_copy(self._answers)

    @property
    def reward_basis(self) -> str:
        if self.leaderboard is not None:
            return f"leaderboard percentile ({len(self.leaderboard)} entries)"
        return "normalised score (no leaderboard.csv)"

    def normalize(self, value: float) -> float:
        """The reward scale of a raw score: the leaderboard percentile in ``[0, 1]``, else the normalised
        score in ``[-1, 1]`` (module docstring)."""
        if self.leaderboard is not None:
            return leaderboard_percentile(value, self.leaderboard, higher_is_better=self.higher_is_better)
        if self.higher_is_better:
            return float(min(1.0, max(-1.0, value)))
        return float(min(1.0, max(-1.0, 1.0 - value / self.sample_score)))

    def score_info(self, value: float) -> dict[str, Any]:
        """What an ok outcome records besides its raw score."""
        return {
            "raw_score": float(value),
            "leaderboard_percentile": self.normalize(value) if self.leaderboard is not None else None,
            "reward_basis": self.reward_basis,
            "sample_submission_score": self.sample_score,
        }

    # ---------------------------------------------------------------- what agents see

    @cached_property
    def fingerprint(self) -> str:  # type: ignore[override]
        """Hash of the public files' names, sizes and modification times: the key of the staged copy."""
        h = hashlib.sha256(f"{self.id}\0{self.metric}".encode())
        for path in sorted(self.entry.public_dir.rglob("*")):
            if path.is_file():
                stat = path.stat()
                h.update(f"\0{path.relative_to(self.entry.public_dir)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
        return h.hexdigest()[:16]

    def write_visible(self, directory: str | os.PathLike) -> Path:
        """``prepared/public/`` into ``directory`` (hard links where readable, sub-folders included), nothing else."""
        out = Path(directory)
        shutil.copytree(self.entry.public_dir, out, copy_function=_link_or_copy, dirs_exist_ok=True)
        for folder in [out, *(p for p in out.rglob("*") if p.is_dir())]:
            os.chmod(folder, 0o755)
        return out

    def description(self) -> str:
        """``description.md``, the public files, what to write and how it is graded and rewarded."""
        files = public_files(self.entry.public_dir)
        listing = "\n".join(f"- {name} ({_size(size)})" for name, size in files[:MAX_LISTED_FILES])
        if len(files) > MAX_LISTED_FILES:
            listing += f"\n- ... and {len(files) - MAX_LISTED_FILES} more files"
        direction = "higher is better" if self.higher_is_better else "lower is better"
        reward = (
            f"the share of the public leaderboard's {len(self.leaderboard)} entries your score beats"
            if self.leaderboard is not None
            else "the normalised score (this competition ships no leaderboard)"
        )
        return (
            f"MLE-bench competition `{self.id}` ({self.entry.name}).\n\n"
            f"{self.entry.description_text()}\n\n"
            f"## Files (directory $DATA_DIR, default /data, read-only)\n{listing}\n\n"
            f"## Output\nWrite your submission to $OUTPUT_DIR/predictions.csv (default /output): a CSV in the shape "
            f"of sample_submission.csv, with its columns ({', '.join(self.submission_columns[:12])}"
            f"{', ...' if len(self.submission_columns) > 12 else ''}) and {self.n_submission_rows} rows, one per "
            f"row of it. The competition's own grader scores it outside the sandbox ({self.metric}, {direction}); "
            f"the reward is {reward}.\n"
            f"{self.budget_text()}"
        )

    def public_metadata(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.entry.name,
            "kind": self.kind,
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "direction_source": self.direction_source,
            "reward_basis": self.reward_basis,
            "submission_columns": list(self.submission_columns),
            "n_test": self.n_test,
            "program_policy": self.program_policy_note,
            "time_limit_s": self.time_limit_s,
            "memory_mb": self.memory_mb,
            "cpus": self.cpus,
            "description": self.description(),
        }

    @property
    def program_policy_note(self) -> str:
        """Whether the program policy applies, and why not."""
        if self.tabular is None:
            return f"skipped: {self.not_tabular}"
        return f"applies (target `{self.tabular.target}`, id `{self.tabular.id}`)"

    def meta_features(self) -> np.ndarray:
        """:func:`~.task.task_features` of the public tables; for a competition that is not one table, the
        features of its budget, metric and submission size only (the data ones are 0)."""
        if self.tabular is not None:  # a target std of a column with gaps is NaN: read as 0
            return np.nan_to_num(task_features(self), nan=0.0)
        values = dict.fromkeys(FEATURE_NAMES, 0.0)
        values.update(
            log10_n_test=float(np.log10(1 + self.n_test)),
            class_balance=1.0,
            higher_is_better=float(self.higher_is_better),
            log10_time_limit_s=float(np.log10(max(self.time_limit_s, 1e-3))),
            log2_memory_gb=float(np.log2(max(self.memory_mb, 1) / 1024.0)),
        )
        if f"metric_{self.metric}" in values:
            values[f"metric_{self.metric}"] = 1.0
        return np.array([values[name] for name in FEATURE_NAMES], dtype=np.float32)


def _deep_copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)

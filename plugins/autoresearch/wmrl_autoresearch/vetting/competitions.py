"""Vetting prepared MLE-bench-format competitions into tasks: the pool's rules, for competitions.

Each registry entry (:func:`~wmrl_autoresearch.tasks.mlebench.list_entries`) is checked in this
order; the first failure rejects it, with its reason:

1. ``config.yaml`` is complete and the data is prepared (``prepared/public``, ``prepared/private``,
   the sample submission and the answers exist);
2. the grader loads (``grader.grade_fn``, else the entry's ``grade.py``), and the answers load;
3. ``leaderboard.csv``, where it ships, has a numeric ``score`` column, and the score's direction is
   known (:func:`~wmrl_autoresearch.tasks.mlebench.score_direction`);
4. the sample submission grades: the competition's grader gives ``sample_submission.csv`` a finite
   score (a competition whose grader refuses its own sample cannot grade anything); without a
   leaderboard and with lower scores better, that score must be positive, since it normalises the rest.

Then content fingerprints across the splits: the SHA-256 of every public data file (``*.md``
excepted; files over :data:`DIGEST_BYTES` by their size, head and tail), and the content profile of
each ``train.csv`` up to :data:`PROFILE_BYTES` (:mod:`.content`: shared rows under any column names
or order, or another sample of the same study). A training competition that shares a data file
or its data with a held-out one is dropped, so the held-out split stays unseen.

With ``tabular_only`` only the competitions the program policy can solve are kept (one table with
a known target and id column, :func:`~wmrl_autoresearch.tasks.mlebench.tabular_layout`); the others
are listed with the reason.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from wmrl_autoresearch.grading.submission import grade_frame
from wmrl_autoresearch.tasks.competition_task import CompetitionTask
from wmrl_autoresearch.tasks.mlebench import (
    CompetitionError,
    list_entries,
    load_answers,
    load_grade_fn,
    read_csv,
    read_entry,
    read_leaderboard,
    score_direction,
    tabular_layout,
)
from wmrl_autoresearch.vetting import content
from wmrl_autoresearch.vetting.build import cross_split_duplicates

__all__ = [
    "DIGEST_BYTES",
    "PROFILE_BYTES",
    "CompetitionSet",
    "CompetitionSource",
    "data_file_digests",
    "load_competitions",
    "vet_competition",
]

log = logging.getLogger(__name__)

DIGEST_BYTES = 64 << 20
"""Files up to this size (bytes) are hashed whole; larger ones by size, first and last MiB."""
PROFILE_BYTES = 64 << 20
"""``train.csv`` files up to this size (bytes) are compared by content (:mod:`.content`)."""


def _ids(value: Any, key: str) -> tuple[str, ...]:
    """Competition ids from a list, or from a split file (one id a line, ``#`` comments), MLE-bench's
    ``experiments/splits/*.txt``."""
    if value is None:
        return ()
    if isinstance(value, (str, Path)):
        path = Path(value)
        if not path.is_file():
            raise ValueError(f"competitions.{key}: {path} is not a split file; give a list of ids or a .txt file")
        lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
        return tuple(line for line in lines if line)
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class CompetitionSource:
    """Where the competitions lie and how they split: the ``competitions`` key of ``environment.kwargs``.

    :param registry: the folder of registry entries (``mlebench/competitions`` in an MLE-bench checkout).
    :param data: the data directory (``mlebench prepare --data-dir``), holding ``<id>/prepared/``.
    :param heldout: ids of the held-out competitions (never trained on), or a split file of them.
    :param include: only these competitions (ids or a split file); empty: every prepared one.
    :param tabular_only: keep only the competitions the program policy can solve.
    :param time_limit_s: CPU-seconds of one run (``environment.kwargs.limits`` overrides it).
    :param memory_mb: memory of one run, MiB.
    :param cpus: CPU cores of one run.
    """

    registry: str
    data: str
    heldout: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    tabular_only: bool = False
    time_limit_s: float = 60.0
    memory_mb: int = 1024
    cpus: float = 1.0

    @classmethod
    def from_config(cls, spec: Mapping[str, Any] | CompetitionSource) -> CompetitionSource:
        """From the config mapping; unknown or missing keys raise ``ValueError`` naming the known ones."""
        if isinstance(spec, CompetitionSource):
            return spec
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(spec) - set(known))
        if unknown:
            hints = [m for k in unknown for m in difflib.get_close_matches(k, known, n=1)]
            hint = f" Did you mean {', '.join(f'`{h}`' for h in hints)}?" if hints else ""
            raise ValueError(f"competitions: unknown key(s) {unknown}; known: {', '.join(known)}.{hint}")
        for key in ("registry", "data"):
            if not spec.get(key):
                raise ValueError(f"competitions.{key} is required: {cls.__doc__.splitlines()[0]}")
        return cls(
            **{
                **dict(spec),
                "registry": str(spec["registry"]),
                "data": str(spec["data"]),
                "heldout": _ids(spec.get("heldout"), "heldout"),
                "include": _ids(spec.get("include"), "include"),
            }
        )


@dataclass
class CompetitionSet:
    """What :func:`load_competitions` decided.

    :param tasks: the competitions kept, as tasks.
    :param rejected: ``(id, reason)`` of each competition that failed vetting (or is not prepared).
    :param cross_split: the content decisions: ``{"task_id", "split", "twin", "twin_split", "rule", "evidence"}``.
    :param skipped: ``(id, reason)`` of each competition ``tabular_only`` left out.
    """

    tasks: list[CompetitionTask] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    cross_split: list[dict[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def report(self) -> list[str]:
        """One line per decision, for the task listing and the log."""
        lines = [f"rejected {cid}: {reason}" for cid, reason in self.rejected]
        lines += [
            f"dropped {d['task_id']} ({d['split']}): same data as {d['twin']} ({d['twin_split']}); {d['evidence']}"
            for d in self.cross_split
        ]
        lines += [f"skipped {cid} (tabular_only, program policy): {reason}" for cid, reason in self.skipped]
        return lines


def vet_competition(
    entry_dir: Path, data_dir: Path, split: str, *, time_limit_s: float = 60.0, memory_mb: int = 1024, cpus: float = 1.0
) -> CompetitionTask:
    """The competition in ``entry_dir`` as a task, after checks 1-4 (module docstring).

    :raises CompetitionError: with the reason of the first check that fails.
    """
    entry = read_entry(entry_dir, data_dir)
    grade_fn = load_grade_fn(entry)
    leaderboard = read_leaderboard(entry.leaderboard_path)
    higher, direction_source = score_direction(entry, leaderboard, sys.modules.get(grade_fn.__module__))
    try:
        sample = read_csv(entry.sample_submission)
    except (OSError, ValueError) as exc:
        raise CompetitionError(f"sample_submission.csv cannot be read: {exc}") from None
    layout, not_tabular = tabular_layout(entry)
    task = CompetitionTask(
        entry,
        split=split,
        grade_fn=grade_fn,
        higher_is_better=higher,
        direction_source=direction_source,
        leaderboard=leaderboard,
        sample_score=float("nan"),
        n_submission_rows=len(sample),
        submission_columns=tuple(str(c) for c in sample.columns),
        tabular=layout,
        not_tabular=not_tabular,
        answers_loader=functools.partial(load_answers, entry.answers),
        time_limit_s=time_limit_s,
        memory_mb=memory_mb,
        cpus=cpus,
    )
    try:
        task.answers()
    except (OSError, ValueError) as exc:
        raise CompetitionError(f"the answers {entry.answers.name} cannot be read: {exc}") from None
    grade = grade_frame(task, sample)
    if grade.score is None:
        raise CompetitionError(f"the sample submission does not grade: {grade.error}")
    if leaderboard is None and not higher and grade.score <= 0:
        raise CompetitionError(
            f"no leaderboard.csv, and the sample submission scores {grade.score:g} (lower is better): "
            "nothing to normalise by; add a leaderboard.csv"
        )
    task.sample_score = grade.score
    return task


def data_file_digests(public_dir: Path) -> dict[str, str]:
    """``{path relative to public_dir: digest}`` of the public data files (``*.md`` excepted)."""
    digests = {}
    for path in sorted(public_dir.rglob("*")):
        if not path.is_file() or path.suffix.lower() == ".md":
            continue
        size = path.stat().st_size
        h = hashlib.sha256()
        with open(path, "rb") as f:
            if size <= DIGEST_BYTES:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            else:
                h.update(f"{size}\0".encode() + f.read(1 << 20))
                f.seek(-(1 << 20), 2)
                h.update(f.read())
        digests[str(path.relative_to(public_dir))] = h.hexdigest()
    return digests


def _shared_file_decisions(tasks: Sequence[CompetitionTask]) -> list[dict[str, str]]:
    """Rule "file": a training competition holding a public data file identical to a held-out one's."""
    digests = {t.id: data_file_digests(t.entry.public_dir) for t in tasks}
    heldout = [t for t in tasks if t.split == "heldout"]
    decisions = []
    for train in (t for t in tasks if t.split == "train"):
        for held in heldout:
            shared = {d: name for name, d in digests[held.id].items()}
            same = [(name, shared[d], d) for name, d in digests[train.id].items() if d in shared]
            if same:
                name, twin_name, digest = same[0]
                decisions.append(
                    {
                        "task_id": train.id,
                        "split": "train",
                        "twin": held.id,
                        "twin_split": "heldout",
                        "rule": "file",
                        "evidence": f"identical {name} and {twin_name} (sha256 {digest[:12]})",
                    }
                )
                break
    return decisions


def _content_decisions(tasks: Sequence[CompetitionTask]) -> list[dict[str, str]]:
    """Rules R and S of :mod:`.content` over the training tables (``train.csv``)."""
    entries = []
    for t in tasks:
        path = t.entry.public_dir / "train.csv"
        if path.is_file() and path.stat().st_size <= PROFILE_BYTES:
            entries.append(
                {"id": t.id, "split": t.split, "builtin": False, "profile": content.profile_table(pd.read_csv(path))}
            )
    return cross_split_duplicates(entries)


def _check_ids(names: Iterable[str], known: set[str], key: str) -> None:
    unknown = sorted(set(names) - known)
    if unknown:
        hints = [m for n in unknown for m in difflib.get_close_matches(n, known, n=1)]
        hint = f" Did you mean {', '.join(hints)}?" if hints else ""
        raise ValueError(f"competitions.{key} names competitions not in the registry: {unknown}.{hint}")


def load_competitions(source: Mapping[str, Any] | CompetitionSource) -> CompetitionSet:
    """Every prepared competition of ``source.registry`` that passes vetting, as tasks, with the decisions.

    :raises ValueError: for a bad ``source`` (unknown keys, a registry that is not a folder, ids in
        ``heldout``/``include`` that are not in the registry).
    """
    source = CompetitionSource.from_config(source)
    entries = {p.name: p for p in list_entries(source.registry)}
    _check_ids(source.heldout, set(entries), "heldout")
    _check_ids(source.include, set(entries), "include")
    result, kept = CompetitionSet(), []
    for name, entry_dir in entries.items():
        if source.include and name not in source.include:
            continue
        split = "heldout" if name in source.heldout else "train"
        try:
            kept.append(
                vet_competition(
                    entry_dir,
                    Path(source.data),
                    split,
                    time_limit_s=source.time_limit_s,
                    memory_mb=source.memory_mb,
                    cpus=source.cpus,
                )
            )
        except CompetitionError as exc:
            result.rejected.append((name, str(exc)))
    result.cross_split = _shared_file_decisions(kept)
    dropped = {d["task_id"] for d in result.cross_split}
    result.cross_split += _content_decisions([t for t in kept if t.id not in dropped])
    dropped |= {d["task_id"] for d in result.cross_split}
    for task in kept:
        if task.id in dropped:
            continue
        if source.tabular_only and task.tabular is None:
            result.skipped.append((task.id, task.not_tabular))
            continue
        result.tasks.append(task)
    for line in result.report():  # a competition left out should never go unnoticed
        log.warning("competitions: %s", line)
    return result

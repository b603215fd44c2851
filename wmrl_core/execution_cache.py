"""An execution cache for benchmarking, the tabular-benchmark way (as NAS-Bench does for
architecture search).

Every real execution is recorded with its outcome and its measured cost, keyed by
``(namespace, task.id, sha256 of the solution)``; a later execution of the same task and
solution, in this run or any other run or seed sharing the file, *replays* the record instead
of executing: same status, score and info, ``info["replayed"] = True``, and the recorded
``info["cost_s"]`` so that :mod:`wmrl_core.ledger` charges a replay what the original
execution cost. (An environment with a declared :class:`~wmrl_core.types.CostModel` is
charged its declared cost either way.) An outcome recorded without ``cost_s`` gets its share
of the measured wall time of the execute call that produced it.

Only the solution's own outcomes are recorded (:data:`~wmrl_core.contracts.REWARDED_STATUSES`): an
infrastructure failure (``sandbox_error``: the engine went away, a simulator worker died) says
nothing about the solution, so it is never replayed; the next call executes that solution again.
Records of such outcomes in an older file are skipped when it is loaded.

Replaying makes a noisy execution deterministic per (task, solution): a benchmark with the
cache measures the algorithm on one recorded draw of each execution, not a fresh one. That is
why it is off by default in training and the benchmark says when it is on.

The trainer (``environment.cache``) namespaces keys by the environment's name and kwargs, so
a file holds apart the records of differently configured environments (the synthetic bandit
of each seed, drawn from its ``truth_seed``) and shares those of identical ones (the
AutoResearch sandbox of every arm and seed).

Storage is one append-only JSONL file, loaded when the wrapper is made and flushed after
each execute call. Concurrent writers (two runs on one file at once) are not supported: their
lines may interleave. Solutions are strings, numbers, booleans, ``None``, numpy arrays and
scalars, and lists, tuples and string-keyed dicts of these; any other kind is refused with
a :class:`~wmrl_core.errors.ContractError` (turn the cache off for such a domain).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_core.contracts import REWARDED_STATUSES
from wmrl_core.errors import ConfigError, ContractError
from wmrl_core.ledger import MEASURED_COST_KEY
from wmrl_core.types import Outcome, Task, as_outcome

__all__ = ["CachedEnvironment", "cache_namespace", "solution_digest", "REPLAYED_KEY"]

REPLAYED_KEY = "replayed"
"""Key of ``Outcome.info`` set to ``True`` on an outcome replayed from the cache."""

MAX_INFO_CHARS = 2000
"""Info values whose JSON exceeds this many characters (logs, stdout) are not recorded."""


def _canonical(value: Any) -> Any:
    """A JSON-able, type-tagged form of ``value``: equal solutions map to equal forms, and
    ``1``, ``1.0``, ``True`` and ``"1"`` to different ones."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return ["bool", bool(value)]
    if isinstance(value, (int, np.integer)):
        return ["int", int(value)]
    if isinstance(value, (float, np.floating)):
        return ["float", float(value).hex()]  # exact, and NaN/inf are representable
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return ["list", [_canonical(v) for v in value.tolist()]]
        data = np.ascontiguousarray(value)
        return ["ndarray", str(data.dtype), list(data.shape), hashlib.sha256(data.tobytes()).hexdigest()]
    if isinstance(value, (list, tuple)):
        return ["list", [_canonical(v) for v in value]]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return ["dict", [[k, _canonical(value[k])] for k in sorted(value)]]
    raise ContractError(
        f"the execution cache cannot key a solution of type {type(value).__name__}: it keys strings, numbers, "
        f"booleans, None, numpy arrays, and lists, tuples and str-keyed dicts of these; "
        f"turn the cache off for this domain (environment.cache=null)"
    )


def cache_namespace(environment_name: str, environment_kwargs: Any) -> str:
    """The trainer's key prefix for an environment: its name and kwargs (what decides its outcomes)."""
    return json.dumps([environment_name, environment_kwargs], sort_keys=True, default=str)


def solution_digest(solution: Any) -> str:
    """sha256 of the canonical serialization of ``solution`` (see :func:`_canonical`)."""
    text = json.dumps(_canonical(solution), separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _recordable_info(info: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``info`` worth recording: JSON values up to :data:`MAX_INFO_CHARS`
    characters each (bulky logs are dropped), without the replay mark."""
    kept = {}
    for key, value in info.items():
        if key == REPLAYED_KEY:
            continue
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            continue
        if len(text) <= MAX_INFO_CHARS:
            kept[key] = value
    return kept


def _has_cost(info: dict[str, Any]) -> bool:
    value = info.get(MEASURED_COST_KEY)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


class CachedEnvironment:
    """``env`` whose ``execute`` replays recorded executions; everything else is delegated.

    :param env: any environment (``tasks``, ``execute``, optionally ``cost``, ``true_reward``,
        ``state_dict`` ...).
    :param path: the JSONL file of records; created if missing, shared across runs and seeds.
    :param namespace: part of every key, e.g. the environment's name and settings, so that one
        file can hold the records of environments whose outcomes differ.

    ``replayed`` and ``executed`` count the outcomes replayed and really executed since the
    wrapper was made.
    """

    def __init__(self, env: Any, path: str | Path, *, namespace: str = ""):
        self.env = env
        self.path = Path(path)
        self.namespace = namespace
        self.replayed = 0
        self.executed = 0
        self._records: dict[tuple[str, str, str], dict[str, Any]] = {}
        if self.path.is_dir():
            raise ConfigError(
                f"environment.cache={self.path} is a directory; name a .jsonl file (it is created if absent)"
            )
        if self.path.exists():
            for number, line in enumerate(self.path.read_text().splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    if row["status"] not in REWARDED_STATUSES:  # written before such outcomes were kept out
                        continue
                    self._records[(row["namespace"], row["task"], row["solution_sha256"])] = row
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise ContractError(
                        f"execution cache {self.path}, line {number}, is not a record ({exc}); "
                        f"delete the file or that line (an interrupted write leaves a partial last line)"
                    ) from None
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def __getattr__(self, name: str) -> Any:  # tasks, cost, true_reward, state_dict, close ...
        if name == "env":  # not yet set (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def __len__(self) -> int:
        return len(self._records)

    def _key(self, task: Task, solution: Any) -> tuple[str, str, str]:
        return (self.namespace, str(task.id), solution_digest(solution))

    def _replay(self, key: tuple[str, str, str]) -> Outcome:
        row = self._records[key]
        return Outcome(
            status=row["status"],
            score=row["score"],
            info={**row["info"], MEASURED_COST_KEY: row["cost_s"], REPLAYED_KEY: True},
        )

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Any]:
        """Outcomes in order: recorded ones replayed, the others executed in one call to ``env``.

        A (task, solution) that appears twice in one call is executed once; the repeat replays it.
        """
        if len(tasks) != len(solutions):
            raise ValueError(
                f"execute got {len(tasks)} tasks and {len(solutions)} solutions; pass one task per solution"
            )
        keys = [self._key(t, s) for t, s in zip(tasks, solutions)]
        misses = list({key: i for i, key in reversed(list(enumerate(keys))) if key not in self._records}.values())
        misses.sort()  # first occurrence of each unrecorded key, in call order
        outcomes: list[Any] = [None] * len(keys)
        if misses:
            start = time.perf_counter()
            executed = self.env.execute([tasks[i] for i in misses], [solutions[i] for i in misses])
            share_s = (time.perf_counter() - start) / len(misses)
            if len(executed) != len(misses):
                raise ContractError(f"environment returned {len(executed)} outcomes for {len(misses)} solutions")
            rows = []
            for i, raw in zip(misses, executed):
                outcome = as_outcome(raw)
                if not _has_cost(outcome.info):  # charge this and every replay what the call measured
                    outcome = Outcome(outcome.status, outcome.score, {**outcome.info, MEASURED_COST_KEY: share_s})
                outcomes[i] = outcome
                if outcome.status not in REWARDED_STATUSES:  # the infrastructure's failure, not the solution's
                    continue
                row = {
                    "namespace": keys[i][0],
                    "task": keys[i][1],
                    "solution_sha256": keys[i][2],
                    "status": str(outcome.status),
                    "score": None if outcome.score is None else float(outcome.score),
                    "cost_s": float(outcome.info[MEASURED_COST_KEY]),
                    "info": _recordable_info(outcome.info),
                }
                self._records[keys[i]] = row
                rows.append(json.dumps(row))
            if rows:
                with self.path.open("a") as f:  # one write per call: a crash loses at most this call
                    f.write("\n".join(rows) + "\n")
                    f.flush()
        for i, key in enumerate(keys):
            if outcomes[i] is None:
                outcomes[i] = self._replay(key)
        self.executed += len(misses)
        self.replayed += len(keys) - len(misses)
        return outcomes

"""AutoResearchEnvironment: the real, expensive environment registered as ``autoresearch``.

``tasks(split)`` lists the tasks of every task set registered for the environment (the
built-in suite, ``$WMRL_AUTORESEARCH_TASK_FILES``, user task plugins) plus ``task_files`` and the
prepared MLE-bench-format ``competitions`` (:mod:`wmrl_autoresearch.vetting.competitions`);
``execute(tasks, solutions)`` runs the scripts in parallel sandboxes and grades them.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from wmrl_autoresearch.grading.outcomes import rejected_outcome, to_outcome
from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.tasks.task import SPLITS, AutoResearchTask, to_wmrl_task

__all__ = ["AutoResearchEnvironment", "ENVIRONMENT_NAME", "collect_tasks"]

log = logging.getLogger(__name__)

ENVIRONMENT_NAME = "autoresearch"

# every field of SandboxLimits may be overridden: derived, so a new limit needs no second list
_LIMIT_FIELDS = tuple(f.name for f in dataclasses.fields(SandboxLimits))


def _as_wmrl_tasks(items: Any, origin: str) -> list:
    from wmrl_core.types import Task

    out = []
    for item in items or []:
        if isinstance(item, AutoResearchTask):
            item = to_wmrl_task(item)
        if not isinstance(item, Task) or not isinstance(item.data, AutoResearchTask):
            raise TypeError(
                f"task set {origin} returned {type(item).__name__}; it must return AutoResearchTask objects or "
                "wmrl_core.types.Task with .data an AutoResearchTask (see wmrl_autoresearch.tasks.task)"
            )
        out.append(item)
    return out


def collect_tasks(
    task_sets: Sequence[str] | None = None,
    task_files: Sequence[str] = (),
    registry=None,
    competitions: Mapping[str, Any] | None = None,
) -> list:
    """All tasks of the registered task sets for ``autoresearch`` (or just ``task_sets``) plus ``task_files``
    and the vetted ``competitions``; with ``competitions`` and no ``task_sets``, no registered task set.

    :raises ValueError: when two task sets define the same task id.
    """
    from wmrl_autoresearch.tasks.task_files import tasks_from_files

    if competitions is not None and task_sets is None:
        task_sets = []  # a folder of competitions on its own, unless task sets are named as well

    if registry is None:
        from wmrl_core.plugins import build_registry

        registry = build_registry()
    specs = registry.tasks.for_environment(ENVIRONMENT_NAME)
    if task_sets is not None:
        known = {s.name for s in specs}
        unknown = [n for n in task_sets if n not in known]
        if unknown:
            raise ValueError(f"unknown autoresearch task sets {unknown}; registered: {sorted(known)}")
        specs = [s for s in specs if s.name in task_sets]
    tasks, origin = [], {}
    for spec in specs:
        for t in _as_wmrl_tasks(spec.make(), f"`{spec.name}` (plugin {spec.plugin})"):
            tasks.append((t, f"task set `{spec.name}`"))
    for t in tasks_from_files(list(task_files)) if task_files else []:
        tasks.append((t, "task_files"))
    if competitions is not None:
        from wmrl_autoresearch.vetting.competitions import load_competitions

        tasks += [(to_wmrl_task(t), "competitions") for t in load_competitions(competitions).tasks]
    result = []
    for t, where in tasks:
        if t.id in origin:
            raise ValueError(f"task id `{t.id}` is defined twice ({origin[t.id]} and {where}); rename one")
        origin[t.id] = where
        result.append(t)
    return result


def _restrict_training(tasks: list, names: Sequence[str]) -> list:
    """``tasks`` with the training split cut to the families ``names`` select (held-out tasks kept)."""
    from wmrl_autoresearch.tasks.families import families_of, resolve_families

    family = families_of(tasks)
    training = {family[t.id] for t in tasks if t.data.split == "train"}
    heldout = {family[t.id] for t in tasks if t.data.split != "train"}
    keep = resolve_families(names, training, "environment.kwargs.train_families", heldout)
    return [t for t in tasks if t.data.split != "train" or family[t.id] in keep]


class AutoResearchEnvironment:
    """Machine-learning tasks solved by Python scripts run in sandboxes.

    :param sandbox: a registered sandbox backend (:mod:`wmrl_autoresearch.sandbox.registry`): ``"docker"``
        (hardened containers), ``"local-unsafe"`` (NOT isolated, warns; never chosen automatically), or one
        a plugin registers through ``wmrl_register_sandboxes``.
    :param max_parallel: sandboxes running at once (default: CPU cores / cpus per task).
    :param warm: containers started ahead of need (0: cold start per run); each has imported numpy, pandas
        and scikit-learn in advance (:mod:`wmrl_autoresearch.sandbox.runner`).
    :param image: sandbox image (default: the backend's; docker: ``wmrl-autoresearch-sandbox:latest``).
    :param gpus: ``"auto"``, ``"none"`` or a list of NVIDIA device ids shared out exclusively.
    :param task_sets: names of registered task sets to use (default: all for ``autoresearch``).
    :param task_files: extra YAML/JSON/CSV task descriptions (see :mod:`wmrl_autoresearch.tasks.task_files`).
    :param limits: overrides applied to every task's limits, e.g. ``{"timeout_s": 10, "memory_mb": 512}``
        (``timeout_s`` in CPU seconds; see :class:`~wmrl_autoresearch.sandbox.limits.SandboxLimits`);
        without an override each task's own ``time_limit_s``, ``memory_mb`` and ``cpus`` apply.
    :param cost: optional declared ``CostModel``; without one the engine charges each run's measured CPU
        seconds (``Outcome.info["cost_s"]``).
    :param engine_wait_s: how long a step waits for an engine that stopped answering before the run
        stops (Docker: :class:`~wmrl_autoresearch.sandbox.engine_outage.EngineLostError`), seconds.
    :param train_families: keep only these families in the training split (default: all): family names
        or the set names ``"W"`` / ``"R"`` of :mod:`wmrl_autoresearch.tasks.families` (``[R]``: the
        families the world model never saw). The held-out split is not affected.
    :param competitions: prepared MLE-bench-format competitions, ``{registry: DIR, data: DIR, heldout: [ids],
        ...}`` (:class:`~wmrl_autoresearch.vetting.competitions.CompetitionSource`), graded by their own
        graders outside the sandbox and rewarded by leaderboard percentile; without ``task_sets``, the only tasks.
    """

    def __init__(
        self,
        sandbox: str = "docker",
        max_parallel: int | None = None,
        warm: int = 0,
        image: str | None = None,
        gpus: str | Sequence[str] = "auto",
        task_sets: Sequence[str] | None = None,
        task_files: Sequence[str] = (),
        limits: dict[str, Any] | None = None,
        cost: Any = None,
        workdir: str | None = None,
        engine_wait_s: float = 300.0,
        train_families: Sequence[str] | None = None,
        competitions: Mapping[str, Any] | None = None,
    ):
        from wmrl_autoresearch.sandbox.registry import sandbox_table
        from wmrl_core.plugins import build_registry, get_plugin_manager

        pm = get_plugin_manager()
        self._sandboxes = sandbox_table(pm)
        self._sandboxes.get(sandbox)  # an unknown name fails here, with the known ones, before any task loads
        unknown = set(limits or {}) - set(_LIMIT_FIELDS)
        if unknown:
            raise ValueError(f"unknown limit(s) {sorted(unknown)}; known: {', '.join(_LIMIT_FIELDS)}")
        self.sandbox = sandbox
        self.max_parallel = max_parallel
        self.warm = int(warm)
        self.image = image
        self.gpus = gpus
        self.limit_overrides = dict(limits or {})
        self.cost = cost
        self.workdir = workdir
        self.engine_wait_s = float(engine_wait_s)
        self._tasks = collect_tasks(task_sets, task_files, registry=build_registry(pm), competitions=competitions)
        if train_families is not None:
            self._tasks = _restrict_training(self._tasks, train_families)
        self._pool = None

    # ---------------------------------------------------------------- tasks

    def tasks(self, split: str = "train") -> list:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; autoresearch has {SPLITS}")
        return [t for t in self._tasks if t.data.split == split]

    def task(self, task_id: str):
        for t in self._tasks:
            if t.id == task_id:
                return t
        raise KeyError(f"no autoresearch task `{task_id}`; `wmrl-autoresearch tasks` lists them")

    def limits_for(self, task: AutoResearchTask) -> SandboxLimits:
        """The task's own budget, with the environment's overrides applied."""
        base = {"timeout_s": task.time_limit_s, "memory_mb": task.memory_mb, "cpus": task.cpus}
        return SandboxLimits().with_overrides(**{**base, **self.limit_overrides})

    # ---------------------------------------------------------------- execution

    @property
    def pool(self):
        """The sandbox pool, created on first use (listing tasks needs no Docker)."""
        if self._pool is None:
            from wmrl_autoresearch.sandbox.pool import SandboxPool

            first = self._tasks[0].data if self._tasks else None
            default_limits = self.limits_for(first) if first is not None else SandboxLimits()
            self._pool = SandboxPool(
                self.sandbox,
                limits=default_limits,
                max_parallel=self.max_parallel,
                warm=self.warm,
                image=self.image,
                gpus=self.gpus,
                workdir=self.workdir,
                engine_wait_s=self.engine_wait_s,
                sandboxes=self._sandboxes,
            )
        return self._pool

    def timeout_s(self, n_solutions: int) -> float:
        """Seconds one ``execute`` of ``n_solutions`` may take before the engine calls it hung: every
        wave of ``max_parallel`` runs at three times the longest task limit plus start-up, and the
        wait for an engine that stopped answering. The sandboxes enforce the per-run limits;
        this only catches a call that never returns."""
        longest = max((self.limits_for(t.data).timeout_s for t in self._tasks), default=SandboxLimits().timeout_s)
        parallel = self.max_parallel or max(1, (os.cpu_count() or 1))
        waves = math.ceil(max(1, n_solutions) / parallel)
        return self.engine_wait_s + waves * (3.0 * longest + 30.0)

    def execute(self, tasks: Sequence, solutions: Sequence) -> list:
        """Run every solution for its task (in parallel) and grade it; one Outcome each, in order.

        Bad solutions never raise: they come back as failed outcomes.
        """
        from wmrl_autoresearch.sandbox.pool import RunRequest

        if len(tasks) != len(solutions):
            raise ValueError(f"{len(tasks)} tasks but {len(solutions)} solutions; pass one task per solution")
        ar_tasks = [getattr(t, "data", t) for t in tasks]
        for t in ar_tasks:
            if not isinstance(t, AutoResearchTask):
                raise TypeError(f"autoresearch cannot run a task of type {type(t).__name__}")
        outcomes: list = [None] * len(tasks)
        requests, index = [], []
        for i, (task, solution) in enumerate(zip(ar_tasks, solutions)):
            if not isinstance(solution, str):
                outcomes[i] = rejected_outcome(
                    task, f"solution is a {type(solution).__name__}, not a Python script (str)"
                )
                continue
            requests.append(RunRequest(task, solution, self.limits_for(task)))
            index.append(i)
        for i, execution in zip(index, self.pool.run_many(requests) if requests else []):
            outcomes[i] = to_outcome(ar_tasks[i], execution)
        return outcomes

    def close(self) -> None:
        """Stop warm containers and remove every sandbox."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

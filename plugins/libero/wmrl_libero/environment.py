"""LIBERO as a WMRL environment component (the real, expensive execution).

A WMRL *task* is one LIBERO task started from one stored init state: ``Task.id`` is
``"<suite>/<task_index>/<init_state>"``, ``Task.description`` the language instruction,
``Task.data`` a dict with ``suite``, ``task_index``, ``init_state``. Split ``train`` uses
init states 0-39 of every task, ``heldout`` 40-49, ``eval`` all 50 (LIBERO's protocol).

A *solution* is what an embodied policy emits for a task, one of:

- an action sequence, float array ``(T, 7)`` (or ``(T/k, k, 7)`` chunks), executed open
  loop from the init state; after its end the arm holds still until the episode limit;
- a closed-loop controller, any object with ``act(obs, info) -> (k, 7) array``
  (:mod:`wmrl_libero.controllers`), run in the parent process against worker physics.

``execute`` returns ``Outcome(status="ok", score=1.0 | 0.0)`` from LIBERO's goal predicates,
with the executed trajectory subsampled in ``info["trajectory"]`` = ``{"proprio": (n, 16),
"object_state": (n, O)}`` (``n = trajectory_states`` evenly spaced states, the first after the
reset and the last after the final action; read by world models with
``predict_from_outcomes``, e.g. ``libero-progress``);
``status="sandbox_error"`` with ``score=None`` when the simulator worker crashed (an
infrastructure failure, not a zero); ``status="invalid_solution"`` with ``score=0.0`` for a
solution of the wrong shape or with non-finite numbers (the policy's fault).

What an execution costs is measured: every simulated outcome carries ``info["cost_s"]``
(:data:`wmrl_core.ledger.MEASURED_COST_KEY`), the CPU seconds the simulator process spent on
that episode (reset, steps, and the environment build when the episode needed one; the
worker's ``time.process_time``), and with no declared cost (``seconds_per_step=None``, the
default) the engine's ledger charges their sum, as it does for AutoResearch's sandboxes. CPU
seconds, unlike wall time, do not grow when other processes share the machine.

The simulators persist (``persistent=True``, the default): the worker processes and the
environments they built live from the first ``execute`` to :meth:`LiberoEnvironment.close`,
and every episode starts with a reset to its stored init state; a worker builds a task's
environment once (or again after a crash, or when it holds more than ``envs_per_worker``
tasks). Crash recovery is that of :class:`~wmrl_libero.vector_env.LiberoVectorEnv`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from wmrl_core.ledger import MEASURED_COST_KEY
from wmrl_core.types import CostModel, Outcome, Task
from wmrl_libero.controllers import ControllerFactory, OpenLoopController
from wmrl_libero.episode_runner import EpisodeJob, job_env_kwargs, make_simulator_pool, run_episodes
from wmrl_libero.suites import MAX_EPISODE_STEPS, suite_tasks

__all__ = ["LiberoEnvironment", "SPLITS", "subsampled_trajectory"]

SPLITS = {"train": range(0, 40), "heldout": range(40, 50), "eval": range(0, 50)}


def subsampled_trajectory(states: dict[str, list[np.ndarray]], n: int) -> dict[str, np.ndarray]:
    """``n`` evenly spaced states of an episode (first and last included; all when shorter), as
    arrays ``{"proprio": (n, 16), "object_state": (n, O)}``."""
    length = len(states["proprio"])
    idx = np.unique(np.round(np.linspace(0, length - 1, min(n, length))).astype(int))
    return {key: np.stack([states[key][i] for i in idx]) for key in ("proprio", "object_state")}


class LiberoEnvironment:
    """LIBERO tasks for WMRL.

    :param suite: LIBERO suite (``libero_10`` is LIBERO-Long).
    :param task_indices: restrict to these tasks of the suite (default all).
    :param num_workers: simulator worker processes (0: in this process, no crash recovery).
    :param image_size: camera side in pixels given to closed-loop controllers; ``None``:
        physics only.
    :param max_episode_steps: control-step limit (default the suite's, 520 for LIBERO-10).
    :param seconds_per_step: a declared cost of one control step in seconds, charged instead
        of the measured CPU seconds; ``None`` (default): the measured ones (``Outcome.info["cost_s"]``).
    :param persistent: keep the simulator workers and their environments across
        ``execute`` calls (else build them for every call and close them after it).
    :param envs_per_worker: built environments (tasks) each worker keeps.
    :param trajectory_states: physics states of each executed episode kept in
        ``Outcome.info["trajectory"]``, evenly spaced, first and final included; 0 keeps none.
    :param fast_physics: one MuJoCo forward pass per physics substep
        (:mod:`wmrl_libero.fast_physics`; bit-identical states); ``False``: robosuite's own step.
    :param on_episode: optional ``on_episode(result)`` called after each simulated episode
        (an :class:`~wmrl_libero.episode_runner.EpisodeResult`): progress of long calls.
    """

    def __init__(
        self,
        suite: str = "libero_10",
        *,
        task_indices: Sequence[int] | None = None,
        num_workers: int = 0,
        image_size: int | None = None,
        max_episode_steps: int | None = None,
        seconds_per_step: float | None = None,
        persistent: bool = True,
        envs_per_worker: int = 4,
        trajectory_states: int = 16,
        on_episode: Callable[[Any], None] | None = None,
        fast_physics: bool = True,
    ):
        self.suite = suite
        self._infos = suite_tasks(suite)
        self.task_indices = list(range(len(self._infos))) if task_indices is None else list(task_indices)
        self.num_workers = num_workers
        self.image_size = image_size
        self.max_episode_steps = max_episode_steps or MAX_EPISODE_STEPS.get(suite, 600)
        self.persistent = persistent
        self.envs_per_worker = envs_per_worker
        if trajectory_states < 0:
            raise ValueError(f"trajectory_states must be >= 0 (0 records none), got {trajectory_states}")
        self.trajectory_states = trajectory_states
        if seconds_per_step is not None and not seconds_per_step > 0:
            raise ValueError(
                f"seconds_per_step must be > 0 seconds, or None to charge measured CPU seconds; got {seconds_per_step}"
            )
        # declared: a persistent pool builds its simulators once, not per call
        self.cost = (
            None
            if seconds_per_step is None
            else CostModel(per_call_s=0.0 if persistent else 5.0, per_item_s=seconds_per_step * self.max_episode_steps)
        )
        self.on_episode = on_episode
        self.fast_physics = fast_physics
        self._probe_env = None
        self._pool = None

    def timeout_s(self, n_solutions: int) -> float:
        """Seconds one ``execute`` of ``n_solutions`` episodes may take before the engine calls it
        hung: with worker processes, a generous 50 ms per control step of every episode spread over
        the workers, plus their start-up; in this process (``num_workers=0``) no deadline, because
        the simulator and its renderer belong to the calling thread (a deadline would move the
        call onto another one)."""
        if self.num_workers == 0:
            return math.inf
        per_episode = 0.05 * self.max_episode_steps
        return 300.0 + math.ceil(max(1, n_solutions) / self.num_workers) * per_episode

    def tasks(self, split: str) -> list[Task]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; LIBERO splits are {', '.join(SPLITS)}")
        out = []
        for t in self.task_indices:
            info = self._infos[t]
            for s in SPLITS[split]:
                if s < info.n_init_states:
                    out.append(
                        Task(
                            id=f"{self.suite}/{t}/{s}",
                            description=info.language,
                            data={"suite": self.suite, "task_index": t, "init_state": s},
                        )
                    )
        return out

    def _controller(self, solution: Any):
        if hasattr(solution, "act"):
            if callable(getattr(solution, "clear_record", None)):
                # a controller that records its episode (the small VLA's, with its rollout's mask) may
                # hold an imagined one (libero-imagination's predict): the real execution's record replaces it
                solution.clear_record()
            return solution
        actions = np.asarray(solution, dtype=np.float64)
        if actions.size == 0 or actions.shape[-1] != 7 or not np.all(np.isfinite(actions)):
            raise ValueError(f"expected a finite (T, 7) action array, got shape {actions.shape}")
        return OpenLoopController(actions.reshape(-1, 7))

    def execute(
        self, tasks: Sequence[Task], solutions: Sequence[Any], *, max_steps: int | None = None
    ) -> list[Outcome]:
        """Run every solution from its task's init state; one outcome each, never raises
        for a bad solution. ``max_steps``: cut every episode after that many control steps
        (a partial simulation, scored 0 unless it succeeded sooner; ``info["cut"]`` says so)."""
        if len(tasks) != len(solutions):
            raise ValueError(f"{len(tasks)} tasks but {len(solutions)} solutions")
        outcomes: list[Outcome | None] = [None] * len(tasks)
        jobs, controllers, where = [], [], []
        for i, (task, solution) in enumerate(zip(tasks, solutions)):
            try:
                controller = self._controller(solution)
            except (ValueError, TypeError) as exc:
                outcomes[i] = Outcome(status="invalid_solution", score=0.0, info={"error": str(exc)})
                continue
            d = task.data
            jobs.append(
                EpisodeJob(
                    d["suite"],
                    d["task_index"],
                    d["init_state"],
                    seed=i,
                    max_episode_steps=self.max_episode_steps,
                    record_states=self.trajectory_states > 0,
                    stop_after=max_steps,
                )
            )
            controllers.append(controller)
            where.append(i)
        factory = ControllerFactory(make=None, name="wmrl-solutions", image_size=self.image_size, privileged=False)
        if self.persistent and self._pool is None and jobs:
            first = sorted(jobs, key=lambda j: j.task_index)
            n = max(1, self.num_workers)
            self._pool = make_simulator_pool(
                [job_env_kwargs(first[k * len(first) // n], factory, fast_physics=self.fast_physics) for k in range(n)],
                self.num_workers,
                envs_per_worker=self.envs_per_worker,
            )
        results = run_episodes(
            jobs,
            factory,
            num_workers=self.num_workers,
            controllers=controllers,
            pool=self._pool,
            progress=self.on_episode,
            fast_physics=self.fast_physics,
        )
        for i, result in zip(where, results):
            info = {
                "steps": result.steps,
                "seconds": result.seconds,
                "init_state": result.job.init_state,
                MEASURED_COST_KEY: result.cpu_s,
            }
            if max_steps is not None:
                info["cut"] = bool(result.status == "ok" and not result.success and result.steps >= max_steps)
            if result.status != "ok":
                outcomes[i] = Outcome(status="sandbox_error", score=None, info=dict(info, error=result.error))
            else:
                if result.states:
                    info["trajectory"] = subsampled_trajectory(result.states, self.trajectory_states)
                outcomes[i] = Outcome(status="ok", score=1.0 if result.success else 0.0, info=info)
        return outcomes  # type: ignore[return-value]

    def initial_observation(self, task: Task, image_size: int | None = None) -> dict[str, np.ndarray]:
        """The observation at the start of ``task`` (after settling), for open-loop policies."""
        from wmrl_libero.gym_env import LiberoGymEnv

        d = task.data
        key = (d["suite"], d["task_index"], image_size)
        if self._probe_env is None or self._probe_env[0] != key:
            self._close_probe()
            self._probe_env = (key, LiberoGymEnv(d["suite"], d["task_index"], image_size=image_size))
        obs, _ = self._probe_env[1].reset(seed=0, options={"init_state": d["init_state"]})
        return obs

    @property
    def simulator_builds(self) -> int:
        """Environments the persistent workers have built so far (0 before the first call)."""
        return sum(self._pool.builds) if self._pool is not None else 0

    def _close_probe(self) -> None:
        if self._probe_env is not None:
            self._probe_env[1].close()
            self._probe_env = None

    def close(self) -> None:
        """Stop the simulator workers and close every environment."""
        self._close_probe()
        if self._pool is not None:
            self._pool.close()
            self._pool = None

"""Run many LIBERO episodes with closed-loop controllers, in-process or in worker processes.

Simulator slots keep the environments they have built (:mod:`wmrl_libero.env_cache`), and a
free slot picks the next job whose environment it already holds (:func:`pick_job`), so a
pool that persists across calls (``pool=``) builds each task once per slot, not per call.
Each environment slot runs one episode at a time; the controllers of all slots act in the
parent process (where a policy's weights live), the physics runs in the workers.

Slots do not wait for each other (``schedule="async"``, the default): as soon as one slot's
step is done, its controller acts and the slot steps again, while the others are still
stepping. Each episode's actions depend only on its own controller and observations, so its
outcome is the same under either schedule; a controller that draws from random state
*shared* with other episodes' controllers would see the draws in a different order
(the controllers here each own their generator). ``schedule="lockstep"`` steps all slots
together and waits for the slowest (the reference for the speed benchmark).

A controller's action chunk goes to its slot in one round trip (``chunks=True``, the default,
with the asynchronous schedule): the slot steps through it (:func:`~wmrl_libero.vector_env.step_through`,
stopping where the episode ends or is cut) and returns every step's result, which the runner
takes in order as if they had come one by one. The controller acts on the same observations
at the same steps either way, since it is asked for a new chunk only when the last one is
spent; what changes is one pickle, pipe transfer and wake-up per chunk instead of per step.

Each result carries ``cpu_s``, the simulator's CPU seconds for that episode
(``time.process_time`` of the worker process: its reset, its steps, and any environment
build it needed), which ``LiberoEnvironment`` charges instead of a declared cost.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_libero.controllers import Controller, ControllerFactory
from wmrl_libero.env_cache import EnvCache, env_key
from wmrl_libero.gym_env import LiberoGymEnv
from wmrl_libero.suites import TaskInfo, task_info

__all__ = [
    "EpisodeJob",
    "EpisodeResult",
    "InProcessEnvs",
    "make_simulator_pool",
    "job_env_kwargs",
    "pick_job",
    "run_episodes",
]


@dataclass(frozen=True)
class EpisodeJob:
    """One episode: task, stored init state, seed; ``video`` records agentview frames."""

    suite: str
    task_index: int
    init_state: int
    seed: int = 0
    video: bool = False
    max_episode_steps: int | None = None
    record_sim_state: bool = False  # put the MuJoCo state in info["sim_state"] before each action
    record_states: bool = False  # keep every observed physics state (proprio, object_state) in the result
    stop_after: int | None = None  # cut the episode after this many control steps (a partial simulation)


@dataclass
class EpisodeResult:
    """What one episode yielded.

    ``status`` is ``"ok"`` (a real success or failure) or ``"infrastructure_failure"`` (the
    worker crashed; the episode says nothing about the policy). ``steps`` counts control
    steps (20 Hz); ``seconds`` is wall time. ``states`` (jobs with ``record_states``):
    ``{"proprio": [...], "object_state": [...]}``, the state after the reset and after every
    action, the final one included. ``cpu_s``: CPU seconds the simulator spent on this episode
    (the slot's own process time, not wall time: independent of the machine's load).
    """

    job: EpisodeJob
    success: bool
    steps: int
    status: str = "ok"
    error: str = ""
    seconds: float = 0.0
    frames: list[np.ndarray] = field(default_factory=list, repr=False)
    states: dict[str, list[np.ndarray]] | None = field(default=None, repr=False)
    cpu_s: float = 0.0


class InProcessEnvs:
    """The slot interface of :class:`~wmrl_libero.vector_env.LiberoVectorEnv` on in-process
    environments, one slot each (no crash recovery; for tests and small runs). Each slot keeps
    the environments it has built, like a persistent worker."""

    def __init__(self, env_kwargs: list[dict[str, Any]], *, envs_per_worker: int = 4, build=None):
        self._caches = [EnvCache(build or LiberoGymEnv, capacity=envs_per_worker) for _ in env_kwargs]
        self._kwargs = [dict(kw) for kw in env_kwargs]
        self._cpu_s = [0.0] * len(env_kwargs)
        self._envs = [self._timed(i, cache.use, kw)[0] for i, (cache, kw) in enumerate(zip(self._caches, self._kwargs))]
        self.num_envs = len(self._envs)
        self._stepped: dict[int, tuple] = {}

    def _timed(self, i: int, fn, *args, **kwargs):
        # thread time: the simulator runs on this thread; other threads (a policy's) are not charged
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            self._cpu_s[i] += time.thread_time() - start

    def take_cpu_s(self, i: int) -> float:
        cpu_s, self._cpu_s[i] = self._cpu_s[i], 0.0
        return cpu_s

    @property
    def builds(self) -> list[int]:
        return [cache.builds for cache in self._caches]

    def env_kwargs_at(self, i: int) -> dict[str, Any]:
        return dict(self._kwargs[i])

    def use_at(self, i: int, env_kwargs: dict[str, Any]) -> bool:
        self._kwargs[i] = dict(env_kwargs)
        self._envs[i], built = self._timed(i, self._caches[i].use, env_kwargs)
        return built

    def holds_at(self, i: int, env_kwargs: dict[str, Any]) -> bool:
        return env_key(env_kwargs) in self._caches[i].keys()

    def call_at(self, i: int, name: str, *args, **kwargs) -> Any:
        return self._timed(i, getattr(self._envs[i], name), *args, **kwargs)

    def reset_at(self, i: int, *, seed=None, options=None):
        return self._timed(i, self._envs[i].reset, seed=seed, options=options)

    def step(self, actions):
        out = [
            self._timed(i, self._envs[i].step, a) if a is not None else (None, 0.0, False, False, {})
            for i, a in enumerate(actions)
        ]
        obs, rew, term, trunc, infos = zip(*out)
        return list(obs), np.array(rew), np.array(term), np.array(trunc), list(infos)

    def step_async_at(self, i: int, action) -> None:
        self._stepped[i] = self._timed(i, self._envs[i].step, action)  # in-process: done at once

    def wait_steps(self) -> list[tuple[int, tuple]]:
        done, self._stepped = sorted(self._stepped.items()), {}
        return done

    def step_chunk_async_at(self, i: int, actions) -> None:
        from wmrl_libero.vector_env import step_through

        self._stepped[i] = self._timed(i, step_through, self._envs[i], actions)

    def wait_chunks(self) -> list[tuple[int, list[tuple]]]:
        return self.wait_steps()

    def close(self) -> None:
        for cache in self._caches:
            cache.close()


def make_simulator_pool(first_env_kwargs: list[dict[str, Any]], num_workers: int, *, envs_per_worker: int = 4):
    """Simulator slots starting with the given environments: worker processes
    (:class:`~wmrl_libero.vector_env.LiberoVectorEnv`), or in-process environments when
    ``num_workers`` is 0 (then one slot)."""
    if num_workers == 0:
        return InProcessEnvs(first_env_kwargs[:1], envs_per_worker=envs_per_worker)
    from wmrl_libero.vector_env import LiberoVectorEnv

    return LiberoVectorEnv(first_env_kwargs[:num_workers], envs_per_worker=envs_per_worker)


def job_env_kwargs(
    job: EpisodeJob, factory: ControllerFactory, video_size: int = 128, *, fast_physics: bool = True
) -> dict[str, Any]:
    """Keyword arguments of the ``LiberoGymEnv`` that runs ``job`` for ``factory``'s controllers
    (``fast_physics``: :mod:`wmrl_libero.fast_physics`'s step, else robosuite's own)."""
    image_size = factory.image_size
    if job.video and image_size is None:
        image_size = video_size
    return dict(
        suite=job.suite,
        task_index=job.task_index,
        image_size=image_size,
        privileged_info=factory.privileged,
        max_episode_steps=job.max_episode_steps,
        fast_physics=fast_physics,
    )


def pick_job(pending: list[Hashable], active: Hashable, held: set, active_elsewhere: set) -> int:
    """Which pending job a free simulator slot runs next (index into ``pending``, the jobs'
    environment keys in the preferred order): one for the slot's active environment, else
    one for an environment the slot holds (no build), else one no other slot is working on
    (a build that spreads the tasks), else the first (a build that shares a busy task)."""
    for accept in (lambda k: k == active, lambda k: k in held, lambda k: k not in active_elsewhere):
        for n, key in enumerate(pending):
            if accept(key):
                return n
    return 0


@dataclass
class _Running:
    job: EpisodeJob
    controller: Controller
    obs: dict
    info: dict
    started: float
    queue: deque = field(default_factory=deque)
    frames: list = field(default_factory=list)
    states: dict | None = None

    def record_state(self, obs: dict | None) -> None:
        if self.states is not None and obs is not None:
            self.states["proprio"].append(np.asarray(obs["proprio"], dtype=np.float32))
            self.states["object_state"].append(np.asarray(obs["object_state"], dtype=np.float32))


class _Slots:
    """The episodes of one :func:`run_episodes` call on its simulator slots: which job a free
    slot starts, what each step's result does to the slot's episode, and the results so far
    (by job index)."""

    def __init__(self, jobs, factory, pool, kwargs_of, order, controllers, progress):
        self.jobs, self.factory, self.pool, self.kwargs_of = jobs, factory, pool, kwargs_of
        self.controllers, self.progress = controllers, progress
        self.pending = list(order)
        self.results: dict[int, EpisodeResult] = {}
        self.running: dict[int, tuple[int, _Running]] = {}
        self.tasks: dict[tuple[str, int], TaskInfo] = {}

    def observe(self, slot: int, job: EpisodeJob, info: dict) -> dict:
        """``info``, with the slot's MuJoCo state for a job that records it."""
        if job.record_sim_state:
            info = dict(info, sim_state=self.pool.call_at(slot, "sim_state"))
        return info

    def start(self, slot: int) -> None:
        """Start the next pending job (:func:`pick_job`) on ``slot``, if any is left."""
        pending, pool, kwargs_of = self.pending, self.pool, self.kwargs_of
        if not pending:
            return
        keys = [env_key(kwargs_of[j]) for j in pending]
        held = {env_key(kwargs_of[j]) for j in pending if pool.holds_at(slot, kwargs_of[j])}
        elsewhere = {env_key(pool.env_kwargs_at(s)) for s in self.running if s != slot}
        j = pending.pop(pick_job(keys, env_key(pool.env_kwargs_at(slot)), held, elsewhere))
        job = self.jobs[j]
        if pool.env_kwargs_at(slot) != kwargs_of[j]:
            pool.use_at(slot, kwargs_of[j])
        obs, info = pool.reset_at(slot, seed=job.seed, options={"init_state": job.init_state})
        if self.controllers is not None:
            controller = self.controllers[j]
        else:
            key = (job.suite, job.task_index)
            if key not in self.tasks:
                self.tasks[key] = task_info(*key)
            controller = self.factory.make(self.tasks[key], job.init_state)
        run = _Running(job, controller, obs, self.observe(slot, job, info), time.perf_counter())
        if job.record_states:
            run.states = {"proprio": [], "object_state": []}
            run.record_state(obs)
        if job.video and "agentview_image" in obs:
            run.frames.append(obs["agentview_image"])
        self.running[slot] = (j, run)

    def finish(self, slot: int, success: bool, steps: int, status: str = "ok", error: str = "") -> None:
        """Record the result of ``slot``'s episode and start the slot's next job."""
        j, run = self.running.pop(slot)
        self.results[j] = EpisodeResult(
            run.job,
            success,
            steps,
            status,
            error,
            time.perf_counter() - run.started,
            run.frames,
            run.states,
            cpu_s=self.pool.take_cpu_s(slot),
        )
        if self.progress is not None:
            self.progress(self.results[j])
        self.start(slot)

    def next_action(self, slot: int) -> np.ndarray:
        """The next action of ``slot``'s controller: a new chunk is asked for when the last one is spent."""
        run = self.running[slot][1]
        if not run.queue:
            chunk = np.asarray(run.controller.act(run.obs, run.info), dtype=np.float32).reshape(-1, 7)
            run.queue.extend(chunk)
        return run.queue.popleft()

    def next_chunk(self, slot: int) -> np.ndarray:
        """The rest of ``slot``'s current action chunk (a new one when it is spent), up to the
        job's ``stop_after`` cut: the actions :func:`next_action` would give one by one before
        the controller is asked again."""
        run = self.running[slot][1]
        chunk = [self.next_action(slot)]
        more = len(run.queue)
        if run.job.stop_after is not None:
            more = min(more, run.job.stop_after - int(run.info.get("elapsed_steps", 0)) - 1)
        chunk += [run.queue.popleft() for _ in range(max(0, more))]
        return np.stack(chunk)

    def stepped(self, slot: int, obs, terminated: bool, truncated: bool, info: dict, last: bool = True) -> None:
        """Take one step's result for ``slot``; its episode finishes (and the slot starts the
        next job) when it ended. ``last``: no further step of the same round trip follows (the
        MuJoCo state a recording job puts in ``info`` is read after the last one only: the
        controller sees no other)."""
        run = self.running[slot][1]
        run.obs, run.info = obs, info
        run.record_state(obs)
        if run.job.video and obs is not None and "agentview_image" in obs:
            run.frames.append(obs["agentview_image"])
        steps = int(info.get("elapsed_steps", 0))
        if info.get("infrastructure_failure"):
            self.finish(slot, False, steps, "infrastructure_failure", info.get("error", ""))
        elif terminated or truncated:
            self.finish(slot, bool(terminated), steps)
        elif run.job.stop_after is not None and steps >= run.job.stop_after:
            # cut here, the simulator's own limit untouched (a new limit would rebuild the simulator)
            self.finish(slot, False, steps)
        elif run.job.record_sim_state and last:
            run.info = self.observe(slot, run.job, run.info)

    def stepped_chunk(self, slot: int, results: list[tuple]) -> None:
        """Take every step's result of one chunk for ``slot``, in order (:meth:`stepped`); the
        chunk ends with the step that ends the episode (:func:`~wmrl_libero.vector_env.step_through`)."""
        job = self.running[slot][0]
        for n, (obs, _, terminated, truncated, info) in enumerate(results):
            if self.running.get(slot, (None,))[0] != job:
                raise RuntimeError(f"slot {slot} returned steps after the end of its episode")
            self.stepped(slot, obs, terminated, truncated, info, last=n == len(results) - 1)


def run_episodes(
    jobs: list[EpisodeJob],
    factory: ControllerFactory,
    *,
    num_workers: int = 1,
    video_size: int = 128,
    progress=None,
    controllers: list[Controller] | None = None,
    pool=None,
    schedule: str = "async",
    fast_physics: bool = True,
    chunks: bool = True,
) -> list[EpisodeResult]:
    """Run every job to success or its episode limit; results in the order of ``jobs``.

    :param num_workers: worker processes; 0 runs in this process (no crash recovery).
        Ignored when ``pool`` is given.
    :param video_size: camera side in pixels for episodes with ``video=True``.
    :param progress: optional ``progress(result)`` callback after each episode.
    :param controllers: one ready controller per job, used instead of ``factory.make``
        (the factory then only declares image size and privileged state).
    :param pool: simulator slots that persist across calls (:func:`make_simulator_pool`);
        the caller closes them. ``None``: a pool is made for this call and closed after it.
    :param schedule: ``"async"``: each slot steps again as soon as its own step is done;
        ``"lockstep"``: all slots step together, each step waiting for the slowest.
    :param fast_physics: one MuJoCo forward pass per substep (:mod:`wmrl_libero.fast_physics`,
        the same states); ``False``: robosuite's own step.
    :param chunks: with ``schedule="async"``, send each controller's action chunk to its slot
        in one round trip (the same episodes); ``False``: one action per round trip. The
        lockstep schedule always sends one action per round trip.
    """
    if schedule not in ("async", "lockstep"):
        raise ValueError(f"schedule must be 'async' or 'lockstep', got {schedule!r}")
    if controllers is not None and len(controllers) != len(jobs):
        raise ValueError(f"got {len(controllers)} controllers for {len(jobs)} jobs")
    if not jobs:
        return []
    order = sorted(
        range(len(jobs)), key=lambda j: (jobs[j].suite, jobs[j].task_index, jobs[j].video, jobs[j].init_state)
    )
    kwargs_of = {j: job_env_kwargs(jobs[j], factory, video_size, fast_physics=fast_physics) for j in order}
    own_pool = pool is None
    if own_pool:
        n = max(1, min(num_workers, len(jobs)))
        # slot k starts where a contiguous split of the sorted jobs would put it: tasks spread over slots
        pool = make_simulator_pool([kwargs_of[order[k * len(order) // n]] for k in range(n)], num_workers)
    n_slots = min(pool.num_envs, len(jobs))
    slots = _Slots(jobs, factory, pool, kwargs_of, order, controllers, progress)
    try:
        for slot in range(n_slots):
            slots.start(slot)
        if schedule == "lockstep":
            while slots.running:
                actions: list[np.ndarray | None] = [None] * pool.num_envs
                for slot in slots.running:
                    actions[slot] = slots.next_action(slot)
                obs, _, terminated, truncated, infos = pool.step(actions)
                for slot in list(slots.running):
                    slots.stepped(slot, obs[slot], terminated[slot], truncated[slot], infos[slot])
        else:
            _run_async(pool, slots, chunks)
    finally:
        if own_pool:
            pool.close()
    return [slots.results[j] for j in range(len(jobs))]


def _run_async(pool, slots: _Slots, chunks: bool) -> None:
    """Each slot steps again as soon as its own result is in: one action, or the controller's
    whole chunk (``chunks``), per round trip."""

    def send(slot: int) -> None:
        if chunks:
            pool.step_chunk_async_at(slot, slots.next_chunk(slot))
        else:
            pool.step_async_at(slot, slots.next_action(slot))

    for slot in slots.running:
        send(slot)
    while slots.running:
        replies = pool.wait_chunks() if chunks else [(slot, [r]) for slot, r in pool.wait_steps()]
        for slot, results in replies:
            slots.stepped_chunk(slot, results)
            if slot in slots.running:  # the same episode, or the next job finish() started
                send(slot)

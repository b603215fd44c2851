"""Run many LIBERO episodes with closed-loop controllers, in-process or in worker processes.

Jobs are sorted by task so that each worker rebuilds its environment as rarely as possible.
Each environment slot runs one episode at a time; the controllers of all slots act in the
parent process (where a policy's weights live), the physics runs in the workers.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_libero.controllers import Controller, ControllerFactory
from wmrl_libero.gym_env import LiberoGymEnv
from wmrl_libero.suites import TaskInfo, task_info

__all__ = ["EpisodeJob", "EpisodeResult", "InProcessEnvs", "run_episodes"]


@dataclass(frozen=True)
class EpisodeJob:
    """One episode: task, stored init state, seed; ``video`` records agentview frames."""

    suite: str
    task_index: int
    init_state: int
    seed: int = 0
    video: bool = False
    max_episode_steps: int | None = None


@dataclass
class EpisodeResult:
    """What one episode yielded.

    ``status`` is ``"ok"`` (a real success or failure) or ``"infrastructure_failure"`` (the
    worker crashed; the episode says nothing about the policy). ``steps`` counts control
    steps (20 Hz); ``seconds`` is wall time.
    """

    job: EpisodeJob
    success: bool
    steps: int
    status: str = "ok"
    error: str = ""
    seconds: float = 0.0
    frames: list[np.ndarray] = field(default_factory=list, repr=False)


class InProcessEnvs:
    """The slot interface of :class:`~wmrl_libero.vector_env.LiberoVectorEnv` on one
    in-process environment per slot (no crash recovery; for tests and small runs)."""

    def __init__(self, env_kwargs: list[dict[str, Any]]):
        self._kwargs = [dict(kw) for kw in env_kwargs]
        self._envs = [LiberoGymEnv(**kw) for kw in self._kwargs]
        self.num_envs = len(self._envs)

    def env_kwargs_at(self, i: int) -> dict[str, Any]:
        return dict(self._kwargs[i])

    def rebuild_at(self, i: int, env_kwargs: dict[str, Any]) -> None:
        self._envs[i].close()
        self._kwargs[i] = dict(env_kwargs)
        self._envs[i] = LiberoGymEnv(**env_kwargs)

    def reset_at(self, i: int, *, seed=None, options=None):
        return self._envs[i].reset(seed=seed, options=options)

    def step(self, actions):
        out = [self._envs[i].step(a) if a is not None else (None, 0.0, False, False, {}) for i, a in enumerate(actions)]
        obs, rew, term, trunc, infos = zip(*out)
        return list(obs), np.array(rew), np.array(term), np.array(trunc), list(infos)

    def close(self) -> None:
        for env in self._envs:
            env.close()


def _env_kwargs(job: EpisodeJob, factory: ControllerFactory, video_size: int) -> dict[str, Any]:
    image_size = factory.image_size
    if job.video and image_size is None:
        image_size = video_size
    return dict(
        suite=job.suite,
        task_index=job.task_index,
        image_size=image_size,
        privileged_info=factory.privileged,
        max_episode_steps=job.max_episode_steps,
    )


@dataclass
class _Running:
    job: EpisodeJob
    controller: Controller
    obs: dict
    info: dict
    started: float
    queue: deque = field(default_factory=deque)
    frames: list = field(default_factory=list)


def run_episodes(
    jobs: list[EpisodeJob],
    factory: ControllerFactory,
    *,
    num_workers: int = 1,
    video_size: int = 128,
    progress=None,
    controllers: list[Controller] | None = None,
) -> list[EpisodeResult]:
    """Run every job to success or its episode limit; results in the order of ``jobs``.

    :param num_workers: worker processes; 0 runs in this process (no crash recovery).
    :param video_size: camera side in pixels for episodes with ``video=True``.
    :param progress: optional ``progress(result)`` callback after each episode.
    :param controllers: one ready controller per job, used instead of ``factory.make``
        (the factory then only declares image size and privileged state).
    """
    if controllers is not None and len(controllers) != len(jobs):
        raise ValueError(f"got {len(controllers)} controllers for {len(jobs)} jobs")
    if not jobs:
        return []
    order = sorted(range(len(jobs)), key=lambda j: (jobs[j].suite, jobs[j].task_index, jobs[j].video, jobs[j].init_state))
    n_slots = max(1, min(num_workers, len(jobs)))
    # contiguous chunks: a slot works through one task before it moves on to the next
    chunks = [order[k * len(order) // n_slots:(k + 1) * len(order) // n_slots] for k in range(n_slots)]
    pending = [deque(chunk) for chunk in chunks]
    first = [_env_kwargs(jobs[chunk[0]], factory, video_size) for chunk in chunks]
    if num_workers == 0:
        envs = InProcessEnvs(first)
    else:
        from wmrl_libero.vector_env import LiberoVectorEnv

        envs = LiberoVectorEnv(first)
    results: dict[int, EpisodeResult] = {}
    running: dict[int, tuple[int, _Running]] = {}
    tasks: dict[tuple[str, int], TaskInfo] = {}

    def start(slot: int) -> None:
        while pending[slot]:
            j = pending[slot].popleft()
            job = jobs[j]
            kwargs = _env_kwargs(job, factory, video_size)
            if envs.env_kwargs_at(slot) != kwargs:
                envs.rebuild_at(slot, kwargs)
            obs, info = envs.reset_at(slot, seed=job.seed, options={"init_state": job.init_state})
            key = (job.suite, job.task_index)
            if key not in tasks:
                tasks[key] = task_info(*key)
            controller = controllers[j] if controllers is not None else factory.make(tasks[key], job.init_state)
            run = _Running(job, controller, obs, info, time.perf_counter())
            if job.video and "agentview_image" in obs:
                run.frames.append(obs["agentview_image"])
            running[slot] = (j, run)
            return

    def finish(slot: int, success: bool, steps: int, status: str = "ok", error: str = "") -> None:
        j, run = running.pop(slot)
        results[j] = EpisodeResult(run.job, success, steps, status, error, time.perf_counter() - run.started, run.frames)
        if progress is not None:
            progress(results[j])
        start(slot)

    try:
        for slot in range(n_slots):
            start(slot)
        while running:
            actions: list[np.ndarray | None] = [None] * n_slots
            for slot, (_, run) in running.items():
                if not run.queue:
                    chunk = np.asarray(run.controller.act(run.obs, run.info), dtype=np.float32).reshape(-1, 7)
                    run.queue.extend(chunk)
                actions[slot] = run.queue.popleft()
            obs, _, terminated, truncated, infos = envs.step(actions)
            for slot in list(running):
                _, run = running[slot]
                run.obs, run.info = obs[slot], infos[slot]
                if run.job.video and obs[slot] is not None and "agentview_image" in obs[slot]:
                    run.frames.append(obs[slot]["agentview_image"])
                steps = int(infos[slot].get("elapsed_steps", 0))
                if infos[slot].get("infrastructure_failure"):
                    finish(slot, False, steps, "infrastructure_failure", infos[slot].get("error", ""))
                elif terminated[slot] or truncated[slot]:
                    finish(slot, bool(terminated[slot]), steps)
    finally:
        envs.close()
    return [results[j] for j in range(len(jobs))]

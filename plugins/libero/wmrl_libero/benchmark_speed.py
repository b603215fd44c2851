"""Speed of the simulator: steps per second of :class:`~wmrl_libero.vector_env.LiberoVectorEnv`,
and seconds per GRPO-sized batch of ``LiberoEnvironment.execute`` with and without
persistent workers."""

from __future__ import annotations

import time

import numpy as np

from wmrl_libero.gym_env import NOOP_ACTION
from wmrl_libero.vector_env import LiberoVectorEnv

__all__ = ["measure_steps_per_second", "measure_batch_seconds"]


def measure_steps_per_second(
    num_workers: int, *, steps: int = 300, suite: str = "libero_10", image_size: int | None = None, seed: int = 0
) -> dict:
    """Total control steps per second (all workers together) with random actions.

    Worker ``i`` runs task ``i`` of the suite; building and resetting are not timed. An
    episode that ends is reset (timed, as in real use).
    """
    rng = np.random.default_rng(seed)
    kwargs = [dict(suite=suite, task_index=i % 10, image_size=image_size) for i in range(num_workers)]
    with LiberoVectorEnv(kwargs) as venv:
        venv.reset(seed=seed, options={"init_state": 0})
        started = time.perf_counter()
        for _ in range(steps):
            actions = [np.clip(NOOP_ACTION + rng.normal(0, 0.3, 7), -1, 1) for _ in range(num_workers)]
            _, _, term, trunc, _ = venv.step(actions)
            for i in np.flatnonzero(term | trunc):
                venv.reset_at(int(i), seed=seed, options={"init_state": 0})
        elapsed = time.perf_counter() - started
    return {
        "workers": num_workers,
        "steps": steps * num_workers,
        "seconds": round(elapsed, 2),
        "steps_per_second": round(steps * num_workers / elapsed, 1),
        "image_size": image_size,
        "suite": suite,
    }


def measure_batch_seconds(
    persistent: bool,
    *,
    task_indices=(0, 4, 6, 7),
    episodes_per_task: int = 8,
    calls: int = 3,
    num_workers: int = 2,
    max_episode_steps: int = 520,
    suite: str = "libero_10",
    seed: int = 0,
) -> dict:
    """Wall seconds of ``calls`` consecutive ``LiberoEnvironment.execute`` calls on one
    GRPO-sized batch (``episodes_per_task`` episodes of each task, init states 0, 1, ...).

    Every episode runs the same open-loop actions (a no-op with Gaussian noise, sigma 0.3),
    to the episode limit unless it succeeds, so both settings simulate the same steps;
    what differs is whether the workers and their environments persist between calls.
    """
    from wmrl_libero.environment import LiberoEnvironment

    rng = np.random.default_rng(seed)
    env = LiberoEnvironment(
        suite,
        task_indices=list(task_indices),
        num_workers=num_workers,
        max_episode_steps=max_episode_steps,
        persistent=persistent,
    )
    tasks = [t for t in env.tasks("train") if t.data["init_state"] < episodes_per_task]
    solutions = [np.clip(NOOP_ACTION + rng.normal(0, 0.3, (max_episode_steps, 7)), -1, 1) for _ in tasks]
    seconds, builds, steps = [], [], []
    try:
        for _ in range(calls):
            before = env.simulator_builds
            started = time.perf_counter()
            outcomes = env.execute(tasks, solutions)
            seconds.append(round(time.perf_counter() - started, 2))
            builds.append(env.simulator_builds - before if persistent else None)
            steps.append(sum(o.info.get("steps", 0) for o in outcomes))
    finally:
        env.close()
    return {
        "persistent": persistent,
        "episodes": len(tasks),
        "workers": num_workers,
        "max_episode_steps": max_episode_steps,
        "seconds_per_call": seconds,
        "builds_per_call": builds,
        "steps_per_call": steps,
    }

"""Steps per second of :class:`~wmrl_libero.vector_env.LiberoVectorEnv`."""

from __future__ import annotations

import time

import numpy as np

from wmrl_libero.gym_env import NOOP_ACTION
from wmrl_libero.vector_env import LiberoVectorEnv

__all__ = ["measure_steps_per_second"]


def measure_steps_per_second(num_workers: int, *, steps: int = 300, suite: str = "libero_10",
                             image_size: int | None = None, seed: int = 0) -> dict:
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
    return {"workers": num_workers, "steps": steps * num_workers, "seconds": round(elapsed, 2),
            "steps_per_second": round(steps * num_workers / elapsed, 1), "image_size": image_size, "suite": suite}

"""LIBERO suites by name: their tasks, instructions, init states and episode limits."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from wmrl_libero.runtime import import_libero

__all__ = ["SUITE_NAMES", "MAX_EPISODE_STEPS", "TaskInfo", "suite_tasks", "task_info", "load_init_states"]

SUITE_NAMES = ("libero_10", "libero_spatial", "libero_object", "libero_goal", "libero_90")

# Episode limits in control steps (20 Hz), as used by the LIBERO evaluations of OpenVLA,
# OpenVLA-OFT and SimpleVLA-RL (the published LIBERO-10 numbers are measured with 520).
# LIBERO's own lifelong-learning runner uses 600 for every suite; pass max_episode_steps
# to override.
MAX_EPISODE_STEPS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}


@dataclass(frozen=True)
class TaskInfo:
    """One LIBERO task: ``suite``/``index`` identify it; ``bddl_file`` is an absolute path."""

    suite: str
    index: int
    name: str
    language: str
    bddl_file: str
    n_init_states: int


def _suite(suite: str):
    import_libero()
    from libero.libero import benchmark

    table = benchmark.get_benchmark_dict()
    if suite not in table:
        raise KeyError(f"unknown LIBERO suite {suite!r}; known: {', '.join(SUITE_NAMES)}")
    return table[suite]()


def task_info(suite: str, index: int) -> TaskInfo:
    """The task ``index`` (0-based, LIBERO's fixed task order) of ``suite``."""
    bench = _suite(suite)  # configures LIBERO first: importing it unconfigured asks a question on stdin
    from libero.libero import get_libero_path

    if not 0 <= index < bench.n_tasks:
        raise IndexError(f"{suite} has tasks 0..{bench.n_tasks - 1}, got {index}")
    task = bench.get_task(index)
    bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    n_init = len(bench.get_task_init_states(index))
    return TaskInfo(suite, index, task.name, task.language, bddl, n_init)


def suite_tasks(suite: str) -> list[TaskInfo]:
    """Every task of ``suite`` in LIBERO's fixed order."""
    return [task_info(suite, i) for i in range(_suite(suite).n_tasks)]


def load_init_states(suite: str, index: int) -> np.ndarray:
    """The stored init states of a task: float array (n_init, state_dim), 50 per task."""
    return np.asarray(_suite(suite).get_task_init_states(index))


def goal_predicates(task: TaskInfo) -> list[list[str]]:
    """The BDDL goal of ``task``, e.g. ``[["in", "alphabet_soup_1", "basket_1_contain_region"]]``."""
    import_libero()
    from libero.libero.envs.bddl_utils import robosuite_parse_problem

    return [list(p) for p in robosuite_parse_problem(task.bddl_file)["goal_state"]]

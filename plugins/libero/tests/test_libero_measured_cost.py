"""The ledger charges each LIBERO episode the CPU seconds its simulator spent, not wall time
and not a declared constant (as it does for AutoResearch's sandboxes)."""

import os
import time

import numpy as np
import pytest
from wmrl_libero.runtime import libero_available

from wmrl_core.ledger import MEASURED_COST_KEY, ComputeLedger, measured_cost_s
from wmrl_core.testing import require

CPU_PER_STEP_S = 0.02
CPU_PER_RESET_S = 0.01
SLEEP_PER_STEP_S = 0.03


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class _TimedFakeEnv:
    """Stands in for ``LiberoGymEnv``: every step burns ``CPU_PER_STEP_S`` of CPU and then waits
    ``SLEEP_PER_STEP_S`` (wall time that costs no CPU, like a machine busy with other work)."""

    def __init__(self, **kwargs):
        self.max_episode_steps = kwargs.get("max_episode_steps") or 5
        self.elapsed = 0

    def _obs(self):
        return {"proprio": np.zeros(16, np.float32), "object_state": np.zeros(3, np.float32)}

    def reset(self, *, seed=None, options=None):
        _burn(CPU_PER_RESET_S)
        self.elapsed = 0
        return self._obs(), {"success": False, "elapsed_steps": 0}

    def step(self, action):
        _burn(CPU_PER_STEP_S)
        time.sleep(SLEEP_PER_STEP_S)
        self.elapsed += 1
        truncated = self.elapsed >= self.max_episode_steps
        return self._obs(), 0.0, False, truncated, {"success": False, "elapsed_steps": self.elapsed}

    def close(self):
        pass


def _fake_libero_environment(monkeypatch, steps: int):
    import wmrl_libero.environment as environment
    from wmrl_libero.episode_runner import InProcessEnvs
    from wmrl_libero.suites import TaskInfo

    infos = [TaskInfo("libero_10", i, f"task{i}", f"do task {i}", "/nonexistent.bddl", 50) for i in range(2)]
    monkeypatch.setattr(environment, "suite_tasks", lambda suite: infos)
    env = environment.LiberoEnvironment("libero_10", max_episode_steps=steps)
    env._pool = InProcessEnvs([dict(suite="libero_10", task_index=0)], build=_TimedFakeEnv)
    return env


def test_episode_cost_is_the_simulators_cpu_seconds_and_the_ledger_charges_them(monkeypatch):
    steps = 4
    env = _fake_libero_environment(monkeypatch, steps)
    assert env.cost is None  # nothing declared: the engine charges what was measured
    tasks = [t for t in env.tasks("train") if t.data["init_state"] < 2]  # 2 tasks x 2 init states
    solutions = [np.zeros((steps, 7)) for _ in tasks]
    ledger = ComputeLedger()
    with ledger.measure("execution", n_items=len(tasks), cost=env.cost) as call:
        outcomes = env.execute(tasks, solutions)
        call.measured_s = measured_cost_s(outcomes)
    expected = CPU_PER_RESET_S + steps * CPU_PER_STEP_S  # 0.01 + 4 * 0.02 = 0.09 s an episode
    for outcome in outcomes:
        assert outcome.status == "ok" and outcome.info["steps"] == steps
        assert expected <= outcome.info[MEASURED_COST_KEY] < expected + 0.05
        # the episode's wall time holds its steps' CPU and the sleeps (4 * 0.03 s) that cost none
        assert outcome.info["seconds"] >= steps * (CPU_PER_STEP_S + SLEEP_PER_STEP_S)
    charged = ledger.cumulative["execution"].charged_s
    assert charged == pytest.approx(sum(o.info[MEASURED_COST_KEY] for o in outcomes))
    assert 4 * expected <= charged < 4 * expected + 0.2
    # what wall time would have charged: the CPU plus every sleep
    assert ledger.cumulative["execution"].wall_s > charged + 4 * steps * SLEEP_PER_STEP_S


def test_a_declared_cost_still_replaces_the_measured_one(monkeypatch):
    import wmrl_libero.environment as environment

    monkeypatch.setattr(environment, "suite_tasks", lambda suite: [])
    env = environment.LiberoEnvironment("libero_10", max_episode_steps=100, seconds_per_step=0.01)
    assert env.cost.cost(3) == pytest.approx(3 * 100 * 0.01)
    with pytest.raises(ValueError, match="seconds_per_step must be > 0"):
        environment.LiberoEnvironment("libero_10", seconds_per_step=0.0)


def _cpu_seconds_of(pid: int) -> float:
    """utime + stime of a process from /proc, seconds (clock ticks of 10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
def test_charged_seconds_match_the_worker_processes_cpu_time():
    """On real simulator workers, the episodes' ``cost_s`` add up to the CPU time the kernel
    counted for the worker processes during the call."""
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_libero.environment import LiberoEnvironment

    env = LiberoEnvironment("libero_10", task_indices=[0, 4], num_workers=2, max_episode_steps=40)
    try:
        tasks = [t for t in env.tasks("train") if t.data["init_state"] < 3]
        rng = np.random.default_rng(0)
        solutions = [np.clip(rng.normal(0, 0.3, (40, 7)), -1, 1) for _ in tasks]
        env.execute(tasks, solutions)  # builds both tasks in both workers
        pids = env._pool.pids
        before = sum(_cpu_seconds_of(p) for p in pids)
        outcomes = env.execute(tasks, solutions)
        during = sum(_cpu_seconds_of(p) for p in pids) - before
        assert env._pool.pids == pids  # no worker was restarted
    finally:
        env.close()
    charged = measured_cost_s(outcomes)
    assert all(o.status == "ok" and o.info[MEASURED_COST_KEY] > 0 for o in outcomes)
    assert charged == pytest.approx(during, rel=0.1, abs=0.1)

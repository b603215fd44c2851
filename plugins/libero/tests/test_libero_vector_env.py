"""Worker processes: parallel stepping and recovery from a killed worker."""

import os
import signal

import numpy as np
from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); check its state
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_killed_worker_is_restarted_and_reported_as_infrastructure_failure():
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_libero.vector_env import LiberoVectorEnv

    venv = LiberoVectorEnv([dict(suite="libero_10", task_index=0), dict(suite="libero_10", task_index=2)])
    pids = list(venv.pids)
    try:
        obs, infos = venv.reset(seed=0, options={"init_state": 0})
        assert len(obs) == 2 and obs[0]["object_state"].shape != obs[1]["object_state"].shape
        noop = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float32)
        venv.step([noop, noop])
        os.kill(pids[1], signal.SIGKILL)
        _, rewards, terminated, truncated, infos = venv.step([noop, noop])
        assert infos[1]["infrastructure_failure"] and "died" in infos[1]["error"]
        assert truncated[1] and not terminated[1] and rewards[1] == 0.0
        assert not infos[0].get("infrastructure_failure") and not truncated[0]
        assert venv.restarts == [0, 1] and venv.pids[1] != pids[1]
        _, _, _, truncated, infos = venv.step([noop, None])  # the restarted worker steps again
        assert not infos[0].get("infrastructure_failure")
        obs, info = venv.reset_at(1, seed=0, options={"init_state": 3})
        assert info["init_state"] == 3
        pids = list(venv.pids)
    finally:
        venv.close()
    assert not any(_alive(p) for p in pids), "worker processes left running after close()"


def test_a_chunk_round_trip_returns_every_step_and_survives_a_killed_worker():
    """A chunk comes back as one result per step, ending with the step that ends the episode;
    a worker killed before its chunk answers with one infrastructure-failure step."""
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_libero.vector_env import LiberoVectorEnv

    kwargs = dict(suite="libero_10", task_index=0, max_episode_steps=5)
    venv = LiberoVectorEnv([kwargs, kwargs])
    pids = list(venv.pids)
    try:
        venv.reset(seed=0, options={"init_state": 0})
        noop = np.array([[0, 0, 0, 0, 0, 0, -1]] * 8, dtype=np.float32)
        os.kill(pids[1], signal.SIGKILL)
        venv.step_chunk_async_at(0, noop[:3])
        venv.step_chunk_async_at(1, noop)
        replies = {}
        while len(replies) < 2:
            replies.update(venv.wait_chunks())
        assert [r[4]["elapsed_steps"] for r in replies[0]] == [1, 2, 3] and not any(r[3] for r in replies[0])
        assert len(replies[1]) == 1 and replies[1][0][4]["infrastructure_failure"] and replies[1][0][3]
        venv.step_chunk_async_at(0, noop)  # 2 more steps reach the episode limit of 5
        ((i, steps),) = venv.wait_chunks()
        assert i == 0 and [r[4]["elapsed_steps"] for r in steps] == [4, 5] and steps[-1][3]
        pids = list(venv.pids)
    finally:
        venv.close()
    assert not any(_alive(p) for p in pids), "worker processes left running after close()"

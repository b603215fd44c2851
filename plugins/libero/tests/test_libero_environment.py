"""The WMRL environment component on real LIBERO episodes (physics only, 6 steps)."""

import numpy as np
import pytest
from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require


@pytest.fixture(scope="module")
def environment():
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_libero.environment import LiberoEnvironment

    env = LiberoEnvironment("libero_10", task_indices=[0, 3], max_episode_steps=6)
    yield env
    env.close()


def test_splits_cover_the_50_init_states(environment):
    train, heldout, full = (environment.tasks(s) for s in ("train", "heldout", "eval"))
    assert len(train) == 2 * 40 and len(heldout) == 2 * 10 and len(full) == 2 * 50
    assert {t.id for t in train}.isdisjoint(t.id for t in heldout)
    t = heldout[0]
    assert t.id == "libero_10/0/40" and t.data == {"suite": "libero_10", "task_index": 0, "init_state": 40}
    assert t.description == "put both the alphabet soup and the tomato sauce in the basket"
    with pytest.raises(ValueError, match="unknown split"):
        environment.tasks("test")


def test_execute_runs_real_episodes_and_flags_bad_solutions(environment):
    tasks = environment.tasks("train")[:1] + environment.tasks("heldout")[-1:]
    hold = np.tile([0, 0, 0, 0, 0, 0, -1.0], (6, 1))
    bad = np.full((6, 7), np.nan)
    outcomes = environment.execute(tasks + tasks[:1], [hold, hold, bad])
    assert [o.status for o in outcomes] == ["ok", "ok", "invalid_solution"]
    assert [o.score for o in outcomes] == [0.0, 0.0, 0.0]  # holding still solves nothing
    assert outcomes[0].info["steps"] == 6 and outcomes[1].info["init_state"] == 49


def test_execute_records_the_subsampled_trajectory_first_and_final_state(environment):
    task = environment.tasks("train")[:1]
    push = np.tile([0.8, 0, 0, 0, 0, 0, -1.0], (6, 1))  # the arm moves: the states must differ
    outcome = environment.execute(task, [push])[0]
    trajectory = outcome.info["trajectory"]
    assert trajectory["proprio"].shape == (7, 16)  # reset + 6 actions, fewer than trajectory_states=16
    assert trajectory["object_state"].shape[0] == 7
    assert not np.allclose(trajectory["proprio"][0], trajectory["proprio"][-1])


def test_subsampled_trajectory_keeps_the_ends_evenly():
    from wmrl_libero.environment import subsampled_trajectory

    states = {"proprio": [np.full(16, t, np.float32) for t in range(21)], "object_state": [np.zeros(3)] * 21}
    out = subsampled_trajectory(states, 5)
    assert out["proprio"][:, 0].tolist() == [0, 5, 10, 15, 20] and out["object_state"].shape == (5, 3)


def test_the_deadline_is_none_in_process_and_grows_with_episodes_per_worker(environment):
    import math

    from wmrl_libero.environment import LiberoEnvironment

    assert environment.timeout_s(10) == math.inf  # in-process: the renderer belongs to the calling thread
    pooled = LiberoEnvironment("libero_10", task_indices=[0], num_workers=2, max_episode_steps=100)
    assert pooled.timeout_s(2) == 300.0 + 1 * 0.05 * 100
    assert pooled.timeout_s(10) == 300.0 + 5 * 0.05 * 100

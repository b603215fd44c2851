"""DAgger: the beta schedule, the shadow expert and the mixture, one short real iteration."""

import json

import numpy as np
import pytest
from wmrl_libero.dagger import DaggerConfig, DaggerController, beta_schedule
from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require


def test_beta_schedule_decays_from_one_to_the_floor():
    assert beta_schedule(0) == 1.0 and beta_schedule(1) == 0.5 and beta_schedule(2) == 0.25
    assert beta_schedule(10) == 0.05  # 0.5**10 < 0.05
    assert beta_schedule(3, beta0=1.0, decay=0.98, beta_min=0.05) == pytest.approx(0.98**3)


class _CountingExpert:
    """Acts +0.5 on x, and counts the steps it saw (it must see every one, in order)."""

    def __init__(self):
        self.seen = []

    def act(self, obs, info):
        self.seen.append(int(obs["proprio"][0]))
        return np.array([[0.5, 0, 0, 0, 0, 0, -1]])


def _obs(t):
    return {"proprio": np.full(16, t, np.float32), "object_state": np.zeros(3, np.float32)}


def test_expert_labels_every_step_and_the_mixture_switches_per_chunk():
    expert = _CountingExpert()
    student_chunks = []

    def student(obs):
        student_chunks.append(int(obs["proprio"][0]))
        return np.tile([[-0.5, 0, 0, 0, 0, 0, 1]], (3, 1))

    c = DaggerController(expert, student, beta=0.5, chunk=3, rng=np.random.default_rng(1))
    executed = [c.act(_obs(t), {"sim_state": np.array([t])})[0] for t in range(30)]
    assert expert.seen == list(range(30))  # queried on every step, even when the student acts
    assert np.all(np.asarray(c.rows["actions"])[:, 0] == 0.5)  # labels are always the expert's
    from_expert = np.asarray(c.rows["expert_executed"])
    assert 0 < from_expert.sum() < 30 and from_expert.reshape(10, 3).std(1).max() == 0  # one source per chunk
    assert student_chunks == [t for t in range(0, 30, 3) if not from_expert[t]]  # asked once per chunk
    np.testing.assert_array_equal(np.asarray(executed)[:, 0], np.where(from_expert, 0.5, -0.5))
    assert [int(s[0]) for s in c.rows["states"]] == list(range(30))
    # beta = 1 is the expert alone, and needs no student
    alone = DaggerController(_CountingExpert(), None, beta=1.0, chunk=3, rng=np.random.default_rng(0))
    assert all(alone.act(_obs(t), {})[0, 0] == 0.5 for t in range(6))
    with pytest.raises(ValueError, match="needs a student"):
        DaggerController(_CountingExpert(), None, beta=0.5, chunk=3, rng=np.random.default_rng(0))


def test_rollout_init_states_cycle_through_the_training_split():
    from wmrl_libero.dagger import _rollout_init_states

    config = DaggerConfig(out="x", task_indices=[0], episodes_per_task=8, expert_episodes_per_task=13, beta_decay=0.4)
    states = [_rollout_init_states(config, i) for i in range(6)]
    assert states[0] == list(range(13)) and states[1] == list(range(13, 21))  # beta 1, then 0.4
    assert states[4] == [37, 38, 39, 0, 1, 2, 3, 4] and max(max(s) for s in states) == 39


def test_recorded_demos_can_be_the_beta_one_iteration():
    from wmrl_libero.dagger import _episodes_per_task, _rollout_init_states

    config = DaggerConfig(out="x", task_indices=[0], demos=["d.hdf5"], expert_episodes_per_task=0, episodes_per_task=4)
    assert [_episodes_per_task(config, i) for i in range(3)] == [0, 4, 4]
    assert _rollout_init_states(config, 1) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="needs --demos"):
        DaggerConfig(out="x", task_indices=[0], expert_episodes_per_task=0)


def test_cpu_seconds_count_child_processes():
    import subprocess
    import sys
    import time

    from wmrl_libero.dagger import _cpu_seconds

    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\ntime.sleep(60)"
    before = _cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", busy])
    try:
        deadline = time.time() + 30  # a loaded machine may give the child its 0.5 s slowly
        while _cpu_seconds() - before < 0.4 and time.time() < deadline:
            time.sleep(0.2)  # this process sleeps: only the child's CPU time can add up
        assert _cpu_seconds() - before >= 0.4
    finally:
        child.kill()
        child.wait()


def test_config_refuses_heldout_init_states():
    with pytest.raises(ValueError, match="held out"):
        DaggerConfig(out="x", task_indices=[0], init_states=[38, 39, 40])
    with pytest.raises(ValueError, match="at least one task"):
        DaggerConfig(out="x", task_indices=[])


@pytest.mark.slow
def test_short_dagger_run_in_the_real_simulator(tmp_path):
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    import h5py
    from wmrl_libero.dagger import run_dagger
    from wmrl_libero.demos import load_demonstrations
    from wmrl_libero.policy_factories import controller_factory

    config = DaggerConfig(
        out=str(tmp_path / "dagger"),
        task_indices=[0],
        iterations=2,
        episodes_per_task=2,
        init_states=[0, 1, 2],
        max_episode_steps=24,
        first_train_steps=20,
        train_steps=10,
        batch_size=16,
        hidden=32,
        num_workers=1,
        seed=3,
    )
    policy = run_dagger(config, log=lambda *_: None)
    progress = [json.loads(line) for line in (tmp_path / "dagger" / "progress.jsonl").read_text().splitlines()]
    assert [p["beta"] for p in progress] == [1.0, 0.5]
    assert progress[0]["expert_step_fraction"] == 1.0 and 0 < progress[1]["expert_step_fraction"] < 1
    with h5py.File(tmp_path / "dagger" / "data" / "iter_01.hdf5", "r") as f:
        assert f["data"].attrs["num_demos"] == 2 and f["data"].attrs["beta"] == 0.5
        g = f["data/demo_0"]
        T = g.attrs["num_samples"]
        assert T == 24 and g["actions"].shape == (T, 7) and g["executed_actions"].shape == (T, 7)
        assert g["states"].shape[0] == T and g["obs/object_state"].shape[0] == T and g.attrs["init_state"] == 2
        student = g["expert_executed"][()] == 0
        assert student.any()  # the student acted, and the expert's labels differ from what it did
        assert not np.allclose(g["actions"][()][student], g["executed_actions"][()][student])
    assert len(load_demonstrations(tmp_path / "dagger" / "data" / "iter_00.hdf5")) == 2
    factory = controller_factory(f"small-vla:{policy}")  # what `wmrl-libero eval` loads
    assert factory.image_size is None
    # a rerun resumes: nothing left to do, no new progress line
    run_dagger(config, log=lambda *_: None)
    assert len((tmp_path / "dagger" / "progress.jsonl").read_text().splitlines()) == 2

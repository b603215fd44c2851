"""The imagination world model trained on a few real LIBERO-10 steps (physics only)."""

import numpy as np
import pytest
import torch
from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require
from wmrl_core.types import Task

NEEDS = "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`"


@pytest.mark.slow
def test_tiny_dynamics_on_real_steps_and_predict(tmp_path):
    require(libero_available(), NEEDS)
    from wmrl_libero.environment import LiberoEnvironment
    from wmrl_libero.gym_env import LiberoGymEnv
    from wmrl_libero.world_models.checkpoint import WorldModelBundle, save_bundle
    from wmrl_libero.world_models.dynamics import chunk_transitions, fit_dynamics
    from wmrl_libero.world_models.features import Episode, state_vector
    from wmrl_libero.world_models.imagination import ImaginationWorldModel
    from wmrl_libero.world_models.scorer import fit_scorer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    env = LiberoGymEnv("libero_10", 0)
    episodes = []
    try:
        for init in (0, 1):
            obs, _ = env.reset(seed=0, options={"init_state": init})
            states, actions = [state_vector(obs["proprio"], obs["object_state"], 128)], []
            for t in range(24):
                a = np.clip(
                    np.array([0.5 * np.sin(t / 4 + init), 0.3, -0.3, 0, 0, 0, -1]) + 0.1 * rng.standard_normal(7), -1, 1
                )
                obs, *_ = env.step(a)
                states.append(state_vector(obs["proprio"], obs["object_state"], 128))
                actions.append(a.astype(np.float32))
            # the scorer needs two classes: call the end of episode 0 a "success" (a label only)
            episodes.append(Episode(0, init, init == 0, np.stack(states), np.stack(actions), len(obs["object_state"])))
    finally:
        env.close()
    dyn = fit_dynamics(episodes, chunk=4, members=3, hidden=32, iterations=150, batch_size=32, log=lambda m: None)
    s, a, n, k = (torch.as_tensor(x) for x in chunk_transitions(episodes, 4))
    pred, _ = dyn.step(s, a, k)

    def eef(x):
        return x[:, :3]

    assert ((eef(pred) - eef(n)) ** 2).mean() < ((eef(s) - eef(n)) ** 2).mean()  # beats "the arm stays"
    scorer = fit_scorer(episodes, hidden=32, iterations=50, batch_size=32, log=lambda m: None)
    bundle = WorldModelBundle(
        dyn,
        scorer,
        128,
        initial_states={(0, e.init_state): e.states[0] for e in episodes},
        object_len={0: episodes[0].object_len},
        meta={"train_success_rate": 0.5},
    )
    torch.set_num_threads(threads)
    wm = ImaginationWorldModel(
        LiberoEnvironment("libero_10", task_indices=[0]),
        checkpoint=str(save_bundle(bundle, tmp_path / "wm.pt")),
        horizon=24,
    )
    tasks = [
        Task(id=f"libero_10/0/{e.init_state}", data={"suite": "libero_10", "task_index": 0, "init_state": e.init_state})
        for e in episodes
    ]
    outs = wm.predict(tasks, [e.actions for e in episodes])
    assert [o.status for o in outs] == ["ok", "ok"]
    assert all(0.0 <= o.score <= 1.0 for o in outs)
    # the horizon is honoured: 24 steps unless the ensemble disagreed or the scorer saw success
    assert all(
        o.info["imagined_steps"] == 24 or ((o.info["cut"] or o.info["succeeded"]) and o.info["imagined_steps"] < 24)
        for o in outs
    )
    # an init state missing from the checkpoint starts from one environment reset
    missing = Task(id="libero_10/0/5", data={"suite": "libero_10", "task_index": 0, "init_state": 5})
    out = wm.predict([missing], [episodes[0].actions])[0]
    assert out.status == "ok" and (0, 5) in wm._missing_starts
    wm.env.close()


def test_perturbations_are_deterministic_and_varied():
    from wmrl_libero.world_models.recording import perturbation_for, recorded_keys

    assert perturbation_for(0, 3, 1) == perturbation_for(0, 3, 1)
    clean = perturbation_for(0, 3, 0)
    assert clean.noise_scale == 0.0 and clean.burst_start == -1 and clean.step_limit == 520
    assert perturbation_for(0, 3, 2).step_limit < 520 and perturbation_for(0, 3, 1).burst_start >= 30
    assert recorded_keys("/nonexistent/file.hdf5") == set()


@pytest.mark.slow
def test_recording_writes_libero_layout_and_resumes(tmp_path, monkeypatch):
    require(libero_available(), NEEDS)
    import h5py
    from wmrl_libero.world_models import recording
    from wmrl_libero.world_models.features import load_episodes

    # a short early end keeps the test quick; the perturbation is otherwise the real one
    real = recording.perturbation_for
    monkeypatch.setattr(
        recording,
        "perturbation_for",
        lambda t, s, r, m=520: recording.Perturbation(**{**real(t, s, r, m).__dict__, "step_limit": 15}),
    )
    out = tmp_path / "wm.hdf5"
    logs = []
    recording.record_perturbed_rollouts(out, task_indices=[0], init_states=[0], rollouts=[1, 2], log=logs.append)
    assert len(logs) == 2 and recording.recorded_keys(out) == {(0, 0, 1), (0, 0, 2)}
    recording.record_perturbed_rollouts(out, task_indices=[0], init_states=[0], rollouts=[1, 2], log=logs.append)
    assert len(logs) == 2  # resumed: nothing recorded twice
    with h5py.File(out, "r") as f:
        g = f["data/demo_0"]
        assert g["actions"].shape == (15, 7) and g["states"].shape[0] == 15 and g["obs/proprio"].shape == (15, 16)
        assert not g.attrs["success"] and g.attrs["step_limit"] == 15
    episodes = load_episodes([out])
    assert [len(e.states) for e in episodes] == [16, 16]  # the state after the last action is kept

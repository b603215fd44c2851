"""The small VLA: behaviour cloning, and the WMRL policy contract on real episodes."""

import h5py
import numpy as np
import pytest
import torch
from wmrl_libero.policies.behaviour_cloning import chunk_targets, train_behaviour_cloning
from wmrl_libero.policies.small_vla import SmallVLA, load_small_vla
from wmrl_libero.policies.vla_interface import VLAInput
from wmrl_libero.runtime import libero_available

from wmrl_core.checkers import check_environment, check_policy, check_rollouts
from wmrl_core.testing import require


def test_chunk_targets_repeat_the_last_action():
    a = np.arange(3 * 7, dtype=float).reshape(3, 7)
    c = chunk_targets(a, 2)
    assert c.shape == (3, 2, 7)
    np.testing.assert_array_equal(c[0], a[[0, 1]])
    np.testing.assert_array_equal(c[2], a[[2, 2]])


def test_sample_log_prob_consistency():
    torch.manual_seed(0)
    model = SmallVLA(chunk=3, object_dim=8)
    x = [VLAInput("put the mug on the plate", np.zeros(16, np.float32), np.ones(5, np.float32))]
    actions, lp = model.sample(x)
    assert actions.shape == (1, 3, 7) and lp.shape == (1, 3)
    assert torch.allclose(model.log_prob(x, actions), lp, atol=1e-5)


def _write_demo_file(path, instruction, actions_fn, T=60, seed=0):
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for i in range(3):
            proprio = rng.normal(size=(T, 16)).astype(np.float32)
            g = f.create_group(f"data/demo_{i}")
            g.attrs.update(task_index=0, init_state=i, language_instruction=instruction)
            g.create_dataset("actions", data=actions_fn(proprio))
            g.create_dataset("obs/proprio", data=proprio)
            g.create_dataset("obs/object_state", data=rng.normal(size=(T, 10)).astype(np.float32))


@pytest.mark.slow
def test_behaviour_cloning_learns_a_state_dependent_expert(tmp_path):
    # the "expert" moves against its end-effector offset: a = clip(-0.5 * eef_pos)
    def expert(p):
        a = np.zeros((len(p), 7))
        a[:, :3] = np.clip(-0.5 * p[:, :3], -1, 1)
        a[:, 6] = np.sign(p[:, 7])
        return a

    _write_demo_file(tmp_path / "d.hdf5", "do the task", expert)
    ckpt = train_behaviour_cloning(
        [tmp_path / "d.hdf5"],
        tmp_path / "bc.pt",
        chunk=1,
        object_dim=10,
        iterations=500,
        batch_size=64,
        log=lambda *_: None,
    )
    model = load_small_vla(ckpt)
    p = np.random.default_rng(9).normal(size=(50, 16)).astype(np.float32)
    pred, _ = model.sample([VLAInput("do the task", row, np.zeros(10, np.float32)) for row in p], deterministic=True)
    err = np.abs(pred[:, 0, :3].numpy() - expert(p)[:, :3]).mean()
    assert err < 0.1, f"BC did not fit the expert (mean abs error {err:.3f})"


def test_policy_contract_on_real_episodes():
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_libero.environment import LiberoEnvironment
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    env = LiberoEnvironment("libero_10", task_indices=[0], max_episode_steps=5)
    try:
        torch.manual_seed(0)
        policy = SmallVLAPolicy(env, max_steps=5, chunk=2)
        tasks = env.tasks("train")[:1]
        check_environment(env)
        check_policy(policy)
        rollouts = policy.generate(tasks, group_size=2)
        check_rollouts(rollouts, n_tasks=1, group_size=2)
        assert len(rollouts) == 2 and rollouts.old_log_probs.shape == (2, 5)
        outcomes = env.execute(rollouts.tasks, rollouts.solutions)
        assert [o.status for o in outcomes] == ["ok", "ok"]
        new = policy.log_probs(rollouts)
        assert new.requires_grad
        # same weights: the recomputed log-probs equal the sampling-time ones (GRPO ratio 1)
        assert torch.allclose(new.detach() * rollouts.mask, rollouts.old_log_probs * rollouts.mask, atol=1e-4)
        assert rollouts.mask.sum() == 10
    finally:
        env.close()


def test_training_fast_path_matches_the_observation_path():
    from wmrl_libero.policies.behaviour_cloning import chunk_samples

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = SmallVLA(chunk=2, object_dim=6)
    model.feat_mean.normal_()
    demos = [
        {
            "language_instruction": text,
            "proprio": rng.normal(size=(4, 16)),
            "object_state": rng.normal(size=(4, n)),
            "actions": rng.uniform(-1, 1, (4, 7)),
        }
        for text, n in (("open it", 5), ("close it", 9))
    ]
    samples = chunk_samples(demos, chunk=2, object_dim=6)
    fast = model.state_distribution(samples.state, samples.instructions, samples.which).mean
    inputs = [
        VLAInput(d["language_instruction"], p.astype(np.float32), o.astype(np.float32))
        for d in demos
        for p, o in zip(d["proprio"], d["object_state"])
    ]
    assert torch.allclose(fast, model.distribution(inputs).mean, atol=1e-6)
    assert samples.targets.shape == (8, 2, 7) and torch.equal(samples.targets[3, 1], samples.targets[3, 0])


def test_policy_executes_whole_chunks_like_eval_and_dagger():
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.types import Task

    torch.manual_seed(0)
    policy = SmallVLAPolicy(max_steps=7, chunk=3, object_dim=4, hidden=16)
    rollouts = policy.generate([Task(id="t", description="open it")], group_size=1)
    ctrl = rollouts.solutions[0]
    rng = np.random.default_rng(0)
    obs = [{"proprio": rng.normal(size=16).astype(np.float32), "object_state": rng.normal(size=4)} for _ in range(5)]
    planned = ctrl.act_batch(obs[:1], 0)[0]  # what imagination would run from obs 0
    executed = np.concatenate([ctrl.act(o, {}) for o in obs])
    assert len(ctrl.actions) == 5 and len(ctrl.inputs) == 2  # a new prediction at steps 0 and 3 only
    np.testing.assert_allclose(executed[:3], planned, atol=1e-6)  # steps 1, 2 ignore their observations
    assert not np.allclose(executed[3], planned[0])
    new = policy.log_probs(rollouts)
    assert rollouts.mask[0].tolist() == [1, 1, 1, 1, 1, 0, 0]
    assert torch.allclose(new.detach() * rollouts.mask, rollouts.old_log_probs * rollouts.mask, atol=1e-4)


@pytest.mark.parametrize(
    "name,tasks",
    [("small_vla_dagger_t0-8.pt", 9), ("small_vla_dagger_t0-9.pt", 10), ("small_vla_dagger_t0-9_h1024.pt", 10)],
)
def test_shipped_base_policy_loads_and_acts(name, tasks):
    from pathlib import Path

    path = Path(__file__).parents[1] / "checkpoints" / name
    model = load_small_vla(path)
    assert model.chunk == 4 and model.image_size is None  # physics-state observations
    x = VLAInput("put both moka pots on the stove", np.zeros(16, np.float32), np.zeros(40, np.float32))
    actions, _ = model.sample([x], deterministic=True)
    assert actions.shape == (1, 4, 7) and torch.isfinite(actions).all() and actions.abs().max() <= 1
    assert torch.load(path, weights_only=False)["meta"]["tasks"] == list(range(tasks))

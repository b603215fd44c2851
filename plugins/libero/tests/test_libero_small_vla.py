"""The small VLA: behaviour cloning, and the WMRL policy contract on real episodes."""

import math

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
        policy.log_probs(rollouts)  # the trainer's check, before the episodes run (issue 52): changes nothing
        assert rollouts.mask.sum() == 0
        outcomes = env.execute(rollouts.tasks, rollouts.solutions)
        assert [o.status for o in outcomes] == ["ok", "ok"]
        new = policy.log_probs(rollouts)
        assert new.requires_grad
        # same weights: the recomputed log-probs equal the sampling-time ones (GRPO ratio 1)
        assert torch.allclose(new.detach() * rollouts.mask, rollouts.old_log_probs * rollouts.mask, atol=1e-4)
        assert rollouts.mask.sum() == 10
        env.execute(rollouts.tasks, rollouts.solutions)  # executed again: the new episode replaces the record
        assert rollouts.mask.sum() == 10 and [len(c.actions) for c in rollouts.solutions] == [5, 5]
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


def _fake_obs(n: int, object_dim: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {"proprio": rng.normal(size=16).astype(np.float32), "object_state": rng.normal(size=object_dim)}
        for _ in range(n)
    ]


def _snapshot(rollouts) -> tuple:
    return (
        rollouts.mask.clone(),
        rollouts.old_log_probs.clone(),
        [(len(c.inputs), len(c.actions)) for c in rollouts.solutions],
    )


def _same(a: tuple, b: tuple) -> bool:
    return torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[2] == b[2]


def test_log_probs_is_pure_before_and_after_execution():
    """The trainer checks ``log_probs`` before the episodes run; one that wrote into the rollouts there
    would clear the mask and train step 1 on nothing. Calling it changes nothing, twice gives the
    same, and the mask is the executed steps whenever the episode runs."""
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.types import Task

    torch.manual_seed(0)
    policy = SmallVLAPolicy(max_steps=7, chunk=3, object_dim=4, hidden=16)
    rollouts = policy.generate([Task(id="t", description="open it")], group_size=2)
    assert rollouts.mask.sum() == 0  # nothing executed yet
    before = _snapshot(rollouts)
    first, second = policy.log_probs(rollouts), policy.log_probs(rollouts)
    assert torch.equal(first, second) and _same(before, _snapshot(rollouts))

    for o in _fake_obs(5, 4):  # rollout 0 runs 5 steps (as the environment runs it), rollout 1 none
        rollouts.solutions[0].act(o, {})
    assert rollouts.mask.tolist() == [[1, 1, 1, 1, 1, 0, 0], [0] * 7]
    after = _snapshot(rollouts)
    first, second = policy.log_probs(rollouts), policy.log_probs(rollouts)
    assert torch.equal(first, second) and _same(after, _snapshot(rollouts))
    assert first.requires_grad and torch.allclose(first.detach()[0, :5], rollouts.old_log_probs[0, :5], atol=1e-4)
    assert torch.equal(first.detach()[1], torch.zeros(7))


def test_the_record_and_the_mask_move_together():
    """Whoever runs the controller (the environment clears it first, imagination truncates it) keeps
    ``inputs``, ``actions`` and the rollout's mask row in step."""
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.types import Task

    torch.manual_seed(0)
    policy = SmallVLAPolicy(max_steps=7, chunk=3, object_dim=4, hidden=16)
    rollouts = policy.generate([Task(id="t", description="open it")], group_size=1)
    ctrl = rollouts.solutions[0]
    for o in _fake_obs(7, 4):
        ctrl.act(o, {})
    assert rollouts.mask[0].tolist() == [1] * 7 and len(ctrl.inputs) == 3
    ctrl.truncate_record(4)  # imagination's episode ended after 4 steps: chunks 0 and 1 remain
    assert rollouts.mask[0].tolist() == [1, 1, 1, 1, 0, 0, 0] and (len(ctrl.inputs), len(ctrl.actions)) == (2, 4)
    ctrl.clear_record()  # a real execution starts afresh
    assert rollouts.mask.sum() == 0 and not ctrl.inputs and not ctrl.actions


def test_entropy_is_the_gaussian_entropy_summed_over_action_dimensions():
    """sigma = exp(log_std) per dimension, state-independent: H = sum_d 0.5 log(2 pi e sigma_d^2) nats
    at every step; with log_std = (-1, 0, 0.5, -2, -1, 0, 2) (the last clamped to 1, as sampling does)
    that is 7 * 0.5 * log(2 pi e) + (-1 + 0 + 0.5 - 2 - 1 + 0 + 1) = 9.9326 - 2.5."""
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.types import Task

    policy = SmallVLAPolicy(max_steps=5, chunk=2, object_dim=4, hidden=16)
    with torch.no_grad():
        policy.model.log_std.copy_(torch.tensor([-1.0, 0.0, 0.5, -2.0, -1.0, 0.0, 2.0]))
    rollouts = policy.generate([Task(id="t", description="open it")] * 2, group_size=3)
    entropy = policy.entropy(rollouts)
    expected = 7 * 0.5 * math.log(2 * math.pi * math.e) - 2.5
    assert entropy.shape == (6, 5) and torch.allclose(entropy, torch.full((6, 5), expected))
    assert expected == pytest.approx(7.4326, abs=1e-4)
    sigma = torch.tensor([-1.0, 0.0, 0.5, -2.0, -1.0, 0.0, 1.0]).exp()
    assert float(entropy[0, 0].detach()) == pytest.approx(float(torch.distributions.Normal(0.0, sigma).entropy().sum()))
    entropy.sum().backward()  # differentiable in log_std (the bonus grpo.entropy_coef needs it)
    assert policy.model.log_std.grad.tolist() == [30.0] * 6 + [0.0]  # 6 x 5 steps each; the clamped one none


def test_update_metrics_report_sigma_and_the_action_shift_on_a_fixed_probe_set():
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.types import Task

    torch.manual_seed(0)
    policy = SmallVLAPolicy(max_steps=5, chunk=2, object_dim=4, hidden=16, probe_size=8)
    twin = SmallVLAPolicy(max_steps=5, chunk=2, object_dim=4, hidden=16, probe_size=8)
    assert [p.proprio.tolist() for p in policy._probes] == [p.proprio.tolist() for p in twin._probes]  # seeded

    rollouts = policy.generate([Task(id="t", description="open it")], group_size=2)
    lp = policy.log_probs(rollouts).detach()
    metrics = policy.update_metrics(rollouts, rollouts.old_log_probs, lp)
    assert metrics["sigma_mean"] == pytest.approx(math.exp(-1.0))  # init_log_std = -1
    assert [metrics[f"sigma/{d}"] for d in range(7)] == pytest.approx([math.exp(-1.0)] * 7)
    assert metrics["action_shift"] == 0.0 and metrics["action_shift_from_start"] == 0.0  # nothing changed

    with torch.no_grad():
        policy.model.mean_head.bias.add_(0.1)  # an "update"
        policy.model.log_std[6] = 0.0
    metrics = policy.update_metrics(rollouts, rollouts.old_log_probs, lp)
    assert 0 < metrics["action_shift"] == metrics["action_shift_from_start"] < 0.1  # tanh shrinks the shift
    assert metrics["sigma/6"] == pytest.approx(1.0)
    policy.generate([Task(id="t", description="open it")], group_size=1)  # the next step samples from here
    again = policy.update_metrics(rollouts, rollouts.old_log_probs, lp)
    assert again["action_shift"] == 0.0 and again["action_shift_from_start"] == metrics["action_shift_from_start"]


def test_sigma_scale_widens_every_action_dimension_and_log_std_gets_its_own_rate():
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.config import TrainConfig
    from wmrl_core.step import TrainState

    torch.manual_seed(0)
    base = SmallVLAPolicy(max_steps=5, chunk=2, object_dim=4, hidden=16, probe_size=0)
    torch.manual_seed(0)
    wide = SmallVLAPolicy(max_steps=5, chunk=2, object_dim=4, hidden=16, probe_size=0, sigma_scale=3.0, log_std_lr=0.01)
    assert torch.allclose(wide._sigma(), 3 * base._sigma())
    assert torch.equal(wide.model.mean_head.weight, base.model.mean_head.weight)  # only sigma changed

    cfg = TrainConfig(mode="real")
    groups = TrainState.create(cfg, wide).optimizer.param_groups
    assert [g["lr"] for g in groups] == [cfg.grpo.lr, 0.01]
    assert groups[1]["params"] == [wide.model.log_std]
    assert len(TrainState.create(cfg, base).optimizer.param_groups) == 1  # no log_std_lr: one rate
    with pytest.raises(ValueError, match="sigma_scale must be a positive number"):
        SmallVLAPolicy(max_steps=5, chunk=2, object_dim=4, hidden=16, sigma_scale=0.0)


def test_one_draw_per_chunk_holds_its_noise_and_has_one_log_prob_per_chunk():
    """``noise="chunk"``: the chunk's actions share one draw z (a = mu_j + tau sigma z), so its density
    is that of z, counted once at the chunk's first step; at unchanged weights the recomputed
    log-probabilities equal the sampling-time ones (ratio 1), with sigma multiplied by the temperature."""
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.types import Task

    torch.manual_seed(0)
    policy = SmallVLAPolicy(max_steps=7, chunk=3, object_dim=4, hidden=16, noise="chunk", temperature=1.6)
    rollouts = policy.generate([Task(id="t", description="open it")], group_size=2)
    ctrl = rollouts.solutions[0]
    assert torch.equal(ctrl.eps[0], ctrl.eps[2]) and torch.equal(ctrl.eps[3], ctrl.eps[5])
    assert not torch.equal(ctrl.eps[0], ctrl.eps[3])
    assert rollouts.old_log_probs[0, [1, 2, 4, 5]].abs().sum() == 0  # one term per chunk
    for o in _fake_obs(5, 4):  # 5 steps: chunk 0 whole, chunk 1 cut after 2 steps
        ctrl.act(o, {})
    assert rollouts.mask[0].tolist() == [1, 0, 0, 1, 0, 0, 0]
    lp = policy.log_probs(rollouts).detach()
    assert torch.allclose(lp[0], rollouts.old_log_probs[0] * rollouts.mask[0], atol=1e-4)
    # the held draw: within a chunk the actions differ from their means by the same tau sigma z
    dist = policy.model.distribution(ctrl.inputs[:1])
    offsets = (torch.stack(ctrl.actions[:3]) - dist.mean[0]) / (1.6 * dist.stddev[0])
    assert torch.allclose(offsets, ctrl.eps[0].expand(3, 7), atol=1e-5)
    # the entropy is the sampling distribution's: sigma x 1.6 in each of the 7 dimensions
    base = SmallVLAPolicy(max_steps=7, chunk=3, object_dim=4, hidden=16)
    base.load_state_dict(policy.state_dict())
    gap = float(policy.entropy(rollouts)[0, 0] - base.entropy(rollouts)[0, 0])
    assert gap == pytest.approx(7 * math.log(1.6), rel=1e-5)
    with pytest.raises(ValueError, match="noise must be one of step, chunk"):
        SmallVLAPolicy(max_steps=7, chunk=3, object_dim=4, hidden=16, noise="episode")

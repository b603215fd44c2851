"""The Hugging Face action-token VLA as a WMRL policy (``libero-hf-vla``): generation,
log-probs of the sampled tokens, real LIBERO episodes and one GRPO step, on a tiny model
built locally."""

import importlib.util

import numpy as np
import pytest
import torch
import wmrl_libero.plugin
from wmrl_libero.runtime import libero_available
from wmrl_libero.testing import build_tiny_action_token_model

from wmrl_core.checkers import check_environment, check_policy, check_rollouts
from wmrl_core.grpo import grpo_loss
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.testing import require
from wmrl_core.types import Task

INSTRUCTION = "put both the alphabet soup and the tomato sauce in the basket"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    require(
        importlib.util.find_spec("transformers") is not None,
        "transformers is not installed: pip install 'wmrl-libero[hf]'",
    )
    return build_tiny_action_token_model(tmp_path_factory.mktemp("tiny_vla_policy"))


def _make_policy(env, model_dir, **kwargs):
    # the plugin loaded directly, so that a broken sibling plugin cannot fail this test
    registry = build_registry(get_plugin_manager(entry_points=False, extra_plugins=[wmrl_libero.plugin]))
    return registry.policies.make("libero-hf-vla", env=env, checkpoint=str(model_dir), **kwargs)


def _obs(rng):
    return {"proprio": rng.uniform(-0.5, 0.5, 16).astype(np.float32), "object_state": np.zeros(4, np.float32)}


def test_generate_and_log_probs_without_simulator(model_dir):
    policy = _make_policy(None, model_dir, max_steps=4, use_proprio=True, temperature=1.5)
    check_policy(policy)
    torch.manual_seed(0)
    tasks = [Task("libero_10/0/0", INSTRUCTION), Task("libero_10/0/1", INSTRUCTION)]
    rollouts = policy.generate(tasks, group_size=2)
    check_rollouts(rollouts, n_tasks=2, group_size=2)
    assert rollouts.old_log_probs.shape == (4, 4) and rollouts.mask.sum() == 0  # nothing executed yet
    rng = np.random.default_rng(0)
    for i, ctrl in enumerate(rollouts.solutions[:3]):  # the last rollout is never executed
        for _ in range(i + 1):  # episodes of 1, 2, 3 steps (as if they ended early)
            a = ctrl.act(_obs(rng), {})
            assert a.shape == (1, 7) and np.abs(a).max() <= 1.0
    assert rollouts.mask.sum(1).tolist() == [1, 2, 3, 0]
    mask, old = rollouts.mask.clone(), rollouts.old_log_probs.clone()
    new = policy.log_probs(rollouts)
    assert new.shape == (4, 4) and new.requires_grad
    # log_probs reads the rollouts and writes nothing: twice gives the same, the mask and old log-probs stay
    assert torch.equal(policy.log_probs(rollouts).detach(), new.detach())
    assert torch.equal(rollouts.mask, mask) and torch.equal(rollouts.old_log_probs, old)
    m = rollouts.mask
    assert torch.allclose(new.detach() * m, rollouts.old_log_probs * m, atol=1e-4)
    assert (rollouts.old_log_probs[m > 0] < 0).all() and (new.detach()[m == 0] == 0).all()
    # at temperature 1 the batched re-scoring agrees with the loader's own per-sample log_prob
    from wmrl_libero.policies.vla_interface import VLAInput

    ctrl = rollouts.solutions[2]
    x = VLAInput(INSTRUCTION, _obs(np.random.default_rng(1))["proprio"])
    actions = torch.as_tensor(policy.vla.actions.decode(ctrl.tokens[0].numpy()), dtype=torch.float32)[None, None]
    batched = policy.vla.token_log_probs([policy.vla._prompt_ids(x)], ctrl.tokens[0][None])
    assert batched.item() == pytest.approx(policy.vla.log_prob([x], actions).item(), abs=1e-4)
    # the same global seed gives the same tokens on the same observations
    torch.manual_seed(0)
    again = policy.generate(tasks, group_size=2).solutions[0]
    again.act(_obs(np.random.default_rng(0)), {})
    assert torch.equal(again.tokens[0], rollouts.solutions[0].tokens[0])


def test_registered_policy_on_real_episodes_and_one_grpo_step(model_dir):
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_libero.environment import LiberoEnvironment

    env = LiberoEnvironment("libero_10", task_indices=[0], max_episode_steps=3)  # physics only, 3 steps
    try:
        torch.manual_seed(0)
        policy = _make_policy(env, model_dir, use_proprio=True)
        assert policy.max_steps == 3  # the environment's episode limit
        check_environment(env)
        check_policy(policy)
        rollouts = policy.generate(env.tasks("train")[:1], group_size=2)
        check_rollouts(rollouts, n_tasks=1, group_size=2)
        outcomes = env.execute(rollouts.tasks, rollouts.solutions)
        assert [o.status for o in outcomes] == ["ok", "ok"] and all(o.score in (0.0, 1.0) for o in outcomes)
        assert rollouts.mask.sum() == 6
        new = policy.log_probs(rollouts)
        assert new.requires_grad and new.shape == (2, 3)
        # same weights: the re-scored log-probs equal the sampling-time ones (GRPO ratio 1)
        assert torch.allclose(new.detach() * rollouts.mask, rollouts.old_log_probs * rollouts.mask, atol=1e-4)

        # one GRPO step (advantages +1/-1: 3-step episodes never succeed) changes the weights
        before = {k: v.clone() for k, v in policy.state_dict().items()}
        adv = torch.tensor([1.0, -1.0])
        loss = grpo_loss(new, rollouts.old_log_probs, adv, rollouts.mask)
        opt = torch.optim.SGD(policy.parameters(), lr=0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
        after = policy.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)
        with torch.no_grad():
            moved = policy.log_probs(rollouts)
        gap = lambda lp: ((lp * rollouts.mask).sum(1) @ adv).item()  # noqa: E731
        assert gap(moved) > gap(new.detach())  # the preferred rollout became more likely
    finally:
        env.close()

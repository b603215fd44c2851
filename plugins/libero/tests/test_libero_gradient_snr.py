"""The gradient signal-to-noise probe's maths, on a tiny small VLA without the simulator."""

import math

import numpy as np
import pytest
import torch

from experiments.libero_grpo.gradient_snr import group_gradients, split_cosines


def _obs(n, seed):
    rng = np.random.default_rng(seed)
    return [{"proprio": rng.normal(size=16).astype(np.float32), "object_state": rng.normal(size=4)} for _ in range(n)]


def _rollouts(policy, groups, size):
    from wmrl_core.types import Task

    rollouts = policy.generate([Task(id=f"t{g}", description="open it") for g in range(groups)], size)
    for i, ctrl in enumerate(rollouts.solutions):
        for o in _obs(6, i):
            ctrl.act(o, {})
    return rollouts


def test_group_gradients_sum_to_the_batch_grpo_gradient_and_all_equal_groups_give_none():
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.grpo import aggregate, group_advantages

    torch.manual_seed(0)
    policy = SmallVLAPolicy(max_steps=6, chunk=3, object_dim=4, hidden=16, probe_size=0)
    rollouts = _rollouts(policy, groups=3, size=2)
    rewards = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 1.0])  # group 1 all equal
    grads = group_gradients(policy, rollouts, rewards)
    assert grads[1] == {"network": None, "log_std": None}

    policy.zero_grad()  # the whole batch at once: -sequence_mean(A * log pi), ratio 1
    adv = torch.as_tensor(group_advantages(rewards, rollouts.group_ids), dtype=torch.float32)
    loss = aggregate(-adv[:, None] * policy.log_probs(rollouts), rollouts.mask, "sequence_mean")
    loss.backward()
    summed = grads[0]["log_std"] + grads[2]["log_std"]
    assert torch.allclose(summed, policy.model.log_std.grad, atol=1e-6)


def test_split_cosines_read_a_known_signal_to_noise_ratio():
    """Per-group gradients mu + noise with |mu|^2 = 1 and tr(Sigma) = 16 x 0.25 = 4: at n = 16 groups a
    half, SNR = n |mu|^2 / tr(Sigma) = 4, so E[cos] ~ 4 / 5 = 0.8."""
    rng = np.random.default_rng(0)
    mu = np.zeros(16)
    mu[0] = 1.0
    grads = [{"v": torch.as_tensor(mu + rng.normal(0, 0.5, 16), dtype=torch.float32)} for _ in range(32)]
    out = split_cosines(grads, "v", splits=400, seed=1)
    assert out["cosine"] == pytest.approx(0.8, abs=0.08)
    assert out["snr_at_half"] == pytest.approx(4.0, rel=0.5)
    assert out["groups_per_half_for_cos_0.5"] == pytest.approx(16 / out["snr_at_half"])
    nothing = split_cosines([{"v": None}] * 4, "v", splits=5, seed=0)
    assert math.isnan(nothing["cosine"]) and math.isnan(nothing["groups_per_half_for_cos_0.5"])

import math

import numpy as np
import pytest
import torch

from wmrl_core.grpo import (
    aggregate,
    clipped_surrogate,
    group_advantages,
    grpo_loss,
    informative_rows,
    kl_k3,
    minibatch_rows,
)


def test_group_advantages_hand_computed():
    # group 0: rewards 1, 3 -> mean 2, population std 1 -> advantages -1, +1
    # group 1: rewards 0, 0, 3 -> mean 1, std sqrt(2) -> (-1, -1, 2) / sqrt(2)
    adv = group_advantages([1.0, 3.0, 0.0, 0.0, 3.0], [0, 0, 1, 1, 1], eps=0.0)
    s2 = math.sqrt(2)
    np.testing.assert_allclose(adv, [-1, 1, -1 / s2, -1 / s2, 2 / s2], rtol=1e-12)


def test_zero_spread_group_gives_zero_not_nan():
    adv = group_advantages([0.5, 0.5, 0.5, 1.0, 2.0], [0, 0, 0, 1, 1])
    assert np.all(np.isfinite(adv))
    np.testing.assert_array_equal(adv[:3], 0.0)


def test_nan_rewards_are_left_out_and_get_zero():
    adv = group_advantages([1.0, np.nan, 3.0], [0, 0, 0], eps=0.0)
    np.testing.assert_allclose(adv, [-1.0, 0.0, 1.0])


def test_a_spread_within_eps_is_rounding_and_gets_zero_scaled_or_not():
    for scale in (True, False):
        np.testing.assert_array_equal(group_advantages([0.0, 1e-6], [0, 0], scale=scale), [0.0, 0.0])
    np.testing.assert_allclose(group_advantages([0.0, 4e-6], [0, 0]), [-2 / 3, 2 / 3])  # 2e-6 / (2e-6 + 1e-6)
    np.testing.assert_allclose(group_advantages([0.0, 4e-6], [0, 0], scale=False), [-2e-6, 2e-6])


def test_clipped_surrogate_and_entropy_bonus_refuse_nan_settings():
    from wmrl_core.grpo import entropy_bonus

    x = torch.zeros(1, 2)
    for eps in (0.0, float("nan")):
        with pytest.raises(ValueError, match="clip_eps must be > 0"):
            clipped_surrogate(x, x, torch.ones(1), clip_eps=eps)
    for coef in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="entropy coefficient must be >= 0"):
            entropy_bonus(x, torch.ones(1, 2), coef, "token_mean")


def test_unscaled_advantages_are_centered_only():
    np.testing.assert_allclose(group_advantages([1.0, 3.0], [0, 0], scale=False), [-1.0, 1.0])


def test_group_advantages_rejects_shape_mismatch():
    with pytest.raises(ValueError, match="equal length"):
        group_advantages([1.0, 2.0], [0])


def test_clipped_surrogate_hand_computed():
    lp = torch.log(torch.tensor([[1.5], [0.5], [1.1]]))
    old = torch.zeros(3, 1)
    adv = torch.tensor([1.0, -1.0, -2.0])
    # ratio 1.5, A=+1: min(1.5, 1.2) = 1.2 -> loss -1.2
    # ratio 0.5, A=-1: min(-0.5, -0.8) = -0.8 -> loss 0.8
    # ratio 1.1, A=-2: min(-2.2, -2.2) -> loss 2.2
    out = clipped_surrogate(lp, old, adv, clip_eps=0.2)
    torch.testing.assert_close(out, torch.tensor([[-1.2], [0.8], [2.2]]))


def test_clipped_surrogate_gradient_vanishes_when_clipped():
    lp = torch.log(torch.tensor([[1.5]])).requires_grad_()
    clipped_surrogate(lp, torch.zeros(1, 1), torch.tensor([1.0]), 0.2).sum().backward()
    assert lp.grad.item() == 0.0


def test_kl_k3_zero_at_equality_and_positive_else():
    lp = torch.tensor([[-1.0, -2.0]])
    torch.testing.assert_close(kl_k3(lp, lp), torch.zeros(1, 2))
    ref = torch.tensor([[-1.5, -1.0]])
    d = ref - lp
    torch.testing.assert_close(kl_k3(lp, ref), torch.exp(d) - d - 1)
    assert (kl_k3(lp, ref) > 0).all()


def test_aggregation_token_vs_sequence_mean():
    per_token = torch.tensor([[1.0, 1.0, 1.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert aggregate(per_token, mask, "token_mean").item() == pytest.approx((3 + 4) / 4)
    assert aggregate(per_token, mask, "sequence_mean").item() == pytest.approx((1 + 4) / 2)
    assert aggregate(per_token, torch.zeros_like(mask), "sequence_mean").item() == 0.0
    with pytest.raises(ValueError, match="token_mean"):
        aggregate(per_token, mask, "bogus")


def test_grpo_loss_adds_kl_and_requires_reference():
    lp = torch.tensor([[-1.0]], requires_grad=True)
    with pytest.raises(ValueError, match="ref_log_probs"):
        grpo_loss(lp, lp.detach(), torch.tensor([1.0]), torch.ones(1, 1), kl_coef=0.1)
    ref = torch.tensor([[-2.0]])
    loss = grpo_loss(lp, lp.detach(), torch.tensor([1.0]), torch.ones(1, 1), kl_coef=0.5, ref_log_probs=ref)
    d = -1.0
    assert loss.item() == pytest.approx(-1.0 + 0.5 * (math.exp(d) - d - 1))


def test_minibatches_deal_whole_groups_once_each_in_near_equal_shares():
    group_ids = np.repeat(np.arange(7), 3)  # 7 groups of 3 rollouts
    shares = minibatch_rows(group_ids, 3, seed=(0, 1, 0))
    assert len(shares) == 3
    total = np.sum(shares, axis=0)
    assert np.array_equal(total, np.ones(21))  # every row in exactly one minibatch
    sizes = []
    for rows in shares:
        chosen = set(group_ids[rows > 0])
        assert all(rows[group_ids == g].all() for g in chosen)  # whole groups only
        sizes.append(len(chosen))
    assert sorted(sizes) == [2, 2, 3]
    again = minibatch_rows(group_ids, 3, seed=(0, 1, 0))
    assert all(np.array_equal(a, b) for a, b in zip(shares, again))  # its own generator: reproducible
    other = minibatch_rows(group_ids, 3, seed=(0, 1, 1))
    assert not all(np.array_equal(a, b) for a, b in zip(shares, other))  # a new deal each epoch


def test_one_minibatch_is_the_whole_batch_and_too_many_is_refused():
    assert minibatch_rows(np.array([0, 0, 1, 1]), 1, seed=(0,)) == [None]
    with pytest.raises(ValueError, match="grpo.minibatches=3 must be between 1 and the step's 2 groups"):
        minibatch_rows(np.array([0, 0, 1, 1]), 3, seed=(0,))


def test_informative_rows_are_the_groups_with_a_nonzero_advantage():
    group_ids = np.array([0, 0, 1, 1, 2, 2])
    advantages = np.array([1.0, -1.0, 0.0, 0.0, 0.0, 1e-9])
    assert informative_rows(advantages, group_ids).tolist() == [True, True, False, False, True, True]
    with pytest.raises(ValueError, match="one entry per row"):
        informative_rows(advantages[:4], group_ids)


def test_minibatches_deal_only_kept_groups_and_no_more_minibatches_than_them():
    group_ids = np.repeat(np.arange(4), 2)
    keep = np.isin(group_ids, [1, 3])
    shares = minibatch_rows(group_ids, 3, seed=(0,), keep=keep)
    assert len(shares) == 2  # two kept groups: a minibatch each
    assert np.array_equal(np.sum(shares, axis=0), keep.astype(np.float32))
    (whole,) = minibatch_rows(group_ids, 1, seed=(0,), keep=keep)
    assert np.array_equal(whole, keep.astype(np.float32))  # one minibatch still leaves the others out
    assert minibatch_rows(group_ids, 2, seed=(0,), keep=np.zeros(8, bool)) == []
    assert minibatch_rows(group_ids, 1, seed=(0,), keep=np.ones(8, bool)) == [None]

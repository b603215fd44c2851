"""``fusion.method=anchors_only``: the anchors' real advantages alone, the world model unused.

Hand-made inputs: its plan weighs the anchor rows by 1 and the world-model rows by 0, so the
effective advantages and the GRPO gradient are those of GRPO on the anchor groups alone, and no
change of the world-model rewards (raw or calibrated) changes them.
"""

import numpy as np
import torch

from wmrl_core.calibration import RewardCalibrator
from wmrl_core.config import FusionConfig
from wmrl_core.fusion import (
    AnchorsOnlyFuser,
    FusionInputs,
    FusionSettings,
    build_fuser,
    effective_advantages,
    fuse_step,
    fused_loss,
    registered_fusers,
)
from wmrl_core.grpo import group_advantages

GROUPS = np.array([0, 0, 1, 1, 2, 2])
ANCHOR_GROUPS = np.array([True, False, False])
IS_ANCHOR = ANCHOR_GROUPS[GROUPS]
TOKENS = np.array([2, 1, 3, 1, 2, 2])


def _inputs(world_model: np.ndarray) -> FusionInputs:
    real = np.array([1.0, 0.0, np.nan, np.nan, np.nan, np.nan])
    rewards = np.where(IS_ANCHOR, real, world_model)
    return FusionInputs(
        advantages=group_advantages(rewards, GROUPS),
        calibrated_advantages=group_advantages(world_model, GROUPS),
        is_anchor=IS_ANCHOR,
        group_ids=GROUPS,
        anchor_share=1 / 3,
        n_real=2,
        n_world_model=4,
        pairs=(np.zeros(0), np.zeros(0), np.zeros(0)),
        calibrated=True,
    )


def test_the_plan_is_the_anchor_rows_by_one_and_the_world_model_rows_by_zero():
    plan = AnchorsOnlyFuser().plan(_inputs(np.array([np.nan, np.nan, 0.9, 0.1, 0.3, 0.7])))
    assert [t.coef for t in plan.terms] == [1.0, 0.0]
    np.testing.assert_array_equal(plan.terms[0].rows, IS_ANCHOR)
    np.testing.assert_array_equal(plan.terms[1].rows, ~IS_ANCHOR)
    assert (plan.w_real, plan.w_world_model, plan.lam, plan.n_effective) == (1.0, 0.0, 0.0, 2.0)
    # token_mean: Z_all = 11, Z_A = 3, so the anchors' advantages +-1 become +-11/3; the rest 0
    adv, weight = effective_advantages(plan.terms, TOKENS, "token_mean")
    np.testing.assert_allclose(adv, [11 / 3, -11 / 3, 0, 0, 0, 0], rtol=1e-5)  # sigma + eps
    np.testing.assert_allclose(weight, [11 / 3, 11 / 3, 0, 0, 0, 0])


def test_it_learns_nothing_and_is_in_the_table():
    fuser = build_fuser("anchors_only", FusionConfig(method="anchors_only"))
    assert isinstance(fuser, AnchorsOnlyFuser) and fuser.state_dict() == {}
    fuser.fit(_inputs(np.zeros(6)))
    assert fuser.state_dict() == {}
    assert registered_fusers().get("anchors_only").needs_anchors_every_step


def test_the_gradient_does_not_move_with_the_world_model_rewards():
    """Through the engine (calibrated by earlier anchors) and the GRPO loss of a softmax over
    three tokens: two different world models give the same advantages and the same gradient."""
    torch.manual_seed(0)
    theta = torch.randn(6, 3, dtype=torch.float64)
    chosen = torch.tensor([0, 1, 2, 0, 1, 2])
    mask = torch.ones(6, 1, dtype=torch.float64)
    real = np.array([1.0, 0.0, np.nan, np.nan, np.nan, np.nan])
    calibrator = RewardCalibrator()
    calibrator.update(np.array([0.2, 0.8, 0.5]), np.array([0.0, 1.0, 0.4]), np.array([10, 10, 11]))
    grads, advantages = [], []
    for world_model in (np.array([0.1, 0.9, 0.9, 0.1, 0.3, 0.7]), np.array([5.0, -3.0, -2.0, 8.0, 0.0, 1.0])):
        fused = fuse_step(
            world_model_rewards=world_model,
            real_rewards=real,
            group_ids=GROUPS,
            anchor_groups=ANCHOR_GROUPS,
            token_counts=mask.sum(-1).numpy(),
            calibrator=calibrator,
            fuser=AnchorsOnlyFuser(),
            settings=FusionSettings(),
            step=3,
        )
        assert fused.record["fusion/w_world_model"] == 0.0
        for on_policy in (True, False):
            p = theta.clone().requires_grad_(True)
            log_probs = torch.log_softmax(p, -1).gather(1, chosen[:, None])
            loss = fused_loss(fused, log_probs, log_probs.detach(), mask, on_policy=on_policy, clip_eps=0.2)
            (g,) = torch.autograd.grad(loss, p)
            grads.append(g)
        advantages.append(fused.advantages)
    np.testing.assert_array_equal(advantages[0], advantages[1])
    assert grads[0].abs().max() > 1e-3  # the anchors do move the policy
    torch.testing.assert_close(grads[0], grads[2], rtol=0, atol=0)
    torch.testing.assert_close(grads[1], grads[3], rtol=0, atol=0)
    assert grads[0][2:].abs().max() == 0  # no row outside the anchors gets a gradient

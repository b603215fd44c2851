import numpy as np
import pytest
import torch

from wmrl_core.grpo import grpo_loss
from wmrl_core.rectified import (
    RectifiedFuser,
    effective_real_samples,
    power_tuned_lambda,
    rectified_loss,
    variance_ratio,
)


def test_power_tuned_lambda_hand_computed_and_clipped():
    assert power_tuned_lambda(2.0, 4.0) == pytest.approx(0.5)
    assert power_tuned_lambda(-1.0, 4.0) == 0.0  # the world model points the wrong way
    assert power_tuned_lambda(9.0, 4.0) == 1.0
    assert power_tuned_lambda(1.0, 0.0) == 0.0  # all calibrated advantages zero
    assert power_tuned_lambda(float("nan"), 1.0) == 0.0


def test_variance_ratio_hand_computed():
    # mu = 0.5 * 0.75 = 0.375; 1 - (2 * 0.375 * 0.8 - 0.375^2 * 1 / 0.75) / 1 = 1 - (0.6 - 0.1875)
    assert variance_ratio(0.5, 0.25, 1.0, 0.8, 1.0) == pytest.approx(0.5875)
    assert variance_ratio(0.0, 0.1, 2.0, 1.0, 1.0) == 1.0
    # at lambda* = m_rc / m_cc the ratio is 1 - rho^2 (1 - k/B)
    assert variance_ratio(0.6, 0.2, 1.0, 0.6, 1.0) == pytest.approx(1 - 0.36 * 0.8)
    assert np.isnan(variance_ratio(0.5, 0.2, 0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="anchor_share"):
        variance_ratio(0.5, 0.0, 1.0, 0.5, 1.0)


def test_effective_real_samples():
    assert effective_real_samples(16, 0.6, 0.2, 1.0, 0.6, 1.0) == pytest.approx(16 / (1 - 0.36 * 0.8))
    assert effective_real_samples(16, 0.0, 0.2, 1.0, 0.6, 1.0) == pytest.approx(16)


def test_rectified_estimator_is_unbiased_for_a_biased_world_model_and_power_tuning_cuts_variance():
    # per-group gradient contributions (2-D): calibrated = real + a fixed bias + noise
    rng = np.random.default_rng(0)
    B, k, reps = 20, 4, 8000
    bias = np.array([0.5, -0.3])
    estimates = {0.0: [], 0.7: [], 1.0: []}
    for _ in range(reps):
        h_r = rng.normal([1.0, 2.0], 1.0, size=(B, 2))
        h_c = h_r + bias + rng.normal(0, 0.3, size=(B, 2))
        anchors = rng.choice(B, size=k, replace=False)
        for lam in estimates:
            estimates[lam].append(
                float(rectified_loss(h_r[anchors].mean(0), h_c.mean(0), h_c[anchors].mean(0), lam)[0])
            )
    for lam, values in estimates.items():
        assert np.mean(values) == pytest.approx(1.0, abs=0.03), lam  # the truth, not 1.5
    var = {lam: np.var(v) for lam, v in estimates.items()}
    # lambda* = cov / var = 1 / 1.09 ~ 0.92: both 0.7 and 1.0 beat plain anchors, by the formula
    rho2 = 1 / 1.09
    assert var[1.0] / var[0.0] == pytest.approx(variance_ratio(1.0, k / B, 1.0, 1.0, 1.09), rel=0.08)
    assert var[0.7] / var[0.0] < 1 - 0.5 * rho2 * (1 - k / B)


def test_rectified_loss_gradient_is_the_hand_computed_per_rollout_combination():
    # one token per rollout, ratio 1: d grpo_loss / d log pi_i = -A_i / |rows|
    adv_r = torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0, 0.0])
    adv_c = torch.tensor([0.5, -0.5, 1.0, -1.0, 2.0, -2.0])
    anchor = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0]).unsqueeze(-1)
    mask = torch.ones(6, 1)
    log_probs = torch.zeros(6, 1, requires_grad=True)
    old = torch.zeros(6, 1)
    lam = 0.4
    loss = rectified_loss(
        grpo_loss(log_probs, old, adv_r, mask * anchor),
        grpo_loss(log_probs, old, adv_c, mask),
        grpo_loss(log_probs, old, adv_c, mask * anchor),
        lam,
    )
    loss.backward()
    expected = -(anchor.squeeze() * adv_r / 2 + lam * (adv_c / 6 - anchor.squeeze() * adv_c / 2))
    torch.testing.assert_close(log_probs.grad.squeeze(), expected)


def test_fuser_uses_only_earlier_steps_within_its_window_and_roundtrips():
    f = RectifiedFuser(window=2)
    assert f.lam() == 0.0 and f.effective_samples(16, 0.1) == 16
    f.update(np.array([1.0, -1.0]), np.array([1.0, -1.0]))  # slope 1
    assert f.lam() == pytest.approx(1.0)
    f.update(np.array([1.0, -1.0]), np.array([-1.0, 1.0]))  # slope -1: pooled 0
    assert f.lam() == 0.0
    f.update(np.array([1.0, -1.0, np.nan]), np.array([2.0, -2.0, 1.0]))  # first step leaves the window
    # window: step 2 (rc -2, cc 2) + step 3 (rc 4, cc 8) -> 2 / 10
    assert f.lam() == pytest.approx(0.2)
    g = RectifiedFuser()
    g.load_state_dict(f.state_dict())
    assert g.lam() == f.lam() and g.window == 2
    with pytest.raises(ValueError, match="window"):
        RectifiedFuser(window=0)
    with pytest.raises(ValueError, match="equal length"):
        f.update(np.zeros(2), np.zeros(3))

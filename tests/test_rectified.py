import numpy as np
import pytest
import torch

from wmrl_core.fusion.rectified import (
    RectifiedFuser,
    effective_real_samples,
    permutation_null_variance,
    power_tuned_lambda,
    rectified_loss,
    shrunk_lambda,
    slope_variance,
    solution_keys,
    solution_moments,
    variance_ratio,
)
from wmrl_core.grpo import grpo_loss


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


def test_fuser_window_counts_informative_groups_and_roundtrips():
    f = RectifiedFuser(window=2, level=None)  # the plain James-Stein factor: the arithmetic by hand
    assert f.lam() == 0.0 and f.effective_samples(16, 0.1) == 16
    # step 1, two groups: (r_g, c_g) = (2, 2) and (4, 8): slope 6/10, Var = 2/1 * (0.8^2 + 0.8^2) / 10^2
    f.update(np.array([1.0, -1.0, 1.0, -1.0]), np.array([1.0, -1.0, 2.0, -2.0]), groups=np.array([0, 0, 1, 1]))
    assert f.slope() == pytest.approx((0.6, 0.0256))
    assert f.lam() == pytest.approx(0.6 * (1 - 0.0256 / 0.36))
    # step 2: a group whose calibrated advantages are all zero says nothing about lambda
    f.update(np.array([1.0, -1.0]), np.array([0.0, 0.0]), groups=np.zeros(2))
    assert f.slope() == pytest.approx((0.6, 0.0256)) and f.moments()[3] == 6
    # step 3: a third informative group (-2, 2) pushes the oldest, (2, 2), out of the window
    f.update(np.array([1.0, -1.0, np.nan]), np.array([-1.0, 1.0, 1.0]), groups=np.zeros(3))
    # (4, 8) and (-2, 2): slope 2/10, Var = 2 * (2.4^2 + 2.4^2) / 100 > 0.2^2: shrunk to 0
    assert f.slope() == pytest.approx((0.2, 0.2304))
    assert f.lam() == 0.0 and f.moments()[3] == 6
    g = RectifiedFuser(level=None)
    g.load_state_dict(f.state_dict())
    assert g.slope() == f.slope() and g.window == 2
    old = RectifiedFuser()  # a checkpoint from before: a window of per-step sums
    old.load_state_dict({"window": 10, "steps": [[2.0, 2.0, 2.0, 2], [2.0, 4.0, 8.0, 2]]})
    assert old.slope()[0] == pytest.approx(0.6) and old.window == 10
    with pytest.raises(ValueError, match="window"):
        RectifiedFuser(window=1)
    with pytest.raises(ValueError, match="equal length"):
        f.update(np.zeros(2), np.zeros(3))


def test_solution_moments_sum_duplicates_before_the_products():
    # group 0: rollouts 0, 1 share a solution (key 0), rollout 2 another; group 1: all distinct
    a_r = np.array([1.0, 0.5, -1.5, 1.0, -1.0])
    a_c = np.array([0.2, 0.6, -0.8, 2.0, -2.0])
    keys = np.array([0, 0, 1, 2, 3])
    # S^R = (1.5, -1.5, 1, -1), S^C = (0.8, -0.8, 2, -2)
    rr, rc, cc = solution_moments(a_r, a_c, keys)
    assert rr == pytest.approx(2.25 * 2 + 2)
    assert rc == pytest.approx(1.2 * 2 + 4)
    assert cc == pytest.approx(0.64 * 2 + 8)
    # distinct keys: the per-rollout sums
    rr, rc, cc = solution_moments(a_r, a_c, np.arange(5))
    assert (rr, rc, cc) == pytest.approx((a_r @ a_r, a_r @ a_c, a_c @ a_c))
    with pytest.raises(ValueError, match="equal length"):
        solution_moments(a_r, a_c, np.arange(4))


def test_solution_moments_are_the_exact_gradient_moments_of_a_tabular_softmax():
    # h_g = (1/G) sum_i A_i (e_{y_i} - pi): sum_g h^R_g . h^C_g = G^-2 sum S^R S^C, whatever pi is
    rng = np.random.default_rng(1)
    G, arms = 8, 5
    pi = rng.dirichlet(np.ones(arms))
    y = rng.choice(arms, size=G, p=pi)
    a_r, a_c = rng.normal(size=G), rng.normal(size=G)
    a_r, a_c = a_r - a_r.mean(), a_c - a_c.mean()  # GRPO advantages sum to 0 in a group
    scores = np.eye(arms)[y] - pi
    h_r, h_c = a_r @ scores / G, a_c @ scores / G
    rr, rc, cc = solution_moments(a_r, a_c, solution_keys(np.zeros(G), y.tolist()))
    assert (rr / G**2, rc / G**2, cc / G**2) == pytest.approx((h_r @ h_r, h_r @ h_c, h_c @ h_c))


def test_a_concentrated_policy_pulls_the_per_rollout_lambda_towards_zero_but_not_the_solution_one():
    # 7 rollouts repeat the best arm (real noise vs independent calibrated noise), 1 is a worse arm
    # that both rewards rank last: the gradient is all in that one comparison
    rng = np.random.default_rng(2)
    fuser_solution, fuser_rollout = RectifiedFuser(window=100), RectifiedFuser(window=100)
    for _ in range(50):
        r = np.r_[0.9 + 0.1 * rng.normal(size=7), 0.3]
        c = np.r_[0.8 + 0.1 * rng.normal(size=7), 0.6]
        a_r, a_c = (r - r.mean()) / r.std(), (c - c.mean()) / c.std()
        keys = solution_keys(np.zeros(8), [0] * 7 + [1])
        fuser_solution.update(a_r, a_c, keys)
        fuser_rollout.update(a_r, a_c)
    assert fuser_solution.lam() > 0.7
    assert fuser_rollout.lam() < fuser_solution.lam() - 0.15


def test_solution_keys():
    keys = solution_keys(np.array([0, 0, 0, 1, 1]), [3, 3, 4, 3, 3])
    assert keys[0] == keys[1] != keys[2] and keys[3] == keys[4] != keys[0]  # same solution, other group
    arrays = [np.array([1.0, 2.0]), np.array([1.0, 2.0]), np.array([2.0, 1.0])]
    keys = solution_keys(np.zeros(3), arrays)
    assert keys[0] == keys[1] != keys[2]
    assert solution_keys(np.zeros(2), [[1], [1]]).tolist() == [0, 1]  # unhashable: never merged
    with pytest.raises(ValueError, match="solutions"):
        solution_keys(np.zeros(3), [1, 2])


def test_slope_variance_and_shrunk_lambda_hand_computed():
    # groups (r_g, c_g) = (1, 2), (3, 2): slope 4/4 = 1, Var = 2/1 * ((1-2)^2 + (3-2)^2) / 16 = 1/4
    assert slope_variance(4.0, 1.0 + 9.0, 2.0 + 6.0, 8.0, 1.0, n_groups=2) == pytest.approx(0.25)
    assert slope_variance(2.0, 1.0, 2.0, 4.0, 0.5, n_groups=1) == float("inf")  # one group: no evidence
    assert np.isnan(slope_variance(0.0, 1.0, 1.0, 1.0, 0.5, n_groups=3))
    assert shrunk_lambda(0.6, 0.04) == pytest.approx(0.6 * (1 - 0.04 / 0.36))  # t = 3: keeps 8/9
    assert shrunk_lambda(0.2, 0.04) == pytest.approx(0.0, abs=1e-12)  # t = 1
    assert shrunk_lambda(0.2, 0.05) == 0.0  # t < 1
    assert shrunk_lambda(2.0, 0.04) == 1.0 and shrunk_lambda(-0.6, 0.01) == 0.0  # clipped
    assert shrunk_lambda(0.5, float("nan")) == 0.0 and shrunk_lambda(0.5, float("inf")) == 0.0
    assert shrunk_lambda(0.0, 0.1) == 0.0


def test_the_critical_value_scales_the_variance():
    """lambda_hat = 0.5, Var = 0.01 (t = 5): q = 3.09 keeps 1 - 3.09^2 / 25 of it; q = 1 is the plain factor."""
    assert shrunk_lambda(0.5, 0.01, q=3.09) == pytest.approx(0.5 * (1 - 3.09**2 * 0.04))
    assert shrunk_lambda(0.5, 0.01, q=6.0) == 0.0
    assert shrunk_lambda(0.5, 0.01) == pytest.approx(0.5 * (1 - 0.04))


def test_permutation_null_variance_is_the_variance_over_all_permutations():
    import itertools

    assert permutation_null_variance(np.array([1.0, -1.0]), np.array([2.0, -2.0])) == pytest.approx(16.0)
    a, b = np.array([2.0, 0.5, -1.0]), np.array([1.0, 0.0, -1.0])
    values = [float(a @ b[list(p)]) for p in itertools.permutations(range(3))]
    assert permutation_null_variance(a, b) == pytest.approx(np.var(values))
    assert permutation_null_variance(np.array([1.0]), np.array([0.0])) == 0.0


def test_a_window_of_two_groups_whose_sandwich_collapses_is_judged_by_its_null_variance():
    """Two groups with r_g = c_g exactly: slope 1, sandwich variance 0, so the plain factor keeps
    lambda = 1; against the null variance (4 + 4) / 4^2 = 0.5 the slope is 1.41 standard errors
    from 0, below q = 3.09: no weight. With 20 such groups the null variance is 0.05 (t = 4.5)."""
    f = RectifiedFuser(window=20)
    for _ in range(2):
        f.update(np.array([1.0, -1.0]), np.array([2.0, -2.0]) / 2, groups=np.zeros(2))  # r_g = 2, c_g = 2
    lam_hat, var = f.slope()
    assert (lam_hat, var) == (pytest.approx(1.0), pytest.approx(0.0))
    assert f.null_variance() == pytest.approx((4.0 + 4.0) / 4.0**2)  # V_g = 2 * 2 / 1 = 4 each
    assert f.lam() == 0.0 and RectifiedFuser(window=20, level=None).lam() == 0.0  # empty window
    plain = RectifiedFuser(window=20, level=None)
    plain.load_state_dict(f.state_dict())
    assert plain.lam() == pytest.approx(1.0)
    # many agreeing groups: the null variance shrinks as 1/m and the slope survives
    for _ in range(18):
        f.update(np.array([1.0, -1.0]), np.array([2.0, -2.0]) / 2, groups=np.zeros(2))
    assert f.null_variance() == pytest.approx(20 * 4.0 / (20 * 2.0) ** 2)  # 0.05
    assert f.lam() == pytest.approx(1.0)  # significant; its sandwich variance is 0: nothing to shrink


def test_an_independent_world_model_gets_lambda_near_zero_once_the_policy_repeats_itself():
    # 7 rollouts repeat the best arm, 1 is worse; the calibrated rewards are noise: the clipped raw
    # slope of 10 such steps (2 groups each) is often well above 0, the shrunk one is 0 unless the slope is more than one standard error from 0
    rng = np.random.default_rng(3)
    raw, shrunk = [], []
    for _ in range(200):
        fuser = RectifiedFuser(window=20)
        for _ in range(10):
            rows = []
            for _ in range(2):
                r = np.r_[0.9 + 0.1 * rng.normal(size=7), 0.3]
                c = rng.normal(size=8)
                rows.append(((r - r.mean()) / r.std(), (c - c.mean()) / c.std()))
            a_r, a_c = (np.concatenate(x) for x in zip(*rows))
            keys = solution_keys(np.repeat([0, 1], 8), ([0] * 7 + [1]) * 2)
            fuser.update(a_r, a_c, keys, np.repeat([0, 1], 8))
        raw.append(power_tuned_lambda(*fuser.slope()[:1], 1.0))
        shrunk.append(fuser.lam())
    # measured: 0.22 raw, 0.07 shrunk (0 in 82% of windows: a slope within one standard error of 0)
    assert np.mean(raw) > 0.15
    assert np.mean(shrunk) < min(0.1, np.mean(raw) / 2)

import numpy as np
import pytest

from wmrl_core.fusion import (
    InverseVarianceFuser,
    cross_fitted_calibration,
    explained_within_group_variance,
    inverse_variance_weights,
)


def _anchor_pairs(rng, quality, n_groups=40, g=8):
    groups = np.repeat(np.arange(n_groups), g)
    real = rng.uniform(0, 1, groups.size)
    if quality == "perfect":
        wm = np.exp(3 * (real - 1))  # monotone transform: perfect after calibration
    else:
        wm = rng.uniform(0, 1, groups.size)  # independent of the truth
    return wm, real, groups


def test_weights_hand_computed():
    w_r, w_w = inverse_variance_weights(16, 144, 0.5, eps=0.0)
    assert w_r == pytest.approx(16 / (16 + 72))
    assert w_w == pytest.approx(72 / 88)


def test_perfect_world_model_gets_its_share_of_samples():
    fuser = InverseVarianceFuser()
    wm, real, groups = _anchor_pairs(np.random.default_rng(0), "perfect")
    rho2 = fuser.estimate_rho2(wm, real, groups)
    assert rho2 > 0.97
    w = fuser.weights(16, 144, rho2)
    assert w.w_world_model == pytest.approx(144 / 160, abs=0.01)


def test_independent_world_model_weight_goes_to_zero():
    fuser = InverseVarianceFuser()
    wm, real, groups = _anchor_pairs(np.random.default_rng(1), "independent", n_groups=100)
    rho2 = fuser.estimate_rho2(wm, real, groups)
    w = fuser.weights(16, 144, rho2)
    assert rho2 < 0.02
    assert w.w_world_model < 0.1


def test_weights_finite_and_sum_to_one_including_degenerate_cases():
    for n_r, n_w, rho2 in [(0, 0, 0.0), (0, 100, 0.0), (0, 100, 1.0), (8, 0, 1.0), (8, 72, np.nan), (5, 5, 7.0)]:
        w_r, w_w = inverse_variance_weights(n_r, n_w, rho2)
        assert np.isfinite([w_r, w_w]).all()
        assert w_r + w_w == pytest.approx(1.0)
        assert 0.0 <= w_r <= 1.0
    # no evidence at all: the real stream keeps all the weight
    assert inverse_variance_weights(0, 0, 0.0)[0] == pytest.approx(1.0)


def test_rho2_zero_without_spread_or_pairs():
    assert explained_within_group_variance(np.ones(8), np.ones(8), np.zeros(8)) == 0.0
    assert InverseVarianceFuser(min_pairs=4).estimate_rho2(np.ones(3), np.ones(3), np.zeros(3)) == 0.0


def test_rho2_hand_computed():
    real = np.array([0.0, 1.0, 2.0, 1.0, 2.0, 3.0])
    cal = np.array([0.0, 2.0, 1.0, 10.0, 20.0, 30.0])
    groups = np.array([0, 0, 0, 1, 1, 1])
    # z-scores: group 0 real (-a, 0, a), cal (-a, a, 0), a = sqrt(1.5): sum z_r z_c = 1.5;
    # group 1 identical z: 3. Sum z^2 = 6 per stream -> corr 4.5 / 6 = 0.75
    assert explained_within_group_variance(real, cal, groups) == pytest.approx(0.75**2)


def test_rho2_is_scale_free_and_ignores_backward_rankings():
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(30), 8)
    real = rng.uniform(0, 1, groups.size)
    raw = np.exp(3 * (real - 1)) * 0.01  # monotone, on another scale: no fitted slope would read 0
    assert explained_within_group_variance(real, raw, groups) > 0.9
    scaled = raw * (1 + groups)  # a different scale in every group
    assert explained_within_group_variance(real, scaled, groups) == pytest.approx(
        explained_within_group_variance(real, raw, groups)
    )
    assert explained_within_group_variance(real, -raw, groups) == 0.0
    tied = np.where(groups % 2 == 0, 0.5, raw)  # half the groups tied: they explain nothing
    assert explained_within_group_variance(real, tied, groups) < 0.6


def test_cross_fitting_uses_other_folds_only():
    wm = np.array([0.0, 1.0, 0.0, 1.0])
    real = np.array([0.0, 1.0, 10.0, 11.0])
    groups = np.array([0, 0, 1, 1])
    out = cross_fitted_calibration(wm, real, groups)
    np.testing.assert_allclose(out, [10.0, 11.0, 0.0, 1.0])
    np.testing.assert_allclose(cross_fitted_calibration(wm[:2], real[:2], groups[:2]), wm[:2])


def test_bad_input():
    with pytest.raises(ValueError):
        inverse_variance_weights(-1, 1, 0.5)
    with pytest.raises(ValueError):
        InverseVarianceFuser(eps=0.0)

"""MSE-weighted fusion (wmrl_core/fusion/mse.py), the ``ranked`` calibrator and the calibrated
stream on the real rewards' scale (wmrl_core/fusion/engine.py): hand-computed cases."""

import numpy as np
import pytest
import torch

from wmrl_core.calibration import RewardCalibrator, ranked_isotonic
from wmrl_core.fusion import FusionSettings, fuse_step
from wmrl_core.fusion.engine import calibrated_advantages, tied_group_share
from wmrl_core.fusion.mse import MSEWeightedFuser, MSEWeightedSettings, convex_mse, mse_weight
from wmrl_core.fusion.shrinkage import WindowMoments
from wmrl_core.grpo import pooled_within_group_sd


def test_mse_weight_by_hand():
    m = WindowMoments(s_rr=2.0, s_rc=0.0, s_cc=1.0, bias2=0.1, groups=10)
    # k = 2, u = 18: (2/2) / (2/2 + 1/18 + H * 0.1)
    assert mse_weight(m, 2, 18) == pytest.approx(1.0 / (1.0 + 1 / 18 + 0.1))
    assert mse_weight(m, 2, 18, horizon=10) == pytest.approx(1.0 / (1.0 + 1 / 18 + 1.0))
    assert mse_weight(m, 2, 0) == 0.0
    grid = np.linspace(0, 1, 10001)
    best = grid[np.argmin([convex_mse(w, m, 2, 18, horizon=10) for w in grid])]
    assert best == pytest.approx(mse_weight(m, 2, 18, horizon=10), abs=1e-4)


def test_pooled_within_group_sd_by_hand():
    # groups (0, 2) and (1, 1, 4): squares 2 + 6, degrees of freedom 1 + 2
    assert pooled_within_group_sd([0.0, 2.0, 1.0, 1.0, 4.0], [0, 0, 1, 1, 1]) == pytest.approx(np.sqrt(8 / 3))
    assert np.isnan(pooled_within_group_sd([1.0, 2.0], [0, 1]))


def test_calibrated_advantages_on_the_real_scale():
    calibrated, groups = np.array([0.50, 0.51, 0.50, 0.51]), np.array([0, 0, 1, 1])
    own = calibrated_advantages(calibrated, groups, scale=True, real_sd=0.5, advantage_scale="own")
    real = calibrated_advantages(calibrated, groups, scale=True, real_sd=0.5, advantage_scale="real")
    np.testing.assert_allclose(np.abs(own), 1.0, atol=1e-3)  # a nearly flat map re-inflated to unit size
    np.testing.assert_allclose(real, [-0.01, 0.01, -0.01, 0.01])  # centred over the real spread: small
    unknown = calibrated_advantages(calibrated, groups, scale=True, real_sd=float("nan"), advantage_scale="real")
    np.testing.assert_allclose(unknown, own)
    with pytest.raises(ValueError, match="advantage_scale"):
        calibrated_advantages(calibrated, groups, scale=True, real_sd=1.0, advantage_scale="mine")


def test_ranked_calibrator_breaks_ties_by_raw_order_within_groups():
    levels = np.array([0.5, 0.5, 0.5, 0.2, 0.2])
    out = ranked_isotonic(
        levels, np.array([3.0, 1.0, 2.0, 5.0, 4.0]), np.array([0, 0, 0, 1, 1]), slope=0.3, y_scale=1.0
    )
    assert out[1] < out[2] < out[0] and out[4] < out[3]
    np.testing.assert_allclose(out[:3].mean(), 0.5)  # the group's level is kept
    assert np.max(np.abs(out - levels)) <= 0.3 / 2 + 1e-12
    calibrator = RewardCalibrator(calibrator="ranked", slope=0.3)
    calibrator.update(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.0, 0.0, 1.0, 1.0]), np.array([0, 1, 0, 1]))
    scores, groups = np.array([0.10, 0.15, 0.35, 0.40]), np.array([0, 0, 1, 1])
    assert tied_group_share(calibrator.transform(scores, groups), groups, np.ones(4, bool)) == 0.0
    isotonic = RewardCalibrator()
    isotonic.update(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.0, 0.0, 1.0, 1.0]), np.array([0, 1, 0, 1]))
    assert tied_group_share(isotonic.transform(scores), groups, np.ones(4, bool)) == 1.0  # the step function ties both


def _step(fuser, calibrator, rng, *, rho, step, groups=6, size=4, anchors=(0, 1)):
    real = rng.normal(size=groups * size)
    wm = rho * real + np.sqrt(1 - rho**2) * rng.normal(size=real.size)
    group_ids = np.repeat(np.arange(groups), size)
    anchor_groups = np.isin(np.arange(groups), anchors)
    real = np.where(anchor_groups[group_ids], real, np.nan)
    return fuse_step(
        world_model_rewards=wm,
        real_rewards=real,
        group_ids=group_ids,
        anchor_groups=anchor_groups,
        token_counts=np.ones(real.size),
        calibrator=calibrator,
        fuser=fuser,
        settings=FusionSettings(),
        step=step,
    )


def test_the_world_model_has_no_weight_until_the_gate_opens_then_a_useful_one_gets_it():
    rng = np.random.default_rng(0)
    fuser, calibrator = MSEWeightedFuser(), RewardCalibrator()
    weights, opened = [], []
    for step in range(1, 12):
        fused = _step(fuser, calibrator, rng, rho=0.95, step=step)
        fuser, calibrator = fused.fuser, fused.calibrator
        weights.append(fused.record["fusion/w_world_model"])
        opened.append(fused.record["fusion/gate_open"])
    assert weights[0] == 0.0  # no earlier anchors: nothing to weigh by
    assert opened[-1] == 1.0 and weights[-1] > 0.3
    assert all(w == 0.0 for w, o in zip(weights, opened) if not o)


def test_a_pure_noise_world_model_gets_no_weight():
    rng = np.random.default_rng(1)
    fuser, calibrator = MSEWeightedFuser(), RewardCalibrator()
    for step in range(1, 30):
        fused = _step(fuser, calibrator, rng, rho=0.0, step=step)
        fuser, calibrator = fused.fuser, fused.calibrator
        assert fused.record["fusion/w_world_model"] == 0.0
        assert fused.record["fusion/gate_open"] == 0.0


def test_plan_does_not_change_the_fuser_and_fit_keeps_its_gate():
    rng = np.random.default_rng(2)
    fuser, calibrator = MSEWeightedFuser(), RewardCalibrator()
    for step in range(1, 4):
        fused = _step(fuser, calibrator, rng, rho=0.9, step=step)
        fuser, calibrator = fused.fuser, fused.calibrator
    before = fuser.state_dict()
    resumed = MSEWeightedFuser()
    resumed.load_state_dict(before)
    assert resumed.state_dict() == before
    assert before["gate"]["groups"] == 6  # two anchor groups a step, three steps


def test_the_bootstrap_lower_bound_of_rho2_by_hand_and_its_invariances():
    from wmrl_core.fusion.inverse_variance import explained_variance_lower_bound, explained_within_group_variance

    groups = np.repeat(np.arange(8), 4)
    real = np.tile([0.0, 1.0, 2.0, 3.0], 8)
    # every group ranks perfectly: every bootstrap draw has rho^2 = 1
    assert explained_variance_lower_bound(real, 2 * real + 1, groups, 0.05) == pytest.approx(1.0)
    rng = np.random.default_rng(3)
    calibrated = 0.3 * real + rng.normal(size=real.size)
    point = explained_within_group_variance(real, calibrated, groups)
    low = explained_variance_lower_bound(real, calibrated, groups, 0.05)
    assert 0.0 <= low < point
    assert explained_variance_lower_bound(real, calibrated, groups, 0.05) == low  # a function of the data
    order = rng.permutation(real.size)  # the rows' order is not evidence
    assert explained_variance_lower_bound(real[order], calibrated[order], groups[order], 0.05) == pytest.approx(low)
    assert explained_variance_lower_bound(real[:4], calibrated[:4], groups[:4], 0.05) == 0.0  # one group: nothing
    with pytest.raises(ValueError, match="quantile"):
        explained_variance_lower_bound(real, calibrated, groups, 1.0)


def test_tied_groups_are_resampled_and_widen_the_bound():
    from wmrl_core.fusion.inverse_variance import explained_variance_lower_bound

    # one group that ranks perfectly and one whose rewards all tie: a quarter of the draws hold only the tie
    real, calibrated, groups = [0.0, 1, 0, 1, 5, 5, 5, 5], [0.0, 1, 0, 1, 3, 3, 3, 3], [0] * 4 + [1] * 4
    assert explained_variance_lower_bound(real, calibrated, groups, 0.05) == 0.0
    assert explained_variance_lower_bound(real, calibrated, groups, 0.5) == pytest.approx(1.0)


def test_noise_pairs_get_a_point_estimate_above_zero_and_a_lower_bound_at_zero():
    from wmrl_core.fusion.inverse_variance import explained_variance_lower_bound, explained_within_group_variance

    rng = np.random.default_rng(4)
    bounds, points = [], []
    for _ in range(50):  # 16 anchor groups of 4: the one-group-a-step regime after 16 steps
        groups = np.repeat(np.arange(16), 4)
        real, noise = rng.normal(size=64), rng.normal(size=64)
        points.append(explained_within_group_variance(real, noise, groups))
        bounds.append(explained_variance_lower_bound(real, noise, groups, 0.05))
    assert np.mean(points) > 0.005  # a squared estimate of 0 is positive on average
    assert np.mean(bounds) < 0.1 * np.mean(points) and np.median(bounds) == 0.0


def test_the_quantile_option_lowers_only_the_inverse_variance_weight():
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    point, bounded = MSEWeightedFuser(level=0.5, rho2_quantile=None), MSEWeightedFuser(level=0.5, rho2_quantile=0.05)
    cal_a, cal_b = RewardCalibrator(), RewardCalibrator()
    for step in range(1, 8):
        a = _step(point, cal_a, rng_a, rho=0.5, step=step)
        b = _step(bounded, cal_b, rng_b, rho=0.5, step=step)
        point, cal_a, bounded, cal_b = a.fuser, a.calibrator, b.fuser, b.calibrator
        assert b.record["fusion/rho2"] <= a.record["fusion/rho2"] + 1e-12
        assert b.record["fusion/gate_open"] == a.record["fusion/gate_open"]  # the gate is the same test
    assert b.record["fusion/rho2"] < a.record["fusion/rho2"]


def test_settings_are_validated():
    with pytest.raises(ValueError, match="rho2_quantile"):
        MSEWeightedSettings(rho2_quantile=0.7)
    with pytest.raises(ValueError, match="bias_horizon"):
        MSEWeightedSettings(bias_horizon=0.5)
    with pytest.raises(ValueError, match="window"):
        MSEWeightedSettings(window=2)
    with pytest.raises(ValueError, match="level"):
        MSEWeightedSettings(level=0.0)


def test_a_world_model_declaring_its_validation_ranking_gives_the_gate_capped_evidence(tmp_path):
    from wmrl_core.config import load_config
    from wmrl_core.experiments.package_data import synthetic_config
    from wmrl_core.step import TrainState

    class Declaring:
        validation = {"rank_correlation": 0.5, "groups": 400}

    cfg = load_config(synthetic_config(), [f"run_dir={tmp_path}"])
    policy = torch.nn.Linear(2, 2)
    gate = TrainState.create(cfg, policy, world_model=Declaring()).fuser.gate
    assert gate.prior_wealth_ == pytest.approx(np.sqrt(1 / 0.05)) and not gate.open_
    off = load_config(synthetic_config(), [f"run_dir={tmp_path}", "fusion.kwargs.validation_prior=false"])
    assert TrainState.create(off, policy, world_model=Declaring()).fuser.gate.prior_wealth_ == 1.0
    Declaring.validation = {"rank_correlation": 0.5}
    with pytest.raises(ValueError, match="groups"):
        TrainState.create(cfg, policy, world_model=Declaring())

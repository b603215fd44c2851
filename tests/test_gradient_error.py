"""The exact-gradient check of the fusion estimators on the synthetic bandit."""

import numpy as np
import pytest

from experiments.synthetic.gradient_error import fusion_gradient_errors, group_gradients, relative_errors
from wmrl_core.calibration import RewardCalibrator
from wmrl_core.synthetic.bandit import SyntheticBanditEnvironment
from wmrl_core.synthetic.world_model import SyntheticWorldModel


def test_group_gradients_hand_computed():
    # one group of task 1 (of 2), arms (0, 0, 2), advantages (1, 0.5, -1.5): block 1 = (1.5, 0, -1.5) / 3
    h = group_gradients(np.array([[1.0, 0.5, -1.5]]), np.array([[0, 0, 2]]), np.array([1]), num_tasks=2, num_arms=3)
    assert h.shape == (1, 2, 3)
    np.testing.assert_allclose(h[0], [[0, 0, 0], [0.5, 0, -0.5]])


def test_relative_errors_hand_computed():
    target = np.array([1.0, 0.0])
    estimates = np.array([[2.0, 1.0], [0.0, -1.0]])  # mean (1, 0): unbiased; squared errors 2 and 2
    assert relative_errors(estimates, target) == pytest.approx((2.0, 0.0))
    assert relative_errors(estimates + [1.0, 0.0], target) == pytest.approx((3.0, 1.0))


def test_rectified_is_unbiased_where_the_world_model_is_not():
    env = SyntheticBanditEnvironment(truth_seed=0, seed=0)
    wm = SyntheticWorldModel(env, seed=0)
    rng = np.random.default_rng(0)
    tasks = env.tasks()
    fit_tasks = [tasks[i] for i in rng.integers(0, 8, 400)]
    arms = rng.integers(0, 10, 400).tolist()
    calibrator = RewardCalibrator()
    calibrator.update(
        np.array(wm.predict(fit_tasks, arms)),
        np.array([o.score for o in env.execute(fit_tasks, arms)]),
        np.arange(400) // 8,
    )
    probs = np.full((8, 10), 0.1)
    errors = fusion_gradient_errors(env, wm, probs, calibrator, rho2=0.5, lams=(1.0,), replications=1000)
    # the calibrated world model's gradient is biased; the rectified one is not (its bias² estimate
    # is simulation noise, about its MSE / replications ~ 0.004)
    assert errors["world_model"][1] > 0.04
    assert errors["rectified (λ=1.00)"][1] < 0.015
    lam_star = [k for k in errors if k.startswith("rectified (λ*")]
    assert len(lam_star) == 1 and errors[lam_star[0]][0] < errors["anchors"][0]


def test_the_oracle_world_model_bounds_every_unbiased_fusion_from_below():
    env = SyntheticBanditEnvironment(truth_seed=0, seed=0)
    wm = SyntheticWorldModel(env, seed=0)
    probs = np.full((8, 10), 0.1)
    errors = fusion_gradient_errors(env, wm, probs, RewardCalibrator(), rho2=0.5, replications=500, oracle_draws=8)
    oracle_mse, oracle_bias2 = errors["rectified, oracle world model"]
    lam_star = next(v for k, v in errors.items() if k.startswith("rectified (λ*"))
    # the conditional expectation is the best control variate: unbiased, and below any λ's error
    assert oracle_bias2 < 0.02
    assert oracle_mse < lam_star[0] and oracle_mse < errors["anchors"][0] / 2


def test_shrinkage_rows_reach_the_best_of_the_family():
    """The family's optimal alpha* is at least as good as its end points (alpha 0 is rectified at
    lambda*, alpha 1 the target itself) and as a given alpha."""
    env = SyntheticBanditEnvironment(truth_seed=0, seed=0)
    wm = SyntheticWorldModel(env, seed=0)
    probs = np.full((8, 10), 0.1)
    errors = fusion_gradient_errors(env, wm, probs, RewardCalibrator(), rho2=0.5, replications=500, alphas=(0.0, 1.0))
    for name in ("inverse variance", "calibrated"):
        rows = {k: v[0] for k, v in errors.items() if k.startswith(f"shrinkage toward {name}")}
        best = next(v for k, v in rows.items() if "α*" in k)
        assert len(rows) == 3 and best <= min(rows.values()) + 1e-9


def test_lambda_estimates_read_a_gradient_moment_run(tmp_path):
    from experiments.synthetic.gradient_error import lambda_estimates
    from experiments.synthetic.noise_weight import CONFIG
    from wmrl_core.config import load_config
    from wmrl_core.trainer import train

    run = tmp_path / "run"
    overrides = ["steps=10", "checkpoint.every=10", "eval.every=0", "logging.progress=false"]
    cfg = load_config(
        CONFIG, [f"run_dir={run}", "fusion.method=rectified", "fusion.kwargs.lambda_moments=gradient", *overrides]
    )
    train(cfg)
    (row,) = lambda_estimates(run, [10], replications=200)
    assert 0.0 < row["lambda_star"] < 1.5
    assert abs(row["slope_solution"] - row["slope_gradient"]) < 0.05  # exact moments for the tabular softmax
    assert 0.0 <= row["lambda_gradient"] <= 1.0

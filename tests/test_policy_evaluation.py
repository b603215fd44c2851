import numpy as np
import pytest

from experiments.synthetic.policy_evaluation import (
    classical_mean,
    ppi_mean,
    run_policy_evaluation,
)


def test_ppi_mean_hand_computed():
    y, f_n, f_big = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]), np.arange(1.0, 7.0)
    theta, se, lam = ppi_mean(y, f_n, f_big)
    # cov 1, var 1 -> lambda = 1 / (1 + 3/6) = 2/3; theta = 2 + 2/3 (3.5 - 2) = 3
    assert lam == pytest.approx(2 / 3)
    assert theta == pytest.approx(3.0)
    # var(y - f/1.5... ) = var([1/3, 2/3, 1]) = 1/9 -> /3; lambda^2 var(f_big) / 6 = 4/9 * 3.5 / 6
    assert se == pytest.approx(np.sqrt(1 / 27 + 4 / 9 * 3.5 / 6))
    assert classical_mean(y) == pytest.approx((2.0, 1 / np.sqrt(3)))


def test_ppi_mean_ignores_a_useless_predictor_and_needs_data():
    rng = np.random.default_rng(0)
    y = rng.normal(size=200)
    _, _, lam = ppi_mean(y, -y + rng.normal(0, 0.1, 200), rng.normal(size=1000))  # anti-correlated
    assert lam == 0.0
    assert ppi_mean(y, np.ones(200), np.ones(10))[2] == 0.0  # constant predictor
    with pytest.raises(ValueError, match="at least 2"):
        ppi_mean(y[:1], y[:1], y)


@pytest.mark.slow
def test_rectified_intervals_cover_where_the_calibrated_world_model_alone_does_not():
    results = {r.estimator: r for r in run_policy_evaluation(replications=200, quality="miscalibrated")}
    assert results["rectified"].coverage >= 0.93
    assert results["calibrated_world_model"].coverage < 0.5
    assert results["rectified"].mean_width < results["anchors"].mean_width  # the world model buys precision

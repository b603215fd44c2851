"""A useless world model gets no weight, even with one anchor group a step (issue 30, item 4)."""

import math

import pytest

from experiments.synthetic.noise_weight import longest_run_above, run_noise_weight, summarize_weights, weights_of_run


def test_summary_of_weights_hand_computed():
    runs = {"a": [0.0, 0.2, 0.3, 0.0], "b": [0.0, 0.0, 0.05, 0.11]}
    s = summarize_weights(runs, threshold=0.1)
    assert s["steps"] == 8 and s["share_above"] == pytest.approx(3 / 8)
    assert s["worst_run"] == "a" and s["worst_run_mean"] == pytest.approx(0.125)
    assert s["longest_streak"] == 2 and s["max_weight"] == pytest.approx(0.3)
    assert longest_run_above([0.2, 0.0, 0.2, 0.2, 0.2], 0.1) == 3 and longest_run_above([], 0.1) == 0
    assert weights_of_run([{"step": 0}, {"step": 1, "fusion/w_world_model": 0.5}]) == [0.5]
    assert math.isnan(summarize_weights({})["share_above"])


@pytest.mark.slow
@pytest.mark.parametrize("method", ["rectified", "shrinkage"])
def test_the_noise_world_model_gets_no_weight_with_one_anchor_group_a_step(tmp_path, method):
    """anchors.fraction 0.05 of 20 groups: one anchor group a step, the hardest case. On these
    8 seeds x 15 steps the plain James-Stein factor (fusion.kwargs.lambda_level=null) gave weight above
    0.1 on 9.2% of steps and one run a mean of 0.218; the floors are at most 5% of steps and no
    run mean above 0.05. The weight is what the method gives the world model (rectified: its
    lambda; shrinkage: (1 - alpha) lambda + alpha w_T)."""
    weights = run_noise_weight(
        tmp_path, seeds=range(8), steps=15, fractions=[0.05], overrides=[f"fusion.method={method}"]
    )
    s = summarize_weights(weights["0.05"])
    assert s["steps"] == 8 * 15
    assert s["share_above"] <= 0.05, s
    assert s["worst_run_mean"] <= 0.05, s

"""The side-by-side report: compute to target, gain over the untrained policy, paired speed-up."""

import math

import pytest

from wmrl_core.experiment import (
    ArmResult,
    compute_to_reach,
    markdown_table,
    mean_ci95,
    paired_compute_ratios,
    summarize,
)


def _arm(name, curves):
    res = ArmResult(name, curves=curves)
    res.finals = [c[-1][1] for c in curves]
    res.compute = [
        {"generation_s": 0.0, "world_model_s": 0.0, "execution_s": c[-1][0], "total_s": c[-1][0]} for c in curves
    ]
    res.w_world_model = [0.5 for _ in curves]
    return res


def test_compute_to_reach_is_the_first_trained_evaluation_whose_running_mean_reaches_the_target():
    curve = [(0.0, 0.1), (10.0, 0.3), (20.0, 0.7), (30.0, 0.9)]
    assert compute_to_reach(curve, 0.5) == 20.0  # running mean of two: 0.3, 0.5, 0.8
    assert compute_to_reach(curve, 0.6) == 30.0
    assert compute_to_reach(curve, 0.7, smooth=1) == 20.0
    assert compute_to_reach(curve, 0.95) is None


def test_compute_to_reach_never_counts_the_untrained_policy():
    # the untrained policy (step 0, no compute) already beats the target: reaching it still
    # takes the first trained evaluation
    curve = [(0.0, 0.9), (10.0, 0.6), (20.0, 0.6)]
    assert compute_to_reach(curve, 0.5, smooth=1) == 10.0
    assert compute_to_reach(curve, 0.95, smooth=1) is None


def test_summarize_reports_paired_gain_and_flags_a_baseline_that_did_not_improve():
    real = _arm("real", [[(0.0, 0.8), (100.0, 0.7), (200.0, 0.6)], [(0.0, 0.8), (100.0, 0.7), (200.0, 0.7)]])
    wmrl = _arm("wmrl", [[(0.0, 0.8), (10.0, 0.9), (20.0, 0.9)], [(0.0, 0.8), (10.0, 0.85), (20.0, 0.9)]])
    s = summarize({"real": real, "wmrl": wmrl}, fraction=1.0)
    assert s["target"] == pytest.approx(0.65)
    assert not s["baseline_improved"]
    assert s["arms"]["real"]["gain_mean"] == pytest.approx(-0.15)
    assert s["arms"]["wmrl"]["gain_mean"] == pytest.approx(0.1)
    # real reaches 0.65 at 100 s (seed 0) and 100 s (seed 1); wmrl at 10 s on both
    assert s["arms"]["wmrl"]["speedup_vs_baseline"] == pytest.approx(10.0)
    assert "did not improve on the untrained policy" in markdown_table(s)


def test_summarize_does_not_flag_an_improving_baseline():
    real = _arm("real", [[(0.0, 0.2), (100.0, 0.5), (200.0, 0.8)]])
    s = summarize({"real": real}, fraction=1.0)
    assert s["baseline_improved"]
    assert "did not improve" not in markdown_table(s)


def test_mean_ci95():
    assert mean_ci95([0.5]) == (0.5, 0.0)
    mean, half = mean_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / math.sqrt(3), rel=1e-3)
    assert all(math.isnan(x) for x in mean_ci95([]))


def test_paired_compute_ratios_compare_arms_seed_by_seed():
    # target 0.5 (smooth=2: running mean of two trained evaluations)
    wmrl = _arm("wmrl", [[(0, 0.1), (10, 0.5), (20, 0.5)], [(0, 0.1), (10, 0.6), (20, 0.6)], [(0, 0.1), (5, 0.2)]])
    ivw = _arm("ivw", [[(0, 0.1), (10, 0.4), (20, 0.6)], [(0, 0.1), (10, 0.6), (30, 0.6)], [(0, 0.1), (5, 0.6)]])
    p = paired_compute_ratios({"wmrl": wmrl, "ivw": ivw}, "wmrl", "ivw", target=0.5)
    assert p["per_seed"] == [10 / 20, 10 / 10, None]  # the third seed's wmrl never reaches it
    assert p["mean"] == pytest.approx(0.75)
    s = summarize({"real": ivw, "wmrl": wmrl, "wmrl_inverse_variance": ivw}, fraction=0.5 / 0.6)
    assert [q["arm"] for q in s["paired"]] == ["wmrl"]
    assert "| wmrl / wmrl_inverse_variance | 0.50, 1.00, - | 0.75 ±" in markdown_table(s)

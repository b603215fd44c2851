"""``wmrl experiment lambda-estimates``: the maths on hand-computed cases, and the command end
to end in real containers (slow)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.autoresearch_lambda_estimates import lambda_estimates as le
from wmrl_core.calibration import RewardCalibrator

ROOT = Path(__file__).resolve().parents[3]  # the repository: `wmrl experiment` finds its studies there


def _group(real, calibrated, h_real, h_calibrated, sketch_real=None, sketch_calibrated=None, keys=None):
    real, calibrated = np.asarray(real, float), np.asarray(calibrated, float)
    return le.GroupSample(
        real_advantages=real,
        calibrated_advantages=calibrated,
        keys=np.arange(real.size) if keys is None else np.asarray(keys),
        h_real=np.asarray(h_real, float),
        h_calibrated=np.asarray(h_calibrated, float),
        sketch_real=np.asarray(h_real if sketch_real is None else sketch_real, float),
        sketch_calibrated=np.asarray(h_calibrated if sketch_calibrated is None else sketch_calibrated, float),
    )


# ------------------------------------------------------------------ lambda*


def test_trace_optimal_lambda_hand_computed():
    # centred: h^R = ±(0.5, 0), h^C = ±(1, 0): sum <.,.> = 1, sum |.|^2 = 2
    assert le.trace_optimal_lambda([[1, 0], [0, 0]], [[1, 1], [-1, 1]]) == pytest.approx(0.5)
    # h^C = -2 h^R: the slope is -1/2, unclipped
    h = np.array([[1.0, 2.0], [0.0, -1.0], [3.0, 0.0]])
    assert le.trace_optimal_lambda(h, -2 * h) == pytest.approx(-0.5)


def test_trace_optimal_lambda_without_spread_or_groups():
    assert math.isnan(le.trace_optimal_lambda([[1, 0], [0, 1]], [[2, 2], [2, 2]]))
    with pytest.raises(ValueError, match="at least two groups"):
        le.trace_optimal_lambda([[1, 0]], [[1, 0]])
    with pytest.raises(ValueError, match="one shape"):
        le.trace_optimal_lambda([[1, 0], [0, 1]], [[1, 0, 0], [0, 1, 0]])


def test_weighted_ratio_is_lambda_star_of_the_repeated_groups():
    rng = np.random.default_rng(3)
    h_r, h_c = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    k_rc, k_cc = h_r @ h_c.T, h_c @ h_c.T
    assert le.weighted_centred_ratio(k_rc, k_cc, np.ones(3)) == pytest.approx(le.trace_optimal_lambda(h_r, h_c))
    repeated = [0, 0, 1]  # weights (2, 1, 0)
    assert le.weighted_centred_ratio(k_rc, k_cc, np.array([2, 1, 0])) == pytest.approx(
        le.trace_optimal_lambda(h_r[repeated], h_c[repeated])
    )
    with pytest.raises(ValueError, match="non-negative"):
        le.weighted_centred_ratio(k_rc, k_cc, np.array([1, -1, 1]))
    with pytest.raises(ValueError, match="square"):
        le.weighted_centred_ratio(k_rc[:2], k_cc[:2], np.ones(2))


def test_bootstrap_interval_of_an_exact_slope_is_that_slope():
    h = np.random.default_rng(0).normal(size=(6, 4))
    lo, hi = le.bootstrap_lambda_interval(h, 2 * h, replications=200, rng=np.random.default_rng(1))
    assert lo == pytest.approx(0.5) and hi == pytest.approx(0.5)


def test_bootstrap_interval_brackets_the_plug_in_and_is_seeded():
    rng = np.random.default_rng(5)
    h_r = rng.normal(size=(30, 8))
    h_c = 0.7 * h_r + rng.normal(size=(30, 8))
    a = le.bootstrap_lambda_interval(h_r, h_c, replications=300, rng=np.random.default_rng(2))
    b = le.bootstrap_lambda_interval(h_r, h_c, replications=300, rng=np.random.default_rng(2))
    assert a == b
    assert a[0] < le.trace_optimal_lambda(h_r, h_c) < a[1]
    with pytest.raises(ValueError, match="replications"):
        le.bootstrap_lambda_interval(h_r, h_c, replications=0, rng=rng)


# ------------------------------------------------------------------ calibration


def _calibrator():
    return RewardCalibrator()


def test_cross_fitted_rewards_hand_computed():
    # even groups (0, 2) are mapped by the isotonic fit on the odd ones: x 0..3 -> y 10..40
    # (linear between, clipped outside); odd groups (1, 3) by the fit on the even ones:
    # x (0.5, 2, 4, 5) -> y (0, 2, 3, 1), pooled to levels (0, 2, 2, 2)
    wm = np.array([0.5, 5.0, 0.0, 1.0, 2.0, 4.0, 2.0, 3.0])
    real = np.array([0.0, 1.0, 10.0, 20.0, 2.0, 3.0, 30.0, 40.0])
    groups = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    out = le.cross_fitted_rewards(wm, real, groups, _calibrator)
    assert out == pytest.approx([15.0, 40.0, 0.0, 2 / 3, 30.0, 40.0, 2.0, 2.0])


def test_cross_fitted_rewards_identity_without_the_other_half_and_nan_kept():
    wm = np.array([0.1, 0.9, np.nan, 0.4])
    out = le.cross_fitted_rewards(wm, np.array([1.0, 0.0, 1.0, 0.0]), np.array([0, 0, 2, 2]), _calibrator)
    assert out[[0, 1, 3]] == pytest.approx([0.1, 0.9, 0.4]) and math.isnan(out[2])
    with pytest.raises(ValueError, match="equal length"):
        le.cross_fitted_rewards(wm, wm[:3], np.zeros(4, int), _calibrator)


# ------------------------------------------------------------------ the fuser's estimates on a window


def _two_groups():
    # solution moments: r = (2, 4), c = (2, 8): slope 0.6; whole gradients: centred h^R = ±(0.5, 0),
    # h^C = ±(1, 0): slope 0.5; sketches: centred ±0.5 and ±2: slope 0.25
    return [
        _group([1, -1], [1, -1], [0.5, 1], [2, 0], sketch_real=[1], sketch_calibrated=[2]),
        _group([1, -1], [2, -2], [-0.5, 1], [0, 0], sketch_real=[0], sketch_calibrated=[-2]),
    ]


def test_window_estimates_hand_computed_plain_james_stein():
    out = le.window_estimates(_two_groups(), level=None, min_groups=2)
    assert out["slope_solution"] == pytest.approx(0.6)
    assert out["slope_gradient"] == pytest.approx(0.5)
    assert out["slope_sketch"] == pytest.approx(0.25)
    # sandwich variance 2/1 * ((2 - 1.2)^2 + (4 - 4.8)^2) / 10^2 = 0.0256: 0.6 (1 - 0.0256 / 0.36)
    assert out["lambda_solution"] == pytest.approx(0.6 * (1 - 0.0256 / 0.36))
    # two centred vectors are opposite: residuals 0, no shrinkage
    assert out["lambda_gradient"] == pytest.approx(0.5)
    assert out["lambda_sketch"] == pytest.approx(0.25)


def test_window_estimates_test_against_the_null_keeps_a_weak_slope_at_zero():
    # null variance (2*2 + 2*8) / 10^2 = 0.2: 0.6 < 3.09 * sqrt(0.2), so no weight at level 0.999
    out = le.window_estimates(_two_groups(), level=0.999, min_groups=2)
    assert out["slope_solution"] == pytest.approx(0.6)
    assert out["lambda_solution"] == out["lambda_gradient"] == out["lambda_sketch"] == 0.0


def test_window_gradient_slope_on_every_group_is_lambda_star_and_order_free():
    rng = np.random.default_rng(4)
    groups = [_group(rng.normal(size=4), rng.normal(size=4), rng.normal(size=6), rng.normal(size=6)) for _ in range(5)]
    out = le.window_estimates(groups, level=None, min_groups=2)
    star = le.trace_optimal_lambda(np.stack([g.h_real for g in groups]), np.stack([g.h_calibrated for g in groups]))
    assert out["slope_gradient"] == pytest.approx(star)
    assert le.window_estimates(groups[::-1], level=None, min_groups=2) == pytest.approx(out)


def test_window_merges_equal_solutions_within_a_group():
    # keys (0, 0, 1): S^R = (1, -1), S^C = (2, -2): r = 4, c = 8; apart: r = 1 + 0 + 2 = 3, c = 1 + 1 + 4 = 6;
    # the other group: r = c = 2
    merged = _group([1, 0, -1], [1, 1, -2], [1, 0], [1, 0], keys=[0, 0, 1])
    apart = _group([1, 0, -1], [1, 1, -2], [1, 0], [1, 0])
    other = _group([1, -1, 0], [1, -1, 0], [0, 0], [0, 0])
    assert le.window_estimates([merged, other], level=None, min_groups=2)["slope_solution"] == pytest.approx(6 / 10)
    assert le.window_estimates([apart, other], level=None, min_groups=2)["slope_solution"] == pytest.approx(5 / 8)
    with pytest.raises(ValueError, match="two groups"):
        le.window_estimates([other], level=None, min_groups=2)


def test_subset_estimates_at_k_equal_n_repeat_the_window():
    groups = _two_groups()
    est = le.subset_estimates(groups, 2, 7, np.random.default_rng(0), level=None, min_groups=2)
    assert est["slope_solution"] == pytest.approx([0.6] * 7)
    with pytest.raises(ValueError, match="k must be"):
        le.subset_estimates(groups, 3, 7, np.random.default_rng(0), level=None, min_groups=2)


def test_error_summary_hand_computed():
    s = le.error_summary(np.array([0.5, 1.0, 1.5]), 1.0)
    assert s == pytest.approx({"mean": 1.0, "sd": 0.5, "mean_abs_error": 1 / 3})
    assert le.error_summary(np.array([2.0]), 1.0)["sd"] == 0.0
    with pytest.raises(ValueError, match="non-empty"):
        le.error_summary(np.array([]), 1.0)


# ------------------------------------------------------------------ the command


def test_help_and_a_window_larger_than_the_groups_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        le.main(["--help"])
    assert exit_.value.code == 0 and "usage: wmrl experiment lambda-estimates" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        le.main(["--groups", "3", "--k", "2", "5"])
    assert exit_.value.code == 2 and "each k must be in [2, --groups=3]" in capsys.readouterr().err


COMMAND = [sys.executable, "-m", "wmrl_core.cli", "experiment", "lambda-estimates"]


@pytest.mark.slow
def test_three_groups_end_to_end_then_replayed_from_the_cache(docker_ready, tmp_path):
    # G = 2 and the smoothed calibrator (no ties) keep it to 6 executions with calibrated spread
    small = ["--groups", "3", "--k", "2", "3", "--subsets", "20", "--bootstrap", "50", "--cache", str(tmp_path / "c")]
    small += ["--override", "rollout.group_size=2", "calibration.calibrator=smoothed"]
    proc = subprocess.run(
        [*COMMAND, *small, "--out", str(tmp_path / "a")], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[execute] 6/6 executions, 0 replayed" in proc.stdout
    result = json.loads((tmp_path / "a" / "lambda_estimates.json").read_text())
    assert (result["executions"], result["replayed"], len(result["groups"])) == (6, 0, 3)
    a = result["analysis"]
    assert math.isfinite(a["lambda_star"]) and a["informative_groups"] >= 2
    assert a["lambda_star_ci95"][0] <= a["lambda_star_ci95"][1]
    every = a["per_k"]["3"]  # a window of every group: the whole-gradient slope is lambda* itself
    assert every["slope_gradient"]["mean_abs_error"] == pytest.approx(0.0, abs=1e-9)
    assert every["slope_solution"]["sd"] == pytest.approx(0.0, abs=1e-12)  # one window, drawn 20 times
    text = (tmp_path / "a" / "lambda_estimates.md").read_text()
    assert text.count("| 2 | ") == 3 and text.count("| 3 | ") == 3 and result["command"] in text
    again = subprocess.run(
        [*COMMAND, *small, "--out", str(tmp_path / "b")], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr[-3000:]
    replay = json.loads((tmp_path / "b" / "lambda_estimates.json").read_text())
    assert replay["replayed"] == 6
    assert replay["analysis"]["lambda_star"] == pytest.approx(a["lambda_star"])

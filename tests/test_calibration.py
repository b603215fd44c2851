import importlib
import sys

import numpy as np
import pytest

from wmrl_core.calibration import RewardCalibrator, smoothed_isotonic


def test_identity_before_first_anchor():
    d = RewardCalibrator()
    np.testing.assert_array_equal(d.transform(np.array([0.1, 5.0])), [0.1, 5.0])


def test_learns_monotone_inverse_of_a_convex_miscalibration():
    rng = np.random.default_rng(0)
    real = rng.uniform(0, 1, 2000)
    wm = np.exp(3 * (real - 1))
    d = RewardCalibrator()
    d.update(wm, real, np.arange(real.size))
    grid = np.exp(3 * (np.linspace(0.05, 0.95, 10) - 1))
    np.testing.assert_allclose(d.transform(grid), np.linspace(0.05, 0.95, 10), atol=0.02)
    assert np.all(np.diff(d.transform(np.sort(wm))) >= 0)


def test_clipped_outside_seen_range_and_nan_passthrough():
    d = RewardCalibrator()
    d.update(np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0]), np.array([0, 0, 1]))
    np.testing.assert_array_equal(d.transform(np.array([-5.0, 9.0])), [10.0, 30.0])
    assert np.isnan(d.transform(np.array([np.nan]))[0])


def test_nan_pairs_are_dropped():
    d = RewardCalibrator()
    d.update(np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0, np.nan]), np.array([0, 0, 0]))
    assert d.n_pairs_ == 1


def test_permutation_invariance():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=50), rng.normal(size=50)
    perm = rng.permutation(50)
    a, b = RewardCalibrator(), RewardCalibrator()
    a.update(x, y, np.arange(50))
    b.update(x[perm], y[perm], np.arange(50)[perm])
    np.testing.assert_allclose(a.transform(x), b.transform(x))


def test_window_keeps_recent_pairs_and_refits_online():
    d = RewardCalibrator(window=4)
    d.update(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([0, 0]))
    d.update(np.array([0.0, 1.0, 0.0, 1.0]), np.array([5.0, 6.0, 5.0, 6.0]), np.array([1, 1, 2, 2]))
    assert d.n_pairs_ == 4
    np.testing.assert_allclose(d.transform(np.array([0.0, 1.0])), [5.0, 6.0])


def test_state_roundtrip():
    d = RewardCalibrator(window=10)
    d.update(np.array([0.1, 0.5, 0.9]), np.array([0.0, 0.4, 1.0]), np.array([0, 1, 1]))
    e = RewardCalibrator()
    e.load_state_dict(d.state_dict())
    np.testing.assert_allclose(e.transform(np.array([0.3, 0.7])), d.transform(np.array([0.3, 0.7])))
    assert e.window == 10


def test_bad_input_raises():
    with pytest.raises(ValueError, match="window"):
        RewardCalibrator(window=1)
    with pytest.raises(ValueError, match="equal length"):
        RewardCalibrator().update(np.array([1.0]), np.array([1.0, 2.0]), np.array([0]))
    for slope in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="slope must be >= 0"):
            RewardCalibrator(calibrator="ranked", slope=slope)


def test_smoothed_isotonic_hand_computed():
    # blocks: level 0 at x in {0, 1} (centre 0.5), level 1 at x in {2, 4} (centre 3); no tilt
    x_fit = np.array([0.0, 1.0, 2.0, 4.0])
    levels = np.array([0.0, 0.0, 1.0, 1.0])
    out = smoothed_isotonic(x_fit, levels, np.array([0.5, 1.75, 3.0, 10.0]), slope=0.0, y_scale=1.0)
    np.testing.assert_allclose(out, [0.0, 0.5, 1.0, 1.0])
    # tilt: delta = 0.1 * 2 / sd(x_fit); sd = sqrt(2.1875), mean = 1.75
    delta = 0.1 * 2.0 / np.sqrt(2.1875)
    tilted = smoothed_isotonic(x_fit, levels, np.array([10.0]), slope=0.1, y_scale=2.0)
    np.testing.assert_allclose(tilted, [1.0 + delta * (10.0 - 1.75)])


def test_smoothed_calibrator_never_ties_what_the_world_model_ranks_apart():
    rng = np.random.default_rng(4)
    real = rng.uniform(0, 1, 16)  # few pairs: isotonic pools them into few blocks
    wm = np.exp(3 * (real - 1)) + rng.normal(0, 0.1, 16)
    step, smooth = RewardCalibrator(), RewardCalibrator(calibrator="smoothed")
    for d in (step, smooth):
        d.update(wm, real, np.arange(16))
    grid = np.sort(np.concatenate([rng.uniform(wm.min() - 0.5, wm.max() + 0.5, 200), wm]))
    assert np.sum(np.diff(step.transform(grid)) == 0) > 50
    assert np.all(np.diff(smooth.transform(grid)) > 0)
    # and stays close to the isotonic fit where there is data
    assert np.max(np.abs(smooth.transform(wm) - step.transform(wm))) < 0.5
    e = RewardCalibrator()
    e.load_state_dict(smooth.state_dict())
    np.testing.assert_allclose(e.transform(grid), smooth.transform(grid))
    with pytest.raises(ValueError, match="calibrator"):
        RewardCalibrator(calibrator="spline")


def test_the_old_module_and_class_name_still_import_with_a_deprecation_warning(monkeypatch):
    monkeypatch.delitem(sys.modules, "wmrl_core.debias", raising=False)  # import it afresh, so it warns
    with pytest.warns(DeprecationWarning, match="wmrl_core.calibration"):
        debias = importlib.import_module("wmrl_core.debias")
    assert debias.IsotonicDebiaser is RewardCalibrator
    assert debias.smoothed_isotonic is smoothed_isotonic

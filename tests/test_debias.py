import numpy as np
import pytest

from wmrl_core.debias import IsotonicDebiaser


def test_identity_before_first_anchor():
    d = IsotonicDebiaser()
    np.testing.assert_array_equal(d.transform(np.array([0.1, 5.0])), [0.1, 5.0])


def test_learns_monotone_inverse_of_a_convex_miscalibration():
    rng = np.random.default_rng(0)
    real = rng.uniform(0, 1, 2000)
    wm = np.exp(3 * (real - 1))
    d = IsotonicDebiaser()
    d.update(wm, real, np.arange(real.size))
    grid = np.exp(3 * (np.linspace(0.05, 0.95, 10) - 1))
    np.testing.assert_allclose(d.transform(grid), np.linspace(0.05, 0.95, 10), atol=0.02)
    assert np.all(np.diff(d.transform(np.sort(wm))) >= 0)


def test_clipped_outside_seen_range_and_nan_passthrough():
    d = IsotonicDebiaser()
    d.update(np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0]), np.array([0, 0, 1]))
    np.testing.assert_array_equal(d.transform(np.array([-5.0, 9.0])), [10.0, 30.0])
    assert np.isnan(d.transform(np.array([np.nan]))[0])


def test_nan_pairs_are_dropped():
    d = IsotonicDebiaser()
    d.update(np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0, np.nan]), np.array([0, 0, 0]))
    assert d.n_pairs_ == 1


def test_permutation_invariance():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=50), rng.normal(size=50)
    perm = rng.permutation(50)
    a, b = IsotonicDebiaser(), IsotonicDebiaser()
    a.update(x, y, np.arange(50))
    b.update(x[perm], y[perm], np.arange(50)[perm])
    np.testing.assert_allclose(a.transform(x), b.transform(x))


def test_window_keeps_recent_pairs_and_refits_online():
    d = IsotonicDebiaser(window=4)
    d.update(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([0, 0]))
    d.update(np.array([0.0, 1.0, 0.0, 1.0]), np.array([5.0, 6.0, 5.0, 6.0]), np.array([1, 1, 2, 2]))
    assert d.n_pairs_ == 4
    np.testing.assert_allclose(d.transform(np.array([0.0, 1.0])), [5.0, 6.0])


def test_state_roundtrip():
    d = IsotonicDebiaser(window=10)
    d.update(np.array([0.1, 0.5, 0.9]), np.array([0.0, 0.4, 1.0]), np.array([0, 1, 1]))
    e = IsotonicDebiaser()
    e.load_state_dict(d.state_dict())
    np.testing.assert_allclose(e.transform(np.array([0.3, 0.7])), d.transform(np.array([0.3, 0.7])))
    assert e.window == 10


def test_bad_input_raises():
    with pytest.raises(ValueError, match="window"):
        IsotonicDebiaser(window=1)
    with pytest.raises(ValueError, match="equal length"):
        IsotonicDebiaser().update(np.array([1.0]), np.array([1.0, 2.0]), np.array([0]))

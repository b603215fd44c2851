"""The Wilson interval the LIBERO evaluation protocol reports success rates with."""

import pytest

from wmrl_core.experiments.stats import wilson_interval


def test_wilson_interval_hand_computed():
    # z = 1.96, n = 10: 0/10 -> [0, 0.2775]; 5/10 -> [0.2366, 0.7634]; 10/10 -> [0.7225, 1]
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.23659, 0.76341), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.72247, 1.0), abs=1e-4)


def test_wilson_interval_is_symmetric_and_shrinks_with_n():
    lo, hi = wilson_interval(3, 50)
    lo2, hi2 = wilson_interval(47, 50)
    assert (lo, hi) == pytest.approx((1 - hi2, 1 - lo2))
    assert hi - lo > wilson_interval(30, 500)[1] - wilson_interval(30, 500)[0]


def test_wilson_interval_rejects_bad_counts():
    with pytest.raises(ValueError):
        wilson_interval(6, 5)
    assert wilson_interval(0, 0) == (0.0, 1.0)

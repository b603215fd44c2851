"""``wmrl_core.metrics.nanmean``: the one mean of "values that may be missing" the engine, the
experiment summaries and the benchmarks share."""

import math

import numpy as np

from wmrl_core.metrics import nanmean


def test_nanmean_skips_nan_infinities_and_none() -> None:
    assert nanmean([1.0, math.nan, None, 3.0, math.inf, -math.inf]) == 2.0
    assert nanmean(np.array([0.25, np.nan, 0.75])) == 0.5


def test_nanmean_of_nothing_finite_is_nan_without_a_warning(recwarn) -> None:
    assert math.isnan(nanmean([]))
    assert math.isnan(nanmean([None, math.nan]))
    assert math.isnan(nanmean(np.full(3, np.nan)))
    assert not recwarn.list  # np.nanmean would warn "Mean of empty slice"

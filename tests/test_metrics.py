"""``wmrl_core.metrics``: ``nanmean``, the one mean of "values that may be missing" the engine, the
experiment summaries and the benchmarks share; ``read_metrics`` of runs written under older names."""

import json
import math

import numpy as np

from wmrl_core.metrics import MetricsWriter, nanmean, read_metrics


def test_nanmean_skips_nan_infinities_and_none() -> None:
    assert nanmean([1.0, math.nan, None, 3.0, math.inf, -math.inf]) == 2.0
    assert nanmean(np.array([0.25, np.nan, 0.75])) == 0.5


def test_nanmean_of_nothing_finite_is_nan_without_a_warning(recwarn) -> None:
    assert math.isnan(nanmean([]))
    assert math.isnan(nanmean([None, math.nan]))
    assert math.isnan(nanmean(np.full(3, np.nan)))
    assert not recwarn.list  # np.nanmean would warn "Mean of empty slice"


def test_metrics_written_under_their_old_names_are_read_under_the_current_ones(tmp_path) -> None:
    """Runs before the calibration rename wrote ``debias/*``; a run resumed across it has both."""
    old = {"step": 1, "debias/n_pairs": 8, "debias/residual_var": 0.5, "debias/raw_residual_var": None}
    new = {"step": 2, "calibration/n_pairs": 16, "calibration/residual_var": 0.25, "debias/n_pairs": 99}
    lines = [json.dumps(old), json.dumps(new)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    first, second = read_metrics(tmp_path)
    assert first == {
        "step": 1,
        "calibration/n_pairs": 8,
        "calibration/residual_var": 0.5,
        "calibration/raw_residual_var": None,
    }
    assert second["calibration/n_pairs"] == 16 and second["debias/n_pairs"] == 99  # the current name wins
    # resuming cuts the file back to the checkpoint's step and keeps its lines as they were written
    MetricsWriter(tmp_path, tensorboard=False, truncate_after_step=1).close()
    assert [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [old]

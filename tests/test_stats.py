"""The statistics module, each function against a hand-computed case."""

import math

import numpy as np
import pytest

from wmrl_core.experiments.stats import (
    auroc,
    mean_ci95,
    mean_t_interval,
    paired_bootstrap_se,
    repeated_evaluation_noise,
    stratified_standard_error,
    wilson_interval,
    within_group_auroc,
    within_group_spearman,
)


def test_mean_ci95():
    assert mean_ci95([0.5]) == (0.5, 0.0)
    mean, half = mean_ci95([1.0, 2.0, 3.0])
    # s = 1, t(0.975, 2) = 4.303
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / math.sqrt(3), rel=1e-3)
    assert all(math.isnan(x) for x in mean_ci95([]))
    assert mean_ci95([1.0, None, math.nan, 3.0]) == mean_ci95([1.0, 3.0])  # missing values dropped


def test_mean_t_interval_at_another_level():
    # 90%: t(0.95, 3) = 2.353; values 0, 2, 4, 6: s = sqrt(20/3)
    mean, half = mean_t_interval([0.0, 2.0, 4.0, 6.0], 0.90)
    assert mean == 3.0 and half == pytest.approx(2.353 * math.sqrt(20 / 3) / 2, rel=1e-3)
    with pytest.raises(ValueError, match="confidence"):
        mean_t_interval([1.0, 2.0], 95)


def test_stratified_standard_error_counts_only_the_noise_within_each_task():
    # two tasks far apart, two draws each: se = sqrt(s_a²/2 + s_b²/2) / 2
    values, tasks = [0.0, 1.0, 10.0, 12.0], ["a", "a", "b", "b"]
    expected = math.sqrt(0.5 / 2 + 2.0 / 2) / 2
    assert stratified_standard_error(values, tasks) == pytest.approx(expected)
    # the gap between tasks is not noise: shifting one task leaves it unchanged
    assert stratified_standard_error([0.0, 1.0, 110.0, 112.0], tasks) == pytest.approx(expected)
    # a task with one draw (or one left after NaNs) borrows the pooled within-task variance
    pooled = (0.5 + 2.0) / 2
    single = stratified_standard_error([0.0, 1.0, 10.0, 12.0, 5.0, math.nan], tasks + ["c", "c"])
    assert single == pytest.approx(math.sqrt(0.5 / 2 + 2.0 / 2 + pooled / 1) / 3)
    assert math.isnan(stratified_standard_error([1.0, 2.0], ["a", "b"]))
    with pytest.raises(ValueError):
        stratified_standard_error([1.0], ["a", "b"])


def test_wilson_interval_by_hand():
    # k = 3, n = 10, z = 1.96: centre (0.3 + 0.19208) / 1.38415 = 0.35550,
    # half 1.96 sqrt(0.021 + 0.009604) / 1.38415 = 0.24771
    low, high = wilson_interval(3, 10)
    assert low == pytest.approx(0.35550 - 0.24771, abs=1e-4) and high == pytest.approx(0.35550 + 0.24771, abs=1e-4)
    # 0/10: low 0, high z²/n / (1 + z²/n) = 0.38415 / 1.38415
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.38415 / 1.38415), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo90, hi90 = wilson_interval(3, 10, confidence=0.90)
    assert low < lo90 < hi90 < high
    with pytest.raises(ValueError, match="successes <= trials"):
        wilson_interval(11, 10)


def test_paired_bootstrap_cancels_what_two_evaluations_share():
    rng = np.random.default_rng(0)
    shared = rng.normal(size=(20, 4))  # the noise two evaluations have in common (same draws)
    a, b = shared + 0.01 * rng.normal(size=(20, 4)), shared + 0.01 * rng.normal(size=(20, 4))
    se_a = paired_bootstrap_se([a], [1.0])
    se_diff = paired_bootstrap_se([a, b], [1.0, -1.0])
    # one evaluation: about sd / sqrt(80) = 0.11; the difference keeps only the 0.01-sd part
    assert 0.07 < se_a < 0.16 and se_diff < se_a / 20
    assert paired_bootstrap_se([a], [1.0]) == se_a  # seeded: the same draws every time


def test_paired_bootstrap_with_one_sample_per_task_resamples_tasks():
    # one sample per task: the tasks are resampled, so the spread of the task values counts;
    # values 0 and 1, one of each: se of a mean of 2 draws with replacement = sqrt(0.25 / 2)
    m = np.array([[0.0], [1.0]])
    assert paired_bootstrap_se([m], [1.0], n_boot=20_000) == pytest.approx(math.sqrt(0.25 / 2), rel=0.03)
    with pytest.raises(ValueError, match="one weight per matrix"):
        paired_bootstrap_se([m, m], [1.0])


@pytest.mark.parametrize("shape", [(40_000, 5), (200_000, 1)], ids=["samples", "one-per-task"])
def test_paired_bootstrap_in_chunks_draws_what_one_resample_at_a_time_draws(shape):
    """Large enough that the resamples are averaged in chunks of 5 (the last one short); NaNs are left out."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=shape), rng.normal(size=shape)
    a[::7, 0] = np.nan
    reference, draw = [], np.random.default_rng(3)
    for _ in range(53):  # the bootstrap, one resample at a time
        if shape[1] > 1:
            rows, cols = np.arange(shape[0])[:, None], draw.integers(0, shape[1], size=shape)
        else:
            rows, cols = draw.integers(0, shape[0], size=shape), np.zeros(shape, dtype=int)
        reference.append(2.0 * np.nanmean(a[rows, cols]) - np.nanmean(b[rows, cols]))
    se = paired_bootstrap_se([a, b], [2.0, -1.0], n_boot=53, seed=3)
    assert se == pytest.approx(float(np.std(reference, ddof=1)), rel=1e-12)


def test_within_group_spearman_skips_constant_outcomes_and_counts_constant_predictions_as_zero():
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["d"] * 3
    predictions = [0.1, 0.2, 0.3] + [0.3, 0.2, 0.1] + [0.5, 0.5, 0.5] + [0.1, 0.2, 0.3]
    outcomes = [1.0, 2.0, 3.0] + [1.0, 2.0, 3.0] + [1.0, 2.0, 3.0] + [7.0, 7.0, 7.0]
    res = within_group_spearman(groups, predictions, outcomes)
    # a: +1, b: -1, c: constant prediction, 0; d: constant outcome, skipped
    assert res.per_group == {"a": 1.0, "b": -1.0, "c": 0.0}
    assert res.groups == 3 and res.n == 9 and res.value == pytest.approx(0.0)
    # ranks within a group only: a = (1, 2, 3) vs (1, 3, 2): rho = 1 - 6 * 2 / (3 * 8) = 0.5
    assert within_group_spearman(["a"] * 3, [1.0, 3.0, 2.0], [10.0, 20.0, 30.0]).value == pytest.approx(0.5)
    assert within_group_spearman(["a", "a"], [1.0, 2.0], [1.0, 2.0], min_size=3).groups == 0
    assert math.isnan(within_group_spearman(["a"], [1.0], [1.0]).value)
    # permuting the rows leaves it unchanged
    order = np.random.default_rng(1).permutation(len(groups))
    permuted = within_group_spearman(
        [groups[i] for i in order], np.array(predictions)[order], np.array(outcomes)[order]
    )
    assert permuted.per_group == res.per_group


def test_within_group_auroc_pools_pairs_of_one_group_and_counts_ties_half():
    groups = ["a", "a", "a", "b", "b", "c", "c"]
    labels = [True, False, False, True, False, True, True]
    scores = [0.9, 0.1, 0.95, 0.5, 0.5, 0.2, 0.3]
    res = within_group_auroc(groups, labels, scores)
    # a: the success beats one of two failures (1/2); b: a tie (1/2); c: one class, skipped
    assert res.per_group == {"a": 0.5, "b": 0.5} and res.groups == 2 and res.n == 3
    assert res.value == pytest.approx((1 + 0.5) / 3)  # pooled over the 3 pairs
    assert math.isnan(within_group_auroc(["a", "a"], [True, True], [0.1, 0.2]).value)
    # a row without a score is left out, never counted as a lost pair
    unscored = within_group_auroc(["a", "a", "a"], [False, True, False], [float("nan"), 0.2, 0.3])
    assert unscored.value == 0.0 and unscored.n == 1


def test_auroc_by_hand():
    assert auroc([1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1]) == 1.0
    assert auroc([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9]) == 0.0
    assert auroc([1, 0, 0], [0.5, 0.5, 0.1]) == pytest.approx(0.75)  # one win, one tie of two pairs
    assert math.isnan(auroc([1, 1], [0.1, 0.2]))


def test_repeated_evaluation_noise_reads_one_policy_evaluated_twice():
    shared = {0: 0.40, 1: 0.42, 2: 0.38}
    fresh = {0: 0.41, 1: 0.40, 2: 0.39, 3: 0.5}
    se_shared, se_fresh = {0: 0.01, 1: 0.02, 2: 0.01}, {0: 0.01, 1: 0.02, 2: 0.02, 3: 0.0}
    n = repeated_evaluation_noise(shared, fresh, se_shared, se_fresh)  # seed 3 has no shared evaluation: left out
    assert n["seeds"] == [0, 1, 2]
    assert n["per_seed"] == {0: pytest.approx(0.01), 1: pytest.approx(-0.02), 2: pytest.approx(0.01)}
    assert n["mean"] == pytest.approx(0.0)
    assert n["sd"] == pytest.approx(math.sqrt(0.0003))  # (0.01² + 0.02² + 0.01²) / 2, mean 0
    assert n["resolution95"] == pytest.approx(4.302653 * math.sqrt(0.0003) / math.sqrt(3), rel=1e-5)
    assert n["predicted_sd"] == pytest.approx(math.sqrt((0.0002 + 0.0008 + 0.0005) / 3))


def test_repeated_evaluation_noise_measures_no_spread_from_one_seed_or_without_standard_errors():
    one = repeated_evaluation_noise({0: 0.40}, {0: 0.41}, {0: 0.01}, {0: 0.01})
    assert one["per_seed"] == {0: pytest.approx(0.01)}
    assert math.isnan(one["sd"]) and math.isnan(one["resolution95"])
    six = repeated_evaluation_noise({s: 0.5 for s in range(6)}, {s: 0.5 + 0.01 * (s % 2) for s in range(6)})
    assert six["sd"] > 0 and math.isnan(six["predicted_sd"])

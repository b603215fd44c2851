r"""The statistics every experiment reports, in one place.

* :func:`mean_ci95` / :func:`mean_t_interval`: a mean over seeds with its t-interval (3 seeds:
  :math:`t_{0.975, 2} = 4.30`).
* :func:`stratified_standard_error`: the standard error of an evaluation's mean when the tasks
  are fixed and only the sampling of solutions within each task is noise.
* :func:`wilson_interval`: a success rate's interval (scipy's Wilson score interval).
* :func:`repeated_evaluation_noise`: the evaluation's own noise, measured by evaluating one
  policy twice per seed under independent sampling noise.
* :func:`paired_bootstrap_se`: the standard error of a weighted sum of means, resampling the
  same indices for every term, so that what two evaluations share cancels in their difference.
* :func:`within_group_spearman`, :func:`within_group_auroc`, :func:`auroc`: how well scores
  rank outcomes, within the groups that GRPO's advantages compare (a task's rollouts).

**One rule for constant values in a group** (the within-group rankings):

* a group whose *outcomes* are all equal (for AUROC: one class only) has nothing to rank and
  is **skipped**; the result says how many groups were used, NaN when none;
* a group whose *predictions* are all equal while its outcomes differ **counts**, as a scorer
  that ranks nothing: Spearman 0 there, and AUROC 1/2 (every pair a tie, counted 1/2).

Skipping constant predictions instead would score a world model only on the groups it happens
to separate, so a model that predicts one value for most tasks would look as good as its few
varied ones; counting them as "no ranking" keeps Spearman and AUROC on the same footing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "mean_ci95",
    "mean_t_interval",
    "repeated_evaluation_noise",
    "stratified_standard_error",
    "wilson_interval",
    "paired_bootstrap_se",
    "WithinGroup",
    "within_group_spearman",
    "within_group_auroc",
    "auroc",
]


def mean_t_interval(values: Sequence[float | None], confidence: float = 0.95) -> tuple[float, float]:
    r"""Mean and half-width of the t-interval over the finite values (``None`` and NaN dropped).

    :math:`\bar x \pm t_{(1+c)/2,\,n-1}\, s / \sqrt n` with :math:`s` the sample standard
    deviation (``ddof=1``). One value: half-width 0 (no spread is measurable); none: (NaN, NaN).
    """
    from scipy import stats

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if v.size == 0:
        return math.nan, math.nan
    if v.size == 1:
        return float(v[0]), 0.0
    half = stats.t.ppf((1 + confidence) / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return float(v.mean()), float(half)


def repeated_evaluation_noise(
    shared: Mapping[Any, float],
    fresh: Mapping[Any, float],
    shared_se: Mapping[Any, float] | None = None,
    fresh_se: Mapping[Any, float] | None = None,
) -> dict[str, Any]:
    r"""The evaluation's noise measured directly: one policy per seed evaluated twice, under the
    noise the arms share and under fresh noise (``{seed: score}`` each; seeds in both are used).

    With :math:`e_s` = fresh − shared, ``sd`` is :math:`s_e`, the spread of a difference of two
    evaluations of one policy with independent noise, and ``resolution95`` is
    :math:`t_{0.975,\,n-1}\, s_e/\sqrt n`, the half-width the evaluation alone gives a mean
    difference over :math:`n` seeds (paired arms share their noise, so theirs can only be smaller).
    Both are NaN with fewer than two seeds: one difference measures no spread.
    ``predicted_sd``, given each evaluation's own standard error, is what those predict for
    :math:`s_e`: :math:`\sqrt{\overline{se_{shared}^2 + se_{fresh}^2}}` over the seeds (else NaN)."""
    seeds = sorted(set(shared) & set(fresh))
    e = {s: float(fresh[s]) - float(shared[s]) for s in seeds}
    mean, half = mean_t_interval(list(e.values()))
    several = len(e) > 1
    sd = float(np.std(list(e.values()), ddof=1)) if several else math.nan
    predicted = math.nan
    if seeds and shared_se is not None and fresh_se is not None:
        predicted = float(np.sqrt(np.mean([float(shared_se[s]) ** 2 + float(fresh_se[s]) ** 2 for s in seeds])))
    return {
        "seeds": seeds,
        "per_seed": e,
        "mean": mean,
        "sd": sd,
        "resolution95": half if several else math.nan,
        "predicted_sd": predicted,
    }


def mean_ci95(values: Sequence[float | None]) -> tuple[float, float]:
    """Mean and half-width of the 95% t-interval (:func:`mean_t_interval` at 0.95)."""
    return mean_t_interval(values, 0.95)


def stratified_standard_error(values: Sequence[float] | np.ndarray, strata: Sequence[Any]) -> float:
    r"""Standard error of the mean over strata of equal weight, from the spread within each.

    :math:`\mathrm{se} = \frac{1}{T}\sqrt{\sum_t s_t^2 / n_t}` for the estimate
    :math:`\frac{1}{T}\sum_t \bar x_t` over :math:`T` strata of :math:`n_t` values, with
    :math:`s_t^2` the sample variance within stratum :math:`t` (NaNs dropped). The tasks are the
    same at every evaluation, so only the sampling of solutions is noise; differences between
    tasks are not. A stratum with one value has no variance of its own and takes the pooled
    within-stratum variance; NaN without any stratum of two values.

    :raises ValueError: when ``values`` and ``strata`` differ in length.
    """
    x, keys = np.asarray(values, dtype=np.float64), np.asarray([str(k) for k in strata])
    if x.shape != keys.shape:
        raise ValueError(f"{x.size} values for {keys.size} strata")
    groups = [x[(keys == k) & np.isfinite(x)] for k in dict.fromkeys(keys.tolist())]
    groups = [g for g in groups if g.size]
    multi = [g for g in groups if g.size >= 2]
    if not multi:
        return float("nan")
    pooled = sum(float(np.sum((g - g.mean()) ** 2)) for g in multi) / sum(g.size - 1 for g in multi)
    var = sum((float(np.var(g, ddof=1)) if g.size >= 2 else pooled) / g.size for g in groups)
    return float(np.sqrt(var) / len(groups))


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    r"""Wilson score interval of a success rate (``scipy.stats.binomtest(...).proportion_ci``).

    With :math:`p = k/n` and :math:`z` the normal quantile: centre
    :math:`(p + z^2/2n) / (1 + z^2/n)`, half-width
    :math:`z\sqrt{p(1-p)/n + z^2/4n^2} / (1 + z^2/n)`. Unlike the normal interval it stays inside
    [0, 1] and is not degenerate at 0/n or n/n.

    :return: (low, high) as fractions in [0, 1]; (0, 1) when ``trials == 0`` (nothing measured).
    :raises ValueError: unless ``0 <= successes <= trials``.
    """
    from scipy.stats import binomtest

    if trials < 0 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes}/{trials}")
    if trials == 0:
        return 0.0, 1.0
    ci = binomtest(int(successes), int(trials)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def paired_bootstrap_se(
    matrices: Sequence[np.ndarray], weights: Sequence[float], n_boot: int = 2000, seed: int = 0
) -> float:
    r"""Standard error of :math:`\sum_a w_a \bar r_a` by a bootstrap that resamples the same
    indices in every matrix (paired), :math:`\bar r_a` the NaN-aware mean of matrix ``a``.

    Each matrix has shape (tasks, samples), sample ``j`` of task ``i`` being paired across the
    matrices (e.g. drawn with the same random numbers). With two or more samples per task the
    samples are resampled within each task (the task set is fixed: the noise of the evaluation
    itself); with one sample per task that is impossible, so tasks are resampled, which also
    counts the task-to-task spread of the effect (conservative). Weights ``(1, -1)`` give the
    standard error of a difference, from which what the two share cancels.

    :raises ValueError: when the matrices differ in shape or the weights in number.
    """
    mats = [np.asarray(m, dtype=float) for m in matrices]
    if not mats or len(weights) != len(mats) or any(m.shape != mats[0].shape or m.ndim != 2 for m in mats):
        raise ValueError(
            f"need one weight per matrix and matrices of one 2-d shape (tasks, samples); got "
            f"{[m.shape for m in mats]} with {len(weights)} weights"
        )
    rng = np.random.default_rng(seed)
    n_tasks, k = mats[0].shape

    def resample() -> tuple[np.ndarray, np.ndarray]:  # one resample's (rows, cols), from the seeded stream
        if k > 1:
            return np.broadcast_to(np.arange(n_tasks)[:, None], (n_tasks, k)), rng.integers(0, k, size=(n_tasks, k))
        return rng.integers(0, n_tasks, size=(n_tasks, 1)), np.zeros((n_tasks, 1), dtype=int)

    # Resamples are averaged a chunk at a time: vectorized, with memory bounded whatever the matrices' size.
    chunk = max(1, 1_000_000 // max(1, n_tasks * k))
    draws = np.empty(n_boot)
    for start in range(0, n_boot, chunk):
        rows, cols = (np.stack(a) for a in zip(*(resample() for _ in range(min(chunk, n_boot - start)))))
        draws[start : start + len(rows)] = sum(
            w * np.nanmean(m[rows, cols], axis=(1, 2)) for m, w in zip(mats, weights, strict=True)
        )
    return float(np.std(draws, ddof=1))


class WithinGroup(NamedTuple):
    """A ranking statistic averaged over groups, with how many groups it used."""

    value: float
    """The mean over the groups used (Spearman), or the pooled pair share (AUROC); NaN if none."""
    groups: int
    """Groups used: those whose outcomes are not all equal (see the module's rule)."""
    n: int
    """What the groups used hold: values (Spearman), or (success, failure) pairs (AUROC)."""
    per_group: dict[str, float]
    """The statistic of each group used, by group key (``str`` of the group)."""


def _group_masks(groups: Sequence[Any], n: int) -> list[tuple[str, np.ndarray]]:
    keys = np.array([str(g) for g in groups])
    if keys.size != n:
        raise ValueError(f"{keys.size} group labels for {n} values; pass one group per value")
    return [(k, keys == k) for k in dict.fromkeys(keys.tolist())]


def within_group_spearman(
    groups: Sequence[Any],
    predictions: Sequence[float],
    outcomes: Sequence[float],
    *,
    min_size: int = 2,
) -> WithinGroup:
    r"""Mean over groups of Spearman's :math:`\rho` between ``predictions`` and ``outcomes``.

    :math:`\rho_g` is the Pearson correlation of the ranks (ties: mean ranks) within group
    :math:`g`; the result is :math:`\frac{1}{|G|}\sum_{g \in G} \rho_g` over the groups used
    :math:`G`. A group is used when it has at least ``min_size`` finite pairs and its outcomes
    are not all equal; constant predictions there give :math:`\rho_g = 0` (the module's rule).

    :param groups: the group of each value (e.g. a task id), any hashable printed with ``str``.
    :param min_size: the fewest pairs a group needs (2 gives :math:`\rho = \pm 1`).
    """
    from scipy.stats import spearmanr

    p, y = np.asarray(predictions, dtype=float), np.asarray(outcomes, dtype=float)
    if p.shape != y.shape:
        raise ValueError(f"{p.size} predictions for {y.size} outcomes")
    finite = np.isfinite(p) & np.isfinite(y)
    per_group: dict[str, float] = {}
    n = 0
    for key, m in _group_masks(groups, p.size):
        m = m & finite
        if m.sum() < max(2, min_size) or np.ptp(y[m]) == 0:
            continue
        per_group[key] = 0.0 if np.ptp(p[m]) == 0 else float(spearmanr(p[m], y[m]).statistic)
        n += int(m.sum())
    value = float(np.mean(list(per_group.values()))) if per_group else math.nan
    return WithinGroup(value, len(per_group), n, per_group)


def within_group_auroc(groups: Sequence[Any], labels: Sequence[bool], scores: Sequence[float]) -> WithinGroup:
    r"""The share of (success, failure) pairs of the same group that the scores order correctly.

    :math:`\frac{\sum_g \#\{(i,j): s_i > s_j\} + \frac12 \#\{(i,j): s_i = s_j\}}{\sum_g n^+_g n^-_g}`
    over successes :math:`i` and failures :math:`j` of each group :math:`g`: the AUROC of the
    pairs GRPO compares. A group with one class only has no pair and is skipped; tied scores
    count 1/2 (the module's rule); a row without a finite score is left out, as in
    :func:`within_group_spearman`. ``per_group`` holds each used group's own AUROC.
    """
    y, p = np.asarray(labels, dtype=bool), np.asarray(scores, dtype=np.float64)
    if y.shape != p.shape:
        raise ValueError(f"{y.size} labels for {p.size} scores")
    scored = np.isfinite(p)
    wins = pairs = 0.0
    per_group: dict[str, float] = {}
    for key, m in _group_masks(groups, y.size):
        pos, neg = p[m & scored & y], p[m & scored & ~y]
        if not (pos.size and neg.size):
            continue
        w = float((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
        per_group[key] = w / (pos.size * neg.size)
        wins, pairs = wins + w, pairs + pos.size * neg.size
    return WithinGroup(wins / pairs if pairs else math.nan, len(per_group), int(pairs), per_group)


def auroc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    r"""Area under the ROC curve, :math:`P(s_{\text{success}} > s_{\text{failure}})` with ties
    1/2 (scikit-learn's ``roc_auc_score``); NaN with one class only."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(labels, dtype=bool)
    if y.all() or not y.any():
        return math.nan
    return float(roc_auc_score(y, np.asarray(scores, dtype=np.float64)))

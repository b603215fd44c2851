r"""The outcome model: failure and score predicted separately, with an uncertainty per prediction.

A run of program :math:`d` on task :math:`t` either fails (timeout, crash, bad predictions:
reward :math:`-1`) or succeeds with a normalized score :math:`s \in [-1, 1]`. Two gradient-boosted
tree ensembles read the task's meta-features and the program's decisions (trees split on both,
which is what gives task-by-program interactions):

* :math:`p = P(\text{fail} \mid t, d)` (a classifier on every execution),
* :math:`\mu_s = E[s \mid t, d, \text{ok}]` (a regressor on successful executions only),

and the expected reward is

.. math:: E[r] = p \cdot (-1) + (1 - p)\, \mu_s.

The success score is fitted as a task's level and scale times a program's within-task effect,

.. math:: \mu_s(t, d) = L_t + S_t\, \Delta(x_t, d),

where :math:`\Delta` is fitted on within-task z-scores :math:`(s - \bar s_t) / \operatorname{sd}_t`
(:class:`_TaskScaledEffect`): GRPO only sees differences within a group of one task, and on raw or
merely centred scores the tasks with the widest spread take the trees' splits. :math:`L_t` and
:math:`S_t` are the task's own mean and standard deviation, shrunk towards a meta-feature model of
them by :func:`shrunk_task_statistic` (a task never executed gets the meta-feature model's).

Each of :math:`M` members is fitted on a bootstrap resample of the *tasks* (so their spread says
how much the prediction depends on which tasks were seen); the prediction is the members' mean
and its epistemic standard deviation their spread. The aleatoric part of the reward's spread is
the two-outcome mixture's, :math:`\operatorname{Var}[r] = p(1-p)(\mu_s + 1)^2 + (1-p)\,\sigma_s^2`
with :math:`\sigma_s` the residual standard deviation of successful scores (see :func:`reward_moments`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "OutcomeModel",
    "OutcomePrediction",
    "reward_moments",
    "design_matrix",
    "shrunk_task_statistic",
    "SCORE_MODELS",
]

FAILURE_REWARD = -1.0
SCORE_MODELS = ("task_scaled", "task_level", "pooled")
"""How the success score is fitted: level and scale times a within-task effect (default), a level
plus a within-task effect on centred scores (the earlier model), or one regression."""


def shrunk_task_statistic(empirical: np.ndarray, count: np.ndarray, prior: np.ndarray, strength: float) -> np.ndarray:
    r"""A task's statistic shrunk towards its prior (empirical Bayes with a pseudo-count):

    .. math:: \hat\theta_t = \frac{n_t\, \bar\theta_t + k\, \theta_t^{prior}}{n_t + k}

    ``count`` = 0 gives the prior (``empirical`` is then ignored, NaN allowed); ``strength`` = k >= 0.
    """
    n = np.asarray(count, dtype=np.float64)
    w = n / (n + strength) if strength > 0 else (n > 0).astype(np.float64)
    emp = np.where(n > 0, np.asarray(empirical, dtype=np.float64), 0.0)
    return w * emp + (1 - w) * np.asarray(prior, dtype=np.float64)


def reward_moments(
    p_fail: np.ndarray, score_mean: np.ndarray, score_std: np.ndarray, failure_reward: float = FAILURE_REWARD
) -> tuple[np.ndarray, np.ndarray]:
    r"""Mean and standard deviation of the reward of a two-outcome mixture.

    .. math:: E[r] = p f + (1-p)\mu_s, \qquad
              \operatorname{Var}[r] = p(1-p)(\mu_s - f)^2 + (1-p)\sigma_s^2

    with :math:`f` the failure reward.
    """
    p = np.clip(np.asarray(p_fail, dtype=np.float64), 0.0, 1.0)
    mu, sd = np.asarray(score_mean, dtype=np.float64), np.asarray(score_std, dtype=np.float64)
    mean = p * failure_reward + (1 - p) * mu
    var = p * (1 - p) * (mu - failure_reward) ** 2 + (1 - p) * sd**2
    return mean, np.sqrt(var)


def design_matrix(task_features: np.ndarray, choices: np.ndarray) -> np.ndarray:
    """Columns: the task's meta-features, then one column per decision holding the choice index
    (a categorical feature of the trees)."""
    return np.hstack([np.asarray(task_features, dtype=np.float64), np.asarray(choices, dtype=np.float64)])


@dataclass(frozen=True)
class OutcomePrediction:
    """Per prediction: P(failure), score given success, expected reward, and spreads."""

    p_fail: np.ndarray
    score: np.ndarray
    reward: np.ndarray
    reward_std: np.ndarray
    """Total: the mixture's aleatoric spread and the members' epistemic spread, in quadrature."""
    epistemic_std: np.ndarray


class OutcomeModel:
    """Failure classifier + success-score regressor, an ensemble of ``members`` over task bootstraps.

    :param members: ensemble size (``1``: no bootstrap, no epistemic spread).
    :param max_iter, learning_rate, max_leaf_nodes, min_samples_leaf, l2: of every
        :class:`~sklearn.ensemble.HistGradientBoostingClassifier`/``Regressor``.
    :param seed: of the bootstraps and the trees.
    :param threads: OpenMP threads of the trees (fit and predict).
    :param score_model: one of :data:`SCORE_MODELS`: ``"task_scaled"`` (:class:`_TaskScaledEffect`),
        ``"task_level"`` (:class:`_LevelPlusDelta`, the earlier model) or ``"pooled"`` (one regression).
    :param task_prior_strength: ``k`` of :func:`shrunk_task_statistic`, in executions (``task_scaled``).
    """

    def __init__(
        self,
        members: int = 5,
        *,
        max_iter: int = 200,
        learning_rate: float = 0.05,
        max_leaf_nodes: int = 31,
        min_samples_leaf: int = 10,
        l2: float = 1.0,
        seed: int = 0,
        threads: int = 1,
        score_model: str = "task_scaled",
        task_prior_strength: float = 3.0,
    ):
        if members < 1:
            raise ValueError(f"members must be >= 1, got {members}")
        if score_model not in SCORE_MODELS:
            raise ValueError(f"unknown score_model {score_model!r}; known: {list(SCORE_MODELS)}")
        if not task_prior_strength >= 0:
            raise ValueError(f"task_prior_strength must be >= 0 (executions), got {task_prior_strength}")
        self.members = int(members)
        self.tree_kwargs = dict(
            max_iter=max_iter,
            learning_rate=learning_rate,
            max_leaf_nodes=max_leaf_nodes,
            min_samples_leaf=min_samples_leaf,
            l2_regularization=l2,
        )
        self.seed = int(seed)
        self.threads = int(threads)
        self.score_model = score_model
        self.task_prior_strength = float(task_prior_strength)
        self.classifiers: list = []
        self.regressors: list = []
        self.score_std = 0.0
        self.n_features = 0

    def _categorical(self, n_columns: int) -> np.ndarray:
        from wmrl_autoresearch.program.grammar import N_DECISIONS

        mask = np.zeros(n_columns, dtype=bool)
        mask[n_columns - N_DECISIONS :] = True
        return mask

    def fit(self, *args, **kwargs) -> OutcomeModel:
        """Fit on executions (see :meth:`_fit`), one OpenMP thread per tree ensemble: on a shared
        machine, spinning threads made a fit ten times slower, and the data is small."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(self.threads):
            return self._fit(*args, **kwargs)

    def _fit(
        self,
        task_features: np.ndarray,
        choices: np.ndarray,
        failed: np.ndarray,
        score: np.ndarray,
        task_ids: Sequence[str],
    ) -> OutcomeModel:
        """Fit on executions: ``failed`` (bool) and ``score`` (normalized; ignored where failed)."""
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        x = design_matrix(task_features, choices)
        failed = np.asarray(failed, dtype=bool)
        score = np.asarray(score, dtype=np.float64)
        ids = np.asarray(task_ids)
        if not (len(x) == len(failed) == len(score) == len(ids)) or len(x) < 10:
            raise ValueError(f"need >= 10 aligned executions, got {len(x)}, {len(failed)}, {len(score)}, {len(ids)}")
        self.n_features = np.asarray(task_features).shape[1]
        cat = self._categorical(x.shape[1])
        unique = np.unique(ids)
        rng = np.random.default_rng(self.seed)
        self.classifiers, self.regressors, residuals = [], [], []
        for m in range(self.members):
            if self.members == 1:
                rows = np.arange(len(x))
            else:  # bootstrap the tasks: every execution of a drawn task comes along, once per draw
                drawn = rng.choice(unique, size=len(unique), replace=True)
                by_task = {t: np.flatnonzero(ids == t) for t in np.unique(drawn)}
                rows = np.concatenate([by_task[t] for t in drawn])
            kw = dict(self.tree_kwargs, categorical_features=cat, random_state=self.seed + m)
            if failed[rows].all() or not failed[rows].any():
                clf = _Constant(float(failed[rows].mean()))
            else:
                clf = HistGradientBoostingClassifier(**kw).fit(x[rows], failed[rows])
            ok = rows[~failed[rows]]
            if self.score_model == "task_scaled":
                reg = _TaskScaledEffect(kw, self.n_features, self.task_prior_strength).fit(x[ok], score[ok], ids[ok])
            elif self.score_model == "task_level":
                reg = _LevelPlusDelta(kw, self.n_features).fit(x[ok], score[ok], ids[ok])
            else:
                reg = _Pooled(HistGradientBoostingRegressor(**kw).fit(x[ok], score[ok]))
            residuals.append(score[ok] - reg.predict(x[ok], ids[ok]))
            self.classifiers.append(clf)
            self.regressors.append(reg)
        self.score_std = float(np.std(np.concatenate(residuals))) if residuals else 0.0
        return self

    def predict(
        self, task_features: np.ndarray, choices: np.ndarray, task_ids: Sequence[str] | None = None
    ) -> OutcomePrediction:
        """Predictions for (task, program) pairs; ``task_ids`` lets a task seen in the corpus use
        its own level and scale (without them every task gets the meta-feature model's)."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(self.threads):
            return self._predict(task_features, choices, task_ids)

    def _predict(
        self, task_features: np.ndarray, choices: np.ndarray, task_ids: Sequence[str] | None
    ) -> OutcomePrediction:
        if not self.classifiers:
            raise RuntimeError("OutcomeModel.predict before fit")
        x = design_matrix(task_features, choices)
        ids = np.asarray(task_ids) if task_ids is not None else None
        if ids is not None and len(ids) != len(x):
            raise ValueError(f"task_ids has {len(ids)} entries for {len(x)} predictions")
        p = np.stack([c.predict_proba(x)[:, 1] for c in self.classifiers])
        s = np.clip(np.stack([r.predict(x, ids) for r in self.regressors]), -1.0, 1.0)
        member_reward, _ = reward_moments(p, s, np.zeros_like(s))
        p_mean, s_mean = p.mean(0), s.mean(0)
        mean, aleatoric = reward_moments(p_mean, s_mean, np.full_like(s_mean, self.score_std))
        epistemic = member_reward.std(0) if self.members > 1 else np.zeros_like(mean)
        return OutcomePrediction(
            p_fail=p_mean,
            score=s_mean,
            reward=mean,
            reward_std=np.sqrt(aleatoric**2 + epistemic**2),
            epistemic_std=epistemic,
        )


class _Pooled:
    """One regression of the score on task and program features (``score_model="pooled"``);
    like every score model, ``predict(x, ids)`` (task ids unused)."""

    def __init__(self, regressor: Any):
        self.regressor = regressor

    def predict(self, x: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        return self.regressor.predict(x)


class _TaskScaledEffect:
    r"""Success score as :math:`\mu_s(t, d) = L_t + S_t \Delta(x_t, d)`.

    :math:`\Delta` is a tree ensemble on within-task z-scores :math:`(s - \bar s_t)/\operatorname{sd}_t`
    (tasks with one success or constant scores teach it nothing); :math:`L_t` and :math:`\log S_t` are
    the task's empirical mean and log standard deviation shrunk by :func:`shrunk_task_statistic`
    towards tree models of them on the task's meta-features (fitted one row per task, weighted by
    its executions), so a task the corpus never ran still gets a level and a scale."""

    MIN_SD = 1e-3

    def __init__(self, tree_kwargs: dict, n_task_features: int, prior_strength: float):
        self.tree_kwargs, self.n, self.k = tree_kwargs, n_task_features, prior_strength

    def fit(self, x: np.ndarray, score: np.ndarray, ids: np.ndarray) -> _TaskScaledEffect:
        from sklearn.ensemble import HistGradientBoostingRegressor

        tasks, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        means = np.bincount(inverse, weights=score) / counts
        sds = np.sqrt(np.maximum(np.bincount(inverse, weights=score**2) / counts - means**2, 0.0))
        log_sd = np.log(np.maximum(sds, self.MIN_SD))
        first = np.array([np.flatnonzero(inverse == k)[0] for k in range(len(tasks))])
        task_kw = {**self.tree_kwargs, "categorical_features": None, "min_samples_leaf": 3}
        varied = counts > 1
        self.level = HistGradientBoostingRegressor(**task_kw).fit(x[first, : self.n], means, sample_weight=counts)
        self.log_scale = HistGradientBoostingRegressor(**task_kw).fit(
            x[first[varied], : self.n], log_sd[varied], sample_weight=counts[varied]
        )
        self.stats_ = {str(t): (float(m), float(ls), int(c)) for t, m, ls, c in zip(tasks, means, log_sd, counts)}
        rows = varied[inverse] & (sds[inverse] > self.MIN_SD)
        z = (score[rows] - means[inverse[rows]]) / sds[inverse[rows]]
        self.effect = HistGradientBoostingRegressor(**self.tree_kwargs).fit(x[rows], z)
        return self

    def task_level_and_scale(self, task_features: np.ndarray, ids: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """:math:`(L_t, S_t)` of each row: the task's own statistics shrunk towards the meta-feature models'."""
        level, log_scale = self.level.predict(task_features), self.log_scale.predict(task_features)
        if ids is not None:
            stats = [self.stats_.get(str(t), (np.nan, np.nan, 0)) for t in ids]
            mean, log_sd, count = (np.array(col, dtype=np.float64) for col in zip(*stats))
            level = shrunk_task_statistic(mean, count, level, self.k)
            # a task with one success has no spread of its own: its count does not inform the scale
            log_scale = shrunk_task_statistic(log_sd, np.where(count > 1, count, 0), log_scale, self.k)
        return level, np.exp(log_scale)

    def predict(self, x: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        level, scale = self.task_level_and_scale(x[:, : self.n], ids)
        return level + scale * self.effect.predict(x)


class _LevelPlusDelta:
    r"""Success score as :math:`\mu_s(t, d) = L(x_t) + \Delta(x_t, d)`: the level :math:`L` of a task,
    fitted on each task's mean score from its meta-features, and the program's effect
    :math:`\Delta` on scores centred by their task's mean. In one regression the differences
    between tasks, most of the variance, take the trees' splits; GRPO needs the differences
    within a task."""

    def __init__(self, tree_kwargs: dict, n_task_features: int):
        self.tree_kwargs, self.n = tree_kwargs, n_task_features

    def fit(self, x: np.ndarray, score: np.ndarray, ids: np.ndarray) -> _LevelPlusDelta:
        from sklearn.ensemble import HistGradientBoostingRegressor

        tasks, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        means = np.bincount(inverse, weights=score) / counts
        first = np.array([np.flatnonzero(inverse == k)[0] for k in range(len(tasks))])
        level_kw = {**self.tree_kwargs, "categorical_features": None, "min_samples_leaf": 3}
        self.level = HistGradientBoostingRegressor(**level_kw).fit(x[first, : self.n], means, sample_weight=counts)
        self.delta = HistGradientBoostingRegressor(**self.tree_kwargs).fit(x, score - means[inverse])
        return self

    def predict(self, x: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        return self.level.predict(x[:, : self.n]) + self.delta.predict(x)


class _Constant:
    """A classifier of a resample with one class only."""

    def __init__(self, p: float):
        self.p = p

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return np.column_stack([np.full(len(x), 1 - self.p), np.full(len(x), self.p)])

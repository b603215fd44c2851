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
from sklearn.base import BaseEstimator, RegressorMixin

__all__ = [
    "OutcomeModel",
    "OutcomePrediction",
    "reward_moments",
    "design_matrix",
    "shrunk_task_statistic",
    "SCORE_MODELS",
    "FAILURE_REWARD",
]

FAILURE_REWARD = -1.0
SCORE_MODELS = ("task_scaled", "task_level", "pooled")
"""How the success score is fitted: level and scale times a within-task effect (default), a level
plus a within-task effect on centred scores (kept as a baseline: its cross-validated within-task
Spearman is lower, ``build.py --report``), or one regression."""


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


class OutcomeModel(RegressorMixin, BaseEstimator):
    r"""Failure classifier + success-score regressor, an ensemble of ``members`` over task bootstraps
    (a scikit-learn regressor: ``get_params``/``set_params``/``clone`` work, ``predict`` gives the
    expected reward and ``score`` its :math:`R^2`).

    ``X`` is the :func:`design_matrix` of the executions: the task's meta-features, then one column
    per decision of the program grammar (``N_DECISIONS``, the choice index; a categorical feature
    of the trees).

    :param members: ensemble size (``1``: no bootstrap, no epistemic spread).
    :param max_iter, learning_rate, max_leaf_nodes, min_samples_leaf: of every
        :class:`~sklearn.ensemble.HistGradientBoostingClassifier`/``Regressor``.
    :param l2: their ``l2_regularization``.
    :param seed: of the bootstraps and the trees.
    :param threads: OpenMP threads of the trees (fit and predict).
    :param score_model: one of :data:`SCORE_MODELS`: ``"task_scaled"`` (:class:`_TaskScaledEffect`),
        ``"task_level"`` (:class:`_LevelPlusDelta`) or ``"pooled"`` (one regression).
    :param task_prior_strength: ``k`` of :func:`shrunk_task_statistic`, in executions (``task_scaled``).

    Fitted attributes: ``classifiers_`` and ``regressors_`` (one per member), ``score_std_`` (the
    residual standard deviation of successful scores, :math:`\sigma_s`), ``n_task_features_``
    and ``n_features_in_`` (the columns of ``X``).
    """

    def __init__(
        self,
        *,
        members: int = 5,
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
        self.members = members
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.l2 = l2
        self.seed = seed
        self.threads = threads
        self.score_model = score_model
        self.task_prior_strength = task_prior_strength

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A file pickled with the settings in one ``tree_kwargs`` dict and the fitted state under
        # names without the trailing underscore loads into this layout, so saved models keep working.
        if "tree_kwargs" in state:
            state = _suffixed_state(state)
        super().__setstate__(state)

    def _check_params(self) -> None:
        if not int(self.members) >= 1:
            raise ValueError(f"members must be >= 1, got {self.members}")
        if self.score_model not in SCORE_MODELS:
            raise ValueError(f"unknown score_model {self.score_model!r}; known: {list(SCORE_MODELS)}")
        if not float(self.task_prior_strength) >= 0:
            raise ValueError(f"task_prior_strength must be >= 0 (executions), got {self.task_prior_strength}")

    def _tree_kwargs(self) -> dict[str, Any]:
        return dict(
            max_iter=int(self.max_iter),
            learning_rate=float(self.learning_rate),
            max_leaf_nodes=int(self.max_leaf_nodes),
            min_samples_leaf=int(self.min_samples_leaf),
            l2_regularization=float(self.l2),
        )

    def _design(self, X: Any, *, fitting: bool) -> np.ndarray:
        from wmrl_autoresearch.program.grammar import N_DECISIONS

        x = np.asarray(X, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] < N_DECISIONS:
            raise ValueError(
                f"X must be 2-d with the task features then the {N_DECISIONS} decision columns "
                f"(design_matrix(task_features, choices)), got shape {x.shape}"
            )
        if not fitting and x.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {x.shape[1]} columns; this OutcomeModel was fitted on {self.n_features_in_}")
        return x

    def fit(self, X: Any, y: Any, *, failed: Any, task_ids: Sequence[str]) -> OutcomeModel:
        """Fit on executions, one OpenMP thread per tree ensemble by default (``threads``): on a
        shared machine, spinning threads made a fit ten times slower, and the data is small.

        :param X: (n, task features + ``N_DECISIONS``), :func:`design_matrix` of the executions.
        :param y: (n,) reward of each execution: its normalized score where it succeeded (where
            ``failed`` the value is not used; a failure's reward is :data:`FAILURE_REWARD`).
        :param failed: (n,) bool, the execution failed (timeout, crash, bad predictions).
        :param task_ids: (n,) the task of each execution: the bootstrap resamples tasks, and a
            task's own level and scale are kept for :meth:`predict_outcome`.
        """
        from threadpoolctl import threadpool_limits

        self._check_params()
        with threadpool_limits(int(self.threads)):
            return self._fit(self._design(X, fitting=True), y, failed, task_ids)

    def _fit(self, x: np.ndarray, y: Any, failed: Any, task_ids: Sequence[str]) -> OutcomeModel:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        from wmrl_autoresearch.program.grammar import N_DECISIONS

        failed = np.asarray(failed, dtype=bool)
        score = np.asarray(y, dtype=np.float64)
        ids = np.asarray(task_ids)
        if not (len(x) == len(failed) == len(score) == len(ids)) or len(x) < 10:
            raise ValueError(f"need >= 10 aligned executions, got {len(x)}, {len(failed)}, {len(score)}, {len(ids)}")
        members, seed = int(self.members), int(self.seed)
        n_task = x.shape[1] - N_DECISIONS
        cat = np.arange(x.shape[1]) >= n_task
        tree_kwargs = self._tree_kwargs()
        unique = np.unique(ids)
        rng = np.random.default_rng(seed)
        classifiers: list[Any] = []
        regressors: list[Any] = []
        residuals = []
        for m in range(members):
            if members == 1:
                rows = np.arange(len(x))
            else:  # bootstrap the tasks: every execution of a drawn task comes along, once per draw
                drawn = rng.choice(unique, size=len(unique), replace=True)
                by_task = {t: np.flatnonzero(ids == t) for t in np.unique(drawn)}
                rows = np.concatenate([by_task[t] for t in drawn])
            kw = dict(tree_kwargs, categorical_features=cat, random_state=seed + m)
            if failed[rows].all() or not failed[rows].any():
                clf: Any = _Constant(float(failed[rows].mean()))
            else:
                clf = HistGradientBoostingClassifier(**kw).fit(x[rows], failed[rows])
            ok = rows[~failed[rows]]
            reg: Any
            if self.score_model == "task_scaled":
                reg = _TaskScaledEffect(kw, n_task, float(self.task_prior_strength)).fit(x[ok], score[ok], ids[ok])
            elif self.score_model == "task_level":
                reg = _LevelPlusDelta(kw, n_task).fit(x[ok], score[ok], ids[ok])
            else:
                reg = _Pooled(HistGradientBoostingRegressor(**kw).fit(x[ok], score[ok]))
            residuals.append(score[ok] - reg.predict(x[ok], ids[ok]))
            classifiers.append(clf)
            regressors.append(reg)
        self.classifiers_, self.regressors_ = classifiers, regressors
        self.score_std_ = float(np.std(np.concatenate(residuals))) if residuals else 0.0
        self.n_task_features_, self.n_features_in_ = n_task, x.shape[1]
        return self

    def predict(self, X: Any, task_ids: Sequence[str] | None = None) -> np.ndarray:
        r"""The expected reward :math:`E[r] = -p + (1-p)\mu_s` of each row (see :meth:`predict_outcome`)."""
        return self.predict_outcome(X, task_ids).reward

    def predict_outcome(self, X: Any, task_ids: Sequence[str] | None = None) -> OutcomePrediction:
        """Predictions for (task, program) rows of ``X`` (:func:`design_matrix`); ``task_ids`` lets a
        task seen in the fit use its own level and scale (without them every task gets the
        meta-feature model's)."""
        from sklearn.utils.validation import check_is_fitted
        from threadpoolctl import threadpool_limits

        check_is_fitted(self)
        with threadpool_limits(int(self.threads)):
            return self._predict(self._design(X, fitting=False), task_ids)

    def _predict(self, x: np.ndarray, task_ids: Sequence[str] | None) -> OutcomePrediction:
        ids = np.asarray(task_ids) if task_ids is not None else None
        if ids is not None and len(ids) != len(x):
            raise ValueError(f"task_ids has {len(ids)} entries for {len(x)} predictions")
        p = np.stack([c.predict_proba(x)[:, 1] for c in self.classifiers_])
        s = np.clip(np.stack([r.predict(x, ids) for r in self.regressors_]), -1.0, 1.0)
        member_reward, _ = reward_moments(p, s, np.zeros_like(s))
        p_mean, s_mean = p.mean(0), s.mean(0)
        mean, aleatoric = reward_moments(p_mean, s_mean, np.full_like(s_mean, self.score_std_))
        epistemic = member_reward.std(0) if len(self.classifiers_) > 1 else np.zeros_like(mean)
        return OutcomePrediction(
            p_fail=p_mean,
            score=s_mean,
            reward=mean,
            reward_std=np.sqrt(aleatoric**2 + epistemic**2),
            epistemic_std=epistemic,
        )


def _suffixed_state(state: dict[str, Any]) -> dict[str, Any]:
    """An :class:`OutcomeModel` pickle's ``__dict__`` with the tree settings in ``tree_kwargs`` and
    the fitted state in ``classifiers``, ``regressors``, ``score_std``, ``n_features``, rewritten
    as this class's parameters and fitted attributes."""
    from wmrl_autoresearch.program.grammar import N_DECISIONS

    state = dict(state)
    trees = state.pop("tree_kwargs")
    state.update({k: trees[k] for k in ("max_iter", "learning_rate", "max_leaf_nodes", "min_samples_leaf")})
    state["l2"] = trees["l2_regularization"]
    classifiers, regressors = state.pop("classifiers", []), state.pop("regressors", [])
    score_std, n_task = state.pop("score_std", 0.0), state.pop("n_features", 0)
    if classifiers:  # fitted: an unfitted model gets no fitted attributes
        state.update(
            classifiers_=classifiers,
            regressors_=regressors,
            score_std_=score_std,
            n_task_features_=n_task,
            n_features_in_=n_task + N_DECISIONS,
        )
    return state


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

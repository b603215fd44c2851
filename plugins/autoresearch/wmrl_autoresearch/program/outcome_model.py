r"""The outcome model: failure and score predicted separately, with an uncertainty per prediction.

A run of program :math:`d` on task :math:`t` either fails (timeout, crash, bad predictions:
reward :math:`-1`) or succeeds with a normalized score :math:`s \in [-1, 1]`. Two gradient-boosted
tree ensembles read the task's meta-features and the program's decisions (trees split on both,
which is what gives task-by-program interactions):

* :math:`p = P(\text{fail} \mid t, d)` (a classifier on every execution),
* :math:`\mu_s = E[s \mid t, d, \text{ok}]` (a regressor on successful executions only),

and the expected reward is

.. math:: E[r] = p \cdot (-1) + (1 - p)\, \mu_s.

Each of :math:`M` members is fitted on a bootstrap resample of the *tasks* (so their spread says
how much the prediction depends on which tasks were seen); the prediction is the members' mean
and its epistemic standard deviation their spread. The aleatoric part of the reward's spread is
the two-outcome mixture's, :math:`\operatorname{Var}[r] = p(1-p)(\mu_s + 1)^2 + (1-p)\,\sigma_s^2`
with :math:`\sigma_s` the residual standard deviation of successful scores (see :func:`reward_moments`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["OutcomeModel", "OutcomePrediction", "reward_moments", "design_matrix"]

FAILURE_REWARD = -1.0


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
    :param task_level: fit the success score as a task level plus a within-task program effect
        (:class:`_LevelPlusDelta`) rather than in one regression.
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
        task_level: bool = True,
    ):
        if members < 1:
            raise ValueError(f"members must be >= 1, got {members}")
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
        self.task_level = bool(task_level)
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
            if self.task_level:
                reg = _LevelPlusDelta(kw, self.n_features).fit(x[ok], score[ok], ids[ok])
            else:
                reg = HistGradientBoostingRegressor(**kw).fit(x[ok], score[ok])
            residuals.append(score[ok] - reg.predict(x[ok]))
            self.classifiers.append(clf)
            self.regressors.append(reg)
        self.score_std = float(np.std(np.concatenate(residuals))) if residuals else 0.0
        return self

    def predict(self, task_features: np.ndarray, choices: np.ndarray) -> OutcomePrediction:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(self.threads):
            return self._predict(task_features, choices)

    def _predict(self, task_features: np.ndarray, choices: np.ndarray) -> OutcomePrediction:
        if not self.classifiers:
            raise RuntimeError("OutcomeModel.predict before fit")
        x = design_matrix(task_features, choices)
        p = np.stack([c.predict_proba(x)[:, 1] for c in self.classifiers])
        s = np.clip(np.stack([r.predict(x) for r in self.regressors]), -1.0, 1.0)
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

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.level.predict(x[:, : self.n]) + self.delta.predict(x)


class _Constant:
    """A classifier of a resample with one class only."""

    def __init__(self, p: float):
        self.p = p

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return np.column_stack([np.full(len(x), 1 - self.p), np.full(len(x), self.p)])

"""The outcome model (failure and score apart, a spread per prediction) and the grouped
cross-validation that scores world models on new programs."""

import numpy as np
import pytest
from wmrl_autoresearch.program.cross_validation import cross_validate, program_folds, within_task_spearman
from wmrl_autoresearch.program.grammar import N_OPTIONS, Program
from wmrl_autoresearch.program.outcome_model import OutcomeModel, design_matrix, reward_moments, shrunk_task_statistic


def test_reward_moments_of_the_two_outcome_mixture():
    # p = 0.25, mu = 0.6, sd = 0.2, failure -1: mean = -0.25 + 0.75 * 0.6 = 0.2;
    # var = 0.25 * 0.75 * 1.6^2 + 0.75 * 0.04 = 0.48 + 0.03 = 0.51
    mean, sd = reward_moments(np.array([0.25]), np.array([0.6]), np.array([0.2]))
    assert mean[0] == pytest.approx(0.2) and sd[0] == pytest.approx(np.sqrt(0.51))
    mean, sd = reward_moments(np.array([0.0, 1.0]), np.array([0.3, 0.3]), np.array([0.1, 0.1]))
    assert mean.tolist() == pytest.approx([0.3, -1.0]) and sd.tolist() == pytest.approx([0.1, 0.0])


def test_program_folds_keep_a_program_in_one_fold():
    choices = np.array([[0] * 8, [1] * 8, [0] * 8, [1, 0, 0, 0, 0, 0, 0, 0], [1] * 8])
    folds = program_folds(choices, n_folds=2, seed=0)
    assert folds[0] == folds[2] and folds[1] == folds[4] and set(folds) <= {0, 1}


def test_within_task_spearman_by_hand():
    ids = np.array(["a"] * 4 + ["b"] * 3 + ["c"] * 2 + ["d"] * 3)
    real = np.array([1, 2, 3, 4, 3, 2, 1, 5, 6, 0.5, 0.5, 0.5])
    pred = np.array([1, 2, 3, 4, 1, 2, 3, 0, 0, 1, 2, 3])
    # a: perfect order; b: reversed; c: too few; d: constant reward (nothing to rank)
    assert within_task_spearman(ids, pred, real) == {"a": 1.0, "b": -1.0}
    assert within_task_spearman(ids, np.zeros(12), real) == {"a": 0.0, "b": 0.0}  # a constant prediction


def _synthetic(n_tasks=30, per_task=16, seed=0):
    """Tasks with one feature f; model choice 0 fails on tasks with f > 0.5; the score of a
    success rises with the scale choice where f < 0.5 and falls with it elsewhere (an interaction)."""
    rng = np.random.default_rng(seed)
    f = rng.uniform(size=n_tasks)
    rows = {"task_ids": [], "features": [], "choices": [], "failed": [], "reward": []}
    for t in range(n_tasks):
        for _ in range(per_task):
            c = np.array(Program.sample(rng).choices)
            failed = c[3] == 0 and f[t] > 0.5
            sign = 1.0 if f[t] < 0.5 else -1.0
            score = 0.2 * f[t] + 0.15 * sign * c[1] / (N_OPTIONS[1] - 1) + rng.normal(0, 0.02)
            rows["task_ids"].append(f"t{t}")
            rows["features"].append([f[t], 1.0])
            rows["choices"].append(c)
            rows["failed"].append(failed)
            rows["reward"].append(-1.0 if failed else score)
    return {k: np.array(v) for k, v in rows.items()}


def _fit(model: OutcomeModel, a: dict) -> OutcomeModel:
    return model.fit(
        design_matrix(a["features"], a["choices"]), a["reward"], failed=a["failed"], task_ids=a["task_ids"]
    )


def test_learns_failures_and_task_by_program_interactions_with_a_spread():
    a = _synthetic()
    model = _fit(OutcomeModel(members=3, max_iter=100), a)
    probe_f = np.array([[0.2, 1.0], [0.8, 1.0]])
    fails = np.array([[0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 0, 0]])
    p = model.predict_outcome(design_matrix(np.repeat(probe_f, 2, axis=0), np.tile(fails, (2, 1)))).p_fail
    assert p[2] > 0.8 and max(p[0], p[1], p[3]) < 0.2  # model 0 fails only where f > 0.5
    low, high = [0, 0, 0, 1, 0, 0, 0, 0], [0, 3, 0, 1, 0, 0, 0, 0]
    out = model.predict_outcome(design_matrix(np.repeat(probe_f, 2, axis=0), np.array([low, high, low, high])))
    assert out.score[1] > out.score[0] and out.score[3] < out.score[2]  # the interaction, both ways
    assert (out.reward_std > 0).all() and (out.epistemic_std > 0).all() and (out.reward_std >= out.epistemic_std).all()


@pytest.mark.slow  # nine small tree fits
def test_cross_validation_ranks_new_programs_and_scores_models_on_shared_folds():
    a = _synthetic(n_tasks=12, per_task=12)

    def outcome(train, test):
        m = _fit(OutcomeModel(members=1, max_iter=60), train)
        return {"reward": m.predict(design_matrix(test["features"], test["choices"]))}

    def constant(train, test):
        return np.zeros(len(test["reward"]))

    res = cross_validate(a, {"outcome": outcome, "constant": constant}, n_folds=3)
    assert res["outcome"]["within_task_spearman"] > 0.4 and res["constant"]["within_task_spearman"] == 0.0
    assert res["outcome"]["n_tasks"] == res["constant"]["n_tasks"] == 12
    assert (
        res["outcome"]["within_task_spearman_per_fold"] > 0.25 and res["constant"]["within_task_spearman_per_fold"] == 0
    )
    assert res["outcome"]["n_task_folds"] == res["constant"]["n_task_folds"] > 12


def test_shrunk_task_statistic_by_hand():
    # (3 * 1.0 + 1 * 0.0) / (3 + 1) = 0.75; no executions: the prior; k = 0: the task's own value
    out = shrunk_task_statistic(np.array([1.0, np.nan, 1.0]), np.array([3, 0, 3]), np.zeros(3), strength=1.0)
    assert out.tolist() == pytest.approx([0.75, 0.0, 0.75])
    assert shrunk_task_statistic(np.array([1.0]), np.array([2]), np.array([5.0]), strength=0.0)[0] == 1.0


def test_task_scaled_score_uses_each_tasks_own_level_and_scale():
    """Level and spread differ by task in ways the meta-features do not tell (one constant feature);
    the program effect (the scale choice) is shared in z-units. With task ids the model recovers
    each task's level and spread; without them every task gets the same, meta-feature prediction."""
    rng = np.random.default_rng(0)
    n_tasks, per_task = 24, 20
    level, spread = rng.uniform(-0.5, 0.5, n_tasks), rng.uniform(0.02, 0.3, n_tasks)
    rows = {"task_ids": [], "features": [], "choices": [], "failed": [], "reward": []}
    for t in range(n_tasks):
        for _ in range(per_task):
            c = np.array(Program.sample(rng).choices)
            rows["task_ids"].append(f"t{t}")
            rows["features"].append([1.0])
            rows["choices"].append(c)
            rows["failed"].append(False)
            rows["reward"].append(level[t] + spread[t] * (c[1] - 1.5) / 1.1 + rng.normal(0, 0.01))
    a = {k: np.array(v) for k, v in rows.items()}
    model = _fit(OutcomeModel(members=1, max_iter=100), a)
    probe = design_matrix(np.ones((2 * N_OPTIONS[1], 1)), [[0, s, 0, 0, 0, 0, 0, 0] for s in range(N_OPTIONS[1])] * 2)
    ids = ["t0"] * N_OPTIONS[1] + ["t1"] * N_OPTIONS[1]
    own = model.predict_outcome(probe, ids).score.reshape(2, -1)
    for t in (0, 1):  # the task's mean, shrunk 3 executions' worth towards the mean of all tasks
        assert own[t].mean() == pytest.approx((20 * level[t] + 3 * level.mean()) / 23, abs=0.03)
        assert np.ptp(own[t]) == pytest.approx(2 * 1.5 / 1.1 * spread[t], rel=0.35)
        assert (np.diff(own[t]) > 0).all()
    blind = model.predict_outcome(probe).score.reshape(2, -1)
    assert blind[0] == pytest.approx(blind[1])  # the features cannot tell the tasks apart
    with pytest.raises(ValueError, match="task_ids"):
        model.predict_outcome(probe[:2], ["t0"])
    with pytest.raises(ValueError, match="score_model"):
        _fit(OutcomeModel(score_model="nonsense"), a)

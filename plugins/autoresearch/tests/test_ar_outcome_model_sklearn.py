"""The outcome model keeps scikit-learn's estimator conventions (parameters in ``__init__`` only,
fitted state with a trailing underscore, ``NotFittedError``, ``clone``), and saved models load."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted
from wmrl_autoresearch.program.grammar import N_DECISIONS, Program
from wmrl_autoresearch.program.outcome_model import OutcomeModel, design_matrix
from wmrl_autoresearch.program.world_model import load_outcome_model, save_outcome_model

SETTINGS = dict(members=2, max_iter=20, min_samples_leaf=5, seed=3)


@pytest.fixture(scope="module")
def executions():
    """12 tasks x 8 programs: choice 0 of decision 3 fails; the score rises with decision 1's choice."""
    rng = np.random.default_rng(0)
    choices = np.array([Program.sample(rng).choices for _ in range(96)])
    features = np.repeat(rng.uniform(size=(12, 2)), 8, axis=0)
    failed = choices[:, 3] == 0
    reward = np.where(failed, -1.0, 0.1 * choices[:, 1] + features[:, 0] + rng.normal(0, 0.01, 96))
    return {
        "X": design_matrix(features, choices),
        "y": reward,
        "failed": failed,
        "task_ids": np.repeat([f"t{i}" for i in range(12)], 8),
    }


def _fit(model, e):
    return model.fit(e["X"], e["y"], failed=e["failed"], task_ids=e["task_ids"])


def test_parameters_only_in_init_and_fitted_state_with_underscores(executions):
    model = OutcomeModel(**SETTINGS)
    assert set(vars(model)) == set(model.get_params())  # __init__ stores its parameters, nothing else
    assert model.get_params()["max_iter"] == 20 and model.get_params()["l2"] == 1.0
    with pytest.raises(NotFittedError):
        check_is_fitted(model)
    with pytest.raises(NotFittedError):
        model.predict(executions["X"])
    _fit(model, executions)
    check_is_fitted(model)
    fitted = set(vars(model)) - set(model.get_params())
    assert fitted == {"classifiers_", "regressors_", "score_std_", "n_task_features_", "n_features_in_"}
    assert model.n_features_in_ == 2 + N_DECISIONS and model.n_task_features_ == 2
    assert len(model.classifiers_) == len(model.regressors_) == 2


def test_clone_gives_an_unfitted_copy_that_refits_identically(executions):
    model = _fit(OutcomeModel(**SETTINGS), executions)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    with pytest.raises(NotFittedError):
        check_is_fitted(copy)
    _fit(copy, executions)
    np.testing.assert_array_equal(copy.predict(executions["X"]), model.predict(executions["X"]))
    other = clone(model).set_params(members=1)
    assert other.get_params()["members"] == 1 and model.get_params()["members"] == 2


def test_predict_is_the_expected_reward_and_score_its_r2(executions):
    model = _fit(OutcomeModel(**SETTINGS), executions)
    out = model.predict_outcome(executions["X"], executions["task_ids"])
    np.testing.assert_array_equal(model.predict(executions["X"], executions["task_ids"]), out.reward)
    # E[r] = -p + (1 - p) * mu_s, the two-outcome mixture
    np.testing.assert_allclose(out.reward, -out.p_fail + (1 - out.p_fail) * out.score)
    y, pred = executions["y"], model.predict(executions["X"])
    r2 = 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)
    assert model.score(executions["X"], y) == pytest.approx(r2) and r2 > 0.5


def test_bad_input_names_the_problem(executions):
    model = _fit(OutcomeModel(**SETTINGS), executions)
    with pytest.raises(ValueError, match="decision columns"):
        model.fit(executions["X"][:, :3], executions["y"], failed=executions["failed"], task_ids=executions["task_ids"])
    with pytest.raises(ValueError, match="fitted on 10"):
        model.predict(np.hstack([np.zeros((2, 1)), executions["X"][:2]]))
    with pytest.raises(ValueError, match="members must be >= 1"):
        _fit(OutcomeModel(members=0), executions)
    with pytest.raises(ValueError, match="task_prior_strength"):
        _fit(OutcomeModel(task_prior_strength=-1.0), executions)
    with pytest.raises(TypeError):
        OutcomeModel(5)  # keyword-only parameters


class _PickledWithTheUnsuffixedLayout:
    """Pickles as an ``OutcomeModel`` whose ``__dict__`` has the settings in ``tree_kwargs`` and the
    fitted state in ``classifiers``/``regressors``/``score_std``/``n_features``: the layout of
    models saved before the class kept scikit-learn's naming."""

    def __init__(self, model: OutcomeModel):
        p = model.get_params()
        self.state = {
            "members": p["members"],
            "tree_kwargs": {
                "max_iter": p["max_iter"],
                "learning_rate": p["learning_rate"],
                "max_leaf_nodes": p["max_leaf_nodes"],
                "min_samples_leaf": p["min_samples_leaf"],
                "l2_regularization": p["l2"],
            },
            "seed": p["seed"],
            "threads": p["threads"],
            "score_model": p["score_model"],
            "task_prior_strength": p["task_prior_strength"],
            "classifiers": model.classifiers_,
            "regressors": model.regressors_,
            "score_std": model.score_std_,
            "n_features": model.n_task_features_,
        }

    def __reduce__(self):
        return (object.__new__, (OutcomeModel,), self.state)


def test_a_model_saved_with_the_unsuffixed_layout_still_loads_and_predicts_the_same(executions, tmp_path):
    model = _fit(OutcomeModel(**SETTINGS), executions)
    path = tmp_path / "outcome_model.pkl"
    save_outcome_model(_PickledWithTheUnsuffixedLayout(model), path, {"fit": {}})
    loaded, info = load_outcome_model(path)
    assert isinstance(loaded, OutcomeModel) and info == {"fit": {}}
    assert loaded.get_params() == model.get_params()
    check_is_fitted(loaded)
    assert loaded.n_features_in_ == model.n_features_in_
    x, ids = executions["X"], executions["task_ids"]
    a, b = loaded.predict_outcome(x, ids), model.predict_outcome(x, ids)
    np.testing.assert_array_equal(a.reward, b.reward)
    np.testing.assert_array_equal(a.reward_std, b.reward_std)


def test_a_file_without_a_fitted_model_fails_with_the_rebuild_command(tmp_path):
    unfitted = tmp_path / "unfitted.pkl"
    save_outcome_model(OutcomeModel(), unfitted, {})
    with pytest.raises(ValueError, match="no fitted outcome model.*program.build --out"):
        load_outcome_model(unfitted)
    other = tmp_path / "other.pkl"
    other.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(ValueError, match="not a file written by save_outcome_model"):
        load_outcome_model(other)

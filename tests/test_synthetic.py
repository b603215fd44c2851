import numpy as np
import pytest

from wmrl_core.synthetic.bandit import BanditTruth, SyntheticBanditEnvironment
from wmrl_core.synthetic.world_model import SyntheticWorldModel


def test_raw_world_model_optimum_is_a_truly_worse_arm():
    env = SyntheticBanditEnvironment()
    wm = SyntheticWorldModel(env)
    mc = np.array(
        [[np.mean(wm.predict([task] * 4000, [a] * 4000)) for a in range(env.truth.num_arms)] for task in env.tasks()]
    )
    for t in range(env.truth.num_tasks):
        raw_best, true_best = np.argmax(mc[t]), np.argmax(env.truth.mu[t])
        assert raw_best != true_best
        assert env.truth.mu[t, raw_best] < env.truth.mu[t, true_best] - 0.25


def test_independent_and_perfect_world_models():
    env = SyntheticBanditEnvironment(num_tasks=2)
    task = env.tasks()[0]
    indep = SyntheticWorldModel(env, quality="independent", noise=0.0)
    preds = {a: np.mean(indep.predict([task] * 3000, [a] * 3000)) for a in range(env.truth.num_arms)}
    assert max(preds.values()) - min(preds.values()) < 0.03
    perfect = SyntheticWorldModel(env, quality="perfect", noise=0.0)
    np.testing.assert_allclose(perfect.predict([task] * 3, [0, 1, 2]), env.truth.mu[0, :3])


def test_real_execution_is_noisy_truth_with_declared_cost():
    env = SyntheticBanditEnvironment(execution_noise=0.1, execution_cost_s=2.5)
    task = env.tasks()[0]
    out = env.execute([task] * 2000, [3] * 2000)
    scores = np.array([o.score for o in out])
    assert abs(scores.mean() - env.truth.mu[0, 3]) < 0.01
    assert 0.08 < scores.std() < 0.12
    assert env.cost.cost(4) == 10.0
    assert BanditTruth().optimum == 0.9


def test_expected_prediction_matches_the_code():
    env = SyntheticBanditEnvironment(num_tasks=2)
    task = env.tasks()[0]
    for quality in ("miscalibrated", "confident_decoy", "independent", "perfect"):
        wm = SyntheticWorldModel(env, quality=quality, seed=1)
        for arm in (env.truth.best[0], env.truth.decoy[0], 0):
            mc = np.mean(wm.predict([task] * 20000, [int(arm)] * 20000))
            assert mc == pytest.approx(wm.expected_prediction(0, int(arm)), rel=0.02, abs=0.002), (quality, arm)


def test_confident_decoy_ranks_the_decoy_just_above_the_best_arm_with_little_spread():
    env = SyntheticBanditEnvironment()
    wm = SyntheticWorldModel(env, quality="confident_decoy")
    for t, task in enumerate(env.tasks()):
        best, decoy = int(env.truth.best[t]), int(env.truth.decoy[t])
        w_best = np.array(wm.predict([task] * 500, [best] * 500))
        w_decoy = np.array(wm.predict([task] * 500, [decoy] * 500))
        assert 0 < w_decoy.mean() - w_best.mean() < 0.1
        assert w_decoy.std() < 0.03
        means = [wm.expected_prediction(t, a) for a in range(env.truth.num_arms)]
        assert np.argmax(means) == decoy and np.argsort(means)[-2] == best


def test_each_truth_seed_draws_its_own_bandit():
    a, b = BanditTruth(seed=0), BanditTruth(seed=1)
    assert not np.allclose(a.mu, b.mu)
    assert a.optimum == b.optimum == 0.9
    for truth in (a, b):
        np.testing.assert_allclose(truth.mu[np.arange(truth.num_tasks), truth.best], 0.9)
        np.testing.assert_allclose(truth.mu[np.arange(truth.num_tasks), truth.decoy], 0.6)

"""The embedded program policy and its learned world model (no Docker needed here)."""

import ast
import itertools
import pickle

import numpy as np
import pytest
import torch
from wmrl_autoresearch.program.grammar import DECISIONS, N_DECISIONS, Program, ProgramScript, programs_of
from wmrl_autoresearch.program.policy import ProgramPolicy
from wmrl_autoresearch.program.render import render_script
from wmrl_autoresearch.program.world_model import fit_reward_model, raw_score_for_reward
from wmrl_autoresearch.tasks.builtin_suite import builtin_tasks

from wmrl_core.grpo import grpo_loss


@pytest.fixture(scope="module")
def tasks():
    return builtin_tasks("train")


def test_program_roundtrip_and_validation():
    p = Program.from_names({name: options[-1] for name, options in DECISIONS})
    assert Program.from_names(p.names) == p
    assert p.one_hot().sum() == N_DECISIONS
    with pytest.raises(ValueError, match="out of range"):
        Program((99,) + p.choices[1:])
    with pytest.raises(ValueError, match="invalid program"):
        Program.from_names({"model": "gpt"})


@pytest.mark.parametrize("classification", [True, False])
def test_every_model_and_feature_step_renders_valid_python(classification):
    model_options = dict(DECISIONS)["model"]
    feature_options = dict(DECISIONS)["features"]
    for model, features, ensemble in itertools.product(model_options, feature_options, ("none", "bagging")):
        names = {name: options[0] for name, options in DECISIONS} | {
            "model": model,
            "features": features,
            "ensemble": ensemble,
        }
        script = render_script(Program.from_names(names), classification=classification)
        ast.parse(script)
        assert "predictions.csv" in script and "DATA_DIR" in script
        assert Program.parse(script) == Program.from_names(names)


def test_program_script_survives_pickling_and_plain_strings_parse():
    p = Program.sample(np.random.default_rng(0))
    script = render_script(p, classification=True)
    assert pickle.loads(pickle.dumps(script)).program == p
    assert programs_of([str(script), "print('hi')"]) == [p, None]
    assert isinstance(script, str) and isinstance(script, ProgramScript)


@pytest.mark.slow
def test_policy_logprobs_match_and_update_moves_toward_advantage(tasks):
    torch.manual_seed(0)
    policy = ProgramPolicy(seed=0)
    rollouts = policy.generate(tasks[:3], 8)
    assert rollouts.old_log_probs.shape == (24, N_DECISIONS)
    torch.testing.assert_close(policy.log_probs(rollouts), rollouts.old_log_probs)
    # reward the rollouts whose model is random_forest; GRPO must raise its probability
    rf = dict(DECISIONS)["model"].index("random_forest")
    adv = torch.tensor([1.0 if s.program.choices[3] == rf else -0.2 for s in rollouts.solutions])
    opt = torch.optim.Adam(policy.parameters(), lr=0.05)
    before = policy.decision_marginals(tasks[0], 512)["model"]["random_forest"]
    for _ in range(20):
        loss = grpo_loss(policy.log_probs(rollouts), rollouts.old_log_probs, adv, rollouts.mask, clip_eps=10.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = policy.decision_marginals(tasks[0], 512)["model"]["random_forest"]
    assert after > before + 0.1


def test_same_seed_same_untrained_policy():
    a, b = ProgramPolicy(seed=3), ProgramPolicy(seed=3)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb)


@pytest.mark.slow
def test_reward_model_fits_a_known_function(tasks):
    rng = np.random.default_rng(0)
    programs = [Program.sample(rng) for _ in range(400)]
    feats = np.stack([tasks[i % len(tasks)].features for i in range(400)])
    one_hot = np.stack([p.one_hot() for p in programs])
    # reward: 0.8 for hist_gb, -1 for svm, 0.4 otherwise
    y = np.array([{5: 0.8, 7: -1.0}.get(p.choices[3], 0.4) for p in programs], dtype=np.float32)
    model = fit_reward_model(feats, one_hot, y, epochs=300)
    with torch.no_grad():
        pred = model(torch.as_tensor(feats), torch.as_tensor(one_hot)).numpy()
    assert np.mean((pred - y) ** 2) < 0.01


def test_raw_score_inverts_normalization(tasks):
    from wmrl_autoresearch.tasks.task_metrics import normalized_score

    for task in tasks:
        t = task.data
        for r in (-0.5, 0.0, 0.7):
            assert normalized_score(t.metric_spec, raw_score_for_reward(t, r), t.baseline) == pytest.approx(r)

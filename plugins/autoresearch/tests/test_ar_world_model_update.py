"""The program world model keeps learning from anchors: per-task ridge corrections of the
shipped model's residuals (``TaskCorrections``), hand-checked, and resumed exactly."""

from pathlib import Path

import numpy as np
import pytest
from wmrl_autoresearch.program import world_model
from wmrl_autoresearch.program.grammar import N_DECISIONS, ONE_HOT_SIZE, Program, ProgramScript
from wmrl_autoresearch.program.render import render_script
from wmrl_autoresearch.program.world_model import LearnedWorldModel, TaskCorrections, raw_score_for_reward
from wmrl_autoresearch.tasks.builtin_suite import builtin_tasks

from wmrl_core.contracts import LearnsFromAnchors
from wmrl_core.types import Outcome

# the update's logic on the small ridge prior (the default outcome model is fitted at first use: slow)
RIDGE = str(Path(world_model.__file__).with_name("data") / world_model.RIDGE_BASELINE_CHECKPOINT)


@pytest.fixture(scope="module")
def tasks():
    return builtin_tasks("train")


def _script(program):
    return ProgramScript(render_script(program, classification=True), program)  # the header is what parses


def test_corrections_hand_computed():
    # two executions of the same program z (8 ones): beta = (2 z z^T + lam I)^-1 z (e1 + e2), so
    # z^T beta = |z|^2 (e1 + e2) / (2 |z|^2 + lam) and a program sharing k options gets k (e1 + e2) / (2 |z|^2 + lam)
    lam, e1, e2 = 8.0, 0.3, 0.5
    z = Program((0,) * N_DECISIONS).one_hot()
    c = TaskCorrections(ONE_HOT_SIZE, lam)
    c.add("a", z, e1)
    c.add("a", z, e2)
    other = Program((1, 1, 1, 0, 0, 0, 0, 0)).one_hot()  # shares 5 of the 8 options
    got = c.correction(["a", "a", "b"], np.stack([z, other, z]))
    assert got == pytest.approx([8 * 0.8 / 24, 5 * 0.8 / 24, 0.0])
    # the penalty weighs less as executions accumulate: 10 copies keep 10*8/(10*8+8) of the mean residual
    for _ in range(8):
        c.add("a", z, 0.4)
    assert c.correction(["a"], z[None])[0] == pytest.approx(8 * 4.0 / (80 + 8))
    with pytest.raises(ValueError, match="shrinkage must be a finite number > 0"):
        TaskCorrections(ONE_HOT_SIZE, 0.0)


def test_learns_real_rewards_and_skips_what_is_not_the_solutions_doing(tasks):
    wm = LearnedWorldModel(checkpoint=RIDGE, learn_from_anchors=True, shrinkage=1.0)
    assert isinstance(wm, LearnsFromAnchors)
    task, p = tasks[0], Program((0, 1, 0, 2, 1, 0, 0, 1))
    prior = wm.predict_rewards([task], [p])[0]
    target = 0.9 if prior < 0.5 else -0.5
    ok = Outcome(status="ok", score=raw_score_for_reward(task.data, target))
    ignored = [Outcome(status="sandbox_error", score=None), Outcome(status="no_prediction", score=None)]
    wm.learn_from_anchors([task] * 3, [_script(p), "print('not a program')", _script(p)], [ok, ok, ignored[0]])
    wm.learn_from_anchors([task], [_script(p)], ignored[1:])
    assert wm.corrections.count == {task.id: 1}
    expected = prior + 8 * (target - prior) / (8 + 1.0)  # one execution: |z|^2 e / (|z|^2 + lam)
    assert wm.predict_rewards([task], [p])[0] == pytest.approx(float(np.clip(expected, -1, 1)), abs=1e-5)
    assert wm.predict_rewards([tasks[1]], [p])[0] == pytest.approx(wm.prior_rewards([tasks[1]], [p])[0])
    # a failure teaches the penalty, -1
    wm.learn_from_anchors([tasks[1]], [_script(p)], [Outcome(status="timeout", score=None)])
    assert wm.predict_rewards([tasks[1]], [p])[0] < wm.prior_rewards([tasks[1]], [p])[0]
    fixed = LearnedWorldModel(checkpoint=RIDGE)  # the default: the fitted model stays fixed
    fixed.learn_from_anchors([task], [_script(p)], [ok])
    assert fixed.corrections.count == {}


def test_interrupted_and_resumed_predicts_as_uninterrupted(tasks, tmp_path):
    import torch

    rng = np.random.default_rng(0)
    batches = []
    for _ in range(6):
        programs = [Program.sample(rng) for _ in range(8)]
        picked = [tasks[int(i)] for i in rng.integers(len(tasks), size=8)]
        outcomes = [Outcome(status="ok", score=raw_score_for_reward(t.data, float(rng.uniform(-1, 1)))) for t in picked]
        batches.append((picked, [_script(p) for p in programs], outcomes))
    probe_tasks = [tasks[i % len(tasks)] for i in range(30)]
    probe = [Program.sample(rng) for _ in range(30)]

    full = LearnedWorldModel(checkpoint=RIDGE, learn_from_anchors=True)
    for batch in batches:
        full.learn_from_anchors(*batch)
    first = LearnedWorldModel(checkpoint=RIDGE, learn_from_anchors=True)
    for batch in batches[:3]:
        first.learn_from_anchors(*batch)
    torch.save(first.state_dict(), tmp_path / "wm.pt")  # as the trainer's checkpoint does
    resumed = LearnedWorldModel(checkpoint=RIDGE, learn_from_anchors=True)
    resumed.load_state_dict(torch.load(tmp_path / "wm.pt", weights_only=False))
    for batch in batches[3:]:
        resumed.learn_from_anchors(*batch)
    np.testing.assert_array_equal(full.predict_rewards(probe_tasks, probe), resumed.predict_rewards(probe_tasks, probe))
    assert not np.allclose(full.predict_rewards(probe_tasks, probe), full.prior_rewards(probe_tasks, probe))


@pytest.mark.slow  # fits the default outcome model on the shipped corpus (cached on disk afterwards)
def test_the_default_model_predicts_failure_score_and_spread_and_learns(tasks):
    wm = LearnedWorldModel(learn_from_anchors=True, shrinkage=1.0)
    rng = np.random.default_rng(1)
    programs = [Program.sample(rng) for _ in range(12)]
    task = tasks[0]
    outs = wm.predict([task] * 12, [_script(p) for p in programs])
    for o in outs:
        assert o.status == "ok" and 0.0 <= o.info["p_fail"] <= 1.0 and o.info["reward_std"] > 0
        assert -1.0 <= o.info["predicted_reward"] <= 1.0
    assert len({round(o.info["predicted_reward"], 6) for o in outs}) > 1  # programs are told apart
    p = programs[0]
    before = wm.predict_rewards([task], [p])[0]
    target = -0.9 if before > 0 else 0.9
    wm.learn_from_anchors([task], [_script(p)], [Outcome(status="ok", score=raw_score_for_reward(task.data, target))])
    assert abs(wm.predict_rewards([task], [p])[0] - target) < abs(before - target)

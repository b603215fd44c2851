"""``libero-partial-progress``: the non-anchor rollouts simulated for the first fraction of the
episode limit and scored on that prefix, the anchors' prefix read from their full executions; and
the environment's cut (a couple of simulated steps)."""

import numpy as np
import pytest
from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require
from wmrl_core.types import Outcome, Task

TASK = 6


@pytest.fixture
def wm_checkpoint(tmp_path):
    from wmrl_libero.testing import build_tiny_transfer_checkpoints

    return build_tiny_transfer_checkpoints(tmp_path, TASK)[1]


class FakeEnv:
    max_episode_steps = 40
    trajectory_states = 41

    def __init__(self):
        self.calls = []

    def execute(self, tasks, solutions, *, max_steps=None):
        self.calls.append(max_steps)
        return [Outcome(status="ok", score=0.0) for _ in tasks]


def _trajectory(steps, rng):
    return {"proprio": rng.normal(size=(steps + 1, 16)), "object_state": rng.normal(size=(steps + 1, 56))}


def test_it_cuts_the_others_and_scores_every_rollout_on_the_same_prefix(wm_checkpoint):
    from wmrl_libero.world_models.checkpoint import load_bundle
    from wmrl_libero.world_models.features import state_vector
    from wmrl_libero.world_models.partial_progress import PartialProgressWorldModel
    from wmrl_libero.world_models.progress import prefix_progress

    env = FakeEnv()
    wm = PartialProgressWorldModel(env, checkpoint=str(wm_checkpoint), fraction=0.5)
    task = Task(id="t", description="d", data={"suite": "libero_10", "task_index": TASK, "init_state": 0})
    wm.execute_for_scoring([task, task], [None, None])
    assert env.calls == [20]  # ceil(0.5 * 40) control steps
    rng = np.random.default_rng(0)
    full, cut = _trajectory(40, rng), _trajectory(20, rng)
    outcomes = [Outcome(score=1.0, info={"trajectory": t}) for t in (full, cut)]
    scores = wm.predict_from_outcomes([task, task], [None, None], outcomes)
    scorer = load_bundle(wm_checkpoint).scorer
    for o, t in zip(scores, (full, cut)):
        states = state_vector(t["proprio"], t["object_state"], 128)
        assert o.score == pytest.approx(prefix_progress(scorer, states, TASK, 0.5, 40))
    # the full anchor is read only to step 20: its score is the score of its first 21 states
    head = {k: v[:21] for k, v in full.items()}
    again = wm.predict_from_outcomes([task], [None], [Outcome(score=1.0, info={"trajectory": head})])
    assert again[0].score == pytest.approx(scores[0].score)
    assert wm.predict_from_outcomes([task], [None], [Outcome(score=0.0)])[0].status == "no_prediction"


def test_it_refuses_an_environment_that_keeps_too_few_states(wm_checkpoint):
    from wmrl_libero.world_models.partial_progress import PartialProgressWorldModel

    env = FakeEnv()
    env.trajectory_states = 16
    with pytest.raises(ValueError, match="trajectory_states=41"):
        PartialProgressWorldModel(env, checkpoint=str(wm_checkpoint))
    with pytest.raises(ValueError, match="fraction"):
        PartialProgressWorldModel(FakeEnv(), checkpoint=str(wm_checkpoint), fraction=1.5)


@pytest.mark.slow
def test_the_environment_cuts_an_episode_and_charges_what_ran():
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_libero.environment import LiberoEnvironment

    env = LiberoEnvironment(task_indices=[TASK], num_workers=0, max_episode_steps=12, trajectory_states=13)
    task = next(t for t in env.tasks("train") if t.data["init_state"] == 0)
    try:
        actions = np.zeros((12, 7))
        full, cut = env.execute([task, task], [actions, actions])[0], env.execute([task], [actions], max_steps=4)[0]
    finally:
        env.close()
    assert full.info["steps"] == 12 and len(full.info["trajectory"]["proprio"]) == 13
    assert cut.info["steps"] == 4 and cut.info["cut"] and cut.score == 0.0
    assert len(cut.info["trajectory"]["proprio"]) == 5  # the reset state and one after each of 4 actions

"""World models that read executed trajectories but need only part of the non-anchor executions
(``execute_for_scoring``): the trainer executes the anchor groups in full through the environment,
the others through the world model, charges both to ``execution`` with their measured seconds,
and scores every rollout from its outcome."""

import math

import numpy as np
import pytest

from tests.test_scores_executions import TrajectoryBandit, _train, potential
from wmrl_core import hookimpl
from wmrl_core.contracts import ScoresExecutions, ScoresPartialExecutions
from wmrl_core.types import Outcome

FULL_S, PART_S = 1.0, 0.25  # measured seconds of one full and one partial execution


class MeasuredBandit(TrajectoryBandit):
    """Charges measured seconds (no declared cost): ``FULL_S`` per execution, or ``PART_S`` when cut."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.cost = None
        self.cut_calls: list[int] = []

    def execute(self, tasks, solutions, cut=False):
        outcomes = super().execute(tasks, solutions)
        if cut:
            self.executed.pop()
            self.cut_calls.append(len(solutions))
        return [
            Outcome(score=o.score, info={**o.info, "cost_s": PART_S if cut else FULL_S, "cut": cut}) for o in outcomes
        ]


class PartialScorer:
    def __init__(self, env):
        self.env = env
        self.scored_cut: list[int] = []

    def predict(self, tasks, solutions):
        raise AssertionError("never asked to predict")

    def execute_for_scoring(self, tasks, solutions):
        return self.env.execute(tasks, solutions, cut=True)

    def predict_from_outcomes(self, tasks, solutions, outcomes):
        self.scored_cut.append(sum(o.info["cut"] for o in outcomes))
        return [potential(o.info["trajectory"]) for o in outcomes]


class PartialPlugin:
    def __init__(self):
        self.envs, self.wms = [], []

    @hookimpl
    def wmrl_register_environments(self, table):
        def make(**kwargs):
            self.envs.append(MeasuredBandit(**kwargs))
            return self.envs[-1]

        table.add("trajectory-bandit", make)

    @hookimpl
    def wmrl_register_world_models(self, table):
        def make(env=None, **_synthetic_kwargs):
            self.wms.append(PartialScorer(env))
            return self.wms[-1]

        table.add("progress-fake", make)

    @hookimpl
    def wmrl_default_reward_extractor(self, environment_name):
        return "score" if environment_name == "trajectory-bandit" else None


def test_the_protocol_needs_both_methods():
    assert isinstance(PartialScorer(None), ScoresPartialExecutions)
    assert isinstance(PartialScorer(None), ScoresExecutions)  # the trainer executes for it

    class FullOnly:
        def predict_from_outcomes(self, tasks, solutions, outcomes): ...

    assert not isinstance(FullOnly(), ScoresPartialExecutions)


@pytest.mark.slow
def test_anchors_run_in_full_the_others_partially_and_both_are_charged(synthetic_config, tmp_path):
    plugin = PartialPlugin()
    _, records = _train(
        synthetic_config, tmp_path / "run", "steps=1", "mode=wmrl", "anchors.fraction=0.2", plugin=plugin
    )
    env, wm = plugin.envs[0], plugin.wms[0]
    assert env.executed == [8]  # 2 anchor groups of 4 through the environment, in full
    assert env.cut_calls == [32]  # the 8 other groups through the world model, partially
    assert wm.scored_cut == [32]  # every rollout scored, anchors from their full executions
    for r in records:
        assert r["anchors/groups"] == 2 and r["fusion/n_real"] == 8 and r["fusion/n_world_model"] == 32
        assert r["compute/step_execution_s"] == pytest.approx(8 * FULL_S + 32 * PART_S)  # what ran, measured
        assert math.isfinite(r["reward/world_model_mean"])
    assert records[-1]["compute/execution_items"] == 40
    assert np.isclose(records[-1]["compute/execution_s"], 8 * FULL_S + 32 * PART_S)

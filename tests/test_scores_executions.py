"""World models that read executed trajectories (``predict_from_outcomes``): the trainer executes
every group, charges all of it to ``execution``, scores every rollout from its real outcome, and
keeps the real reward only on the anchor groups (which calibrate the scores)."""

import math

import numpy as np
import pytest

from wmrl_core import hookimpl
from wmrl_core.config import load_config
from wmrl_core.contracts import ScoresExecutions
from wmrl_core.faults import DROPPED, StepFaults
from wmrl_core.metrics import read_metrics
from wmrl_core.plugins import get_plugin_manager
from wmrl_core.synthetic.bandit import SyntheticBanditEnvironment
from wmrl_core.trainer import train
from wmrl_core.types import Outcome, Task


def potential(progress, k=2):
    """last-k minus first-k: the potential-style score of a trajectory."""
    p = np.asarray(progress, dtype=float)
    return float(p[-k:].mean() - p[:k].mean())


class TrajectoryBandit(SyntheticBanditEnvironment):
    """The synthetic bandit with a *sparse* success (score 1 when the noisy reward beats 0.5)
    and the executed trajectory in ``info["trajectory"]``: progress rising from 0 towards the
    arm's true value, so it is dense where the success is not. Counts what it executed."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.executed: list[int] = []

    def execute(self, tasks, solutions):
        dense = super().execute(tasks, solutions)
        self.executed.append(len(solutions))
        out = []
        for task, arm, o in zip(tasks, solutions, dense):
            mu = self.true_reward(task, arm)
            trajectory = np.linspace(0.0, mu, 6) + 0.01 * self._rng.standard_normal(6)
            out.append(Outcome(score=float(o.score > 0.5), info={"trajectory": trajectory.tolist()}))
        return out


class ProgressScorer:
    """Reads the executed trajectory; ``predict`` must never be called."""

    def __init__(self, env=None, nan_every: int = 0):
        self.calls: list[int] = []
        self.nan_every = nan_every

    def predict(self, tasks, solutions):
        raise AssertionError("a world model that reads executions is never asked to predict them")

    def predict_from_outcomes(self, tasks, solutions, outcomes):
        self.calls.append(len(outcomes))
        scores = [potential(o.info["trajectory"]) for o in outcomes]
        if self.nan_every:
            scores = [math.nan if i % self.nan_every == 0 else s for i, s in enumerate(scores)]
        return scores


class FakePlugin:
    def __init__(self, **wm_kwargs):
        self.envs, self.wms, self.wm_kwargs = [], [], wm_kwargs

    @hookimpl
    def wmrl_register_environments(self, table):
        def make(**kwargs):
            self.envs.append(TrajectoryBandit(**kwargs))
            return self.envs[-1]

        table.add("trajectory-bandit", make)

    @hookimpl
    def wmrl_register_world_models(self, table):
        def make(env=None, **_synthetic_kwargs):  # the config merges the synthetic model's kwargs in
            self.wms.append(ProgressScorer(env, **self.wm_kwargs))
            return self.wms[-1]

        table.add("progress-fake", make)

    @hookimpl
    def wmrl_default_reward_extractor(self, environment_name):
        return "score" if environment_name == "trajectory-bandit" else None


def _train(synthetic_config, run_dir, *overrides, plugin=None):
    plugin = plugin or FakePlugin()
    cfg = load_config(
        synthetic_config,
        [
            f"run_dir={run_dir}",
            "environment.name=trajectory-bandit",
            "world_model.name=progress-fake",
            "rollout.batch_tasks=10",
            "rollout.group_size=4",
            "eval.every=0",
            "checkpoint.every=0",
            "logging.progress=false",
            *overrides,
        ],
    )
    train(cfg, plugin_manager=get_plugin_manager(entry_points=False, extra_plugins=[plugin]))
    return plugin, [r for r in read_metrics(run_dir) if r["step"] > 0]


def test_the_protocol_recognises_a_world_model_that_reads_executions():
    assert isinstance(ProgressScorer(), ScoresExecutions)
    assert not isinstance(object(), ScoresExecutions)


def test_potential_progress_pays_for_the_end_not_the_peak():
    assert potential([0.0, 0.0, 0.9, 0.1, 0.5, 0.5]) == pytest.approx(0.5)  # the 0.9 spike earns nothing
    assert potential([0.2, 0.2, 0.2, 0.2]) == 0.0


def test_faults_predict_with_outcomes_calls_predict_from_outcomes_and_drops_nan():
    task = Task(id="t", description="")
    outcomes = [Outcome(score=0.0, info={"trajectory": [0, 0, 1, 1]})] * 3
    faults = StepFaults()
    out = faults.predict(ProgressScorer(nan_every=2), [task] * 3, [0, 1, 2], outcomes)
    assert out[0] is DROPPED and out[2] is DROPPED and out[1] == pytest.approx(1.0)
    assert faults.metrics()["faults/world_model_dropped"] == 2


@pytest.mark.slow
def test_wmrl_mode_executes_every_group_and_keeps_real_rewards_on_anchors_only(synthetic_config, tmp_path):
    plugin, records = _train(synthetic_config, tmp_path / "run", "steps=3", "mode=wmrl", "anchors.fraction=0.2")
    env, wm = plugin.envs[0], plugin.wms[0]
    assert env.executed == [40, 40, 40]  # all B * G rollouts, every step: the scorer needs them run
    assert wm.calls == [40, 40, 40]
    for r in records:
        assert r["anchors/groups"] == 2  # 20% of 10 groups train on the sparse success
        assert r["compute/step_execution_s"] == pytest.approx(40 * 1.0)  # every execution charged
        assert r["fusion/n_real"] == 2 * 4 and r["fusion/n_world_model"] == 8 * 4
        assert math.isfinite(r["reward/world_model_mean"])
    assert records[-1]["compute/execution_items"] == 120
    assert records[-1]["calibration/n_pairs"] == 3 * 2 * 4  # the anchors' (score, success) pairs calibrate


@pytest.mark.slow
def test_world_model_mode_executes_every_group_and_trains_on_the_raw_scores(synthetic_config, tmp_path):
    plugin, records = _train(synthetic_config, tmp_path / "run", "steps=2", "mode=world_model")
    assert plugin.envs[0].executed == [40, 40]
    for r in records:
        assert r["anchors/groups"] == 0 and r["reward/real_mean"] is None  # NaN, written as null
        assert r["compute/step_execution_s"] == pytest.approx(40.0)
        assert r["reward/train_mean"] == pytest.approx(r["reward/world_model_mean"])


@pytest.mark.slow
def test_unusable_scores_are_dropped_not_zeroed(synthetic_config, tmp_path):
    _, records = _train(synthetic_config, tmp_path / "run", "steps=1", "mode=wmrl", plugin=FakePlugin(nan_every=4))
    assert records[0]["faults/world_model_dropped"] == 10

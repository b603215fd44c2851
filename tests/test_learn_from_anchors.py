"""The optional ``learn_from_anchors`` of world models: called once per step with the step's
anchor executions, after the step's predictions, and resumed exactly through ``state_dict``."""

from collections import defaultdict

import pytest

from wmrl_core import hookimpl
from wmrl_core.config import load_config
from wmrl_core.contracts import LearnsFromAnchors, is_rewarded
from wmrl_core.metrics import read_metrics
from wmrl_core.plugins import get_plugin_manager
from wmrl_core.trainer import train


class TableWorldModel:
    """Predicts the mean real score seen so far of (task, arm), 0.5 before any; logs its calls."""

    def __init__(self, env=None):
        self.sums: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self.log: list[tuple] = []  # not state: a resumed run's log starts empty

    @staticmethod
    def _key(task, solution):
        return f"{task.id}/{int(solution)}"

    def predict(self, tasks, solutions):
        self.log.append(("predict", len(solutions)))
        return [
            self.sums[k] / self.counts[k] if self.counts[k] else 0.5
            for k in (self._key(t, s) for t, s in zip(tasks, solutions))
        ]

    def learn_from_anchors(self, tasks, solutions, outcomes):
        self.log.append(("learn", [t.id for t in tasks], [int(s) for s in solutions], [o.score for o in outcomes]))
        for task, solution, outcome in zip(tasks, solutions, outcomes):
            if is_rewarded(outcome.status):
                self.sums[self._key(task, solution)] += outcome.score
                self.counts[self._key(task, solution)] += 1

    def state_dict(self):
        return {"sums": dict(self.sums), "counts": dict(self.counts)}

    def load_state_dict(self, state):
        self.sums, self.counts = defaultdict(float, state["sums"]), defaultdict(int, state["counts"])


class ForgetfulTableWorldModel(TableWorldModel):
    """Checkpointed but not restored: what a world model with unsaved state would do."""

    def load_state_dict(self, state):
        pass


class TablePlugin:
    def __init__(self, cls=TableWorldModel):
        self.cls, self.made = cls, []

    @hookimpl
    def wmrl_register_world_models(self, table):
        def make(env=None, **_synthetic_kwargs):  # the config merges the synthetic model's kwargs in
            self.made.append(self.cls(env))
            return self.made[-1]

        table.add("learning-table", make)


def _train(synthetic_config, run_dir, *overrides, plugin=None):
    plugin = plugin or TablePlugin()
    cfg = load_config(
        synthetic_config,
        [f"run_dir={run_dir}", "world_model.name=learning-table", "eval.every=0", "logging.progress=false", *overrides],
    )
    train(cfg, plugin_manager=get_plugin_manager(entry_points=False, extra_plugins=[plugin]))
    return plugin


def test_the_protocol_recognises_a_learning_world_model():
    assert isinstance(TableWorldModel(), LearnsFromAnchors)
    assert not isinstance(object(), LearnsFromAnchors)


@pytest.mark.slow
def test_trainer_hands_each_steps_anchor_executions_after_the_predictions(synthetic_config, tmp_path):
    plugin = _train(synthetic_config, tmp_path / "run", "steps=5", "checkpoint.every=0")
    wm = plugin.made[0]
    assert [entry[0] for entry in wm.log] == ["predict", "learn"] * 5  # no evaluation calls: eval.every=0
    records = [r for r in read_metrics(tmp_path / "run") if r["step"] > 0]
    for (_, tasks, arms, scores), record in zip(wm.log[1::2], records):
        assert len(tasks) == len(arms) == len(scores) == 2 * 8  # 10% of 20 groups of 8: whole groups
        assert len(set(tasks)) <= 2 and all(isinstance(s, float) for s in scores)
        assert record["compute/world_model_calls"] == 2 * record["step"]  # predict + learn, both charged
    assert sum(wm.counts.values()) == 5 * 2 * 8
    # the learned table is used: later predictions are real means, not the prior 0.5
    assert records[-1]["reward/world_model_mean"] != 0.5


@pytest.mark.slow
def test_learned_state_resumes_exactly(synthetic_config, tmp_path):
    common = ["checkpoint.every=4"]
    _train(synthetic_config, tmp_path / "full", "steps=10", *common)
    _train(synthetic_config, tmp_path / "part", "steps=6", *common)
    checkpoints = tmp_path / "part" / "checkpoints"
    (checkpoints / "last.pt").unlink()  # crash after step 6: resume from the step-4 checkpoint
    (checkpoints / "step_000004.pt").rename(checkpoints / "last.pt")
    resumed = _train(synthetic_config, tmp_path / "part", "steps=10", *common, "resume=true").made[0]
    assert sum(resumed.counts.values()) == 10 * 2 * 8  # steps 1-4 from the checkpoint, 5-10 learned after resuming

    def strip(r):
        return {
            k: v
            for k, v in r.items()  # the learning call is charged its wall time, and value/ratio_* divide by it
            if not k.startswith(("wall/", "value/ratio_")) and not (k.startswith("compute/") and k.endswith("_s"))
        }

    full, part = read_metrics(tmp_path / "full"), read_metrics(tmp_path / "part")
    assert [strip(r) for r in full] == [strip(r) for r in part]
    # and the restored state mattered: a resume that forgets it predicts differently
    (checkpoints / "last.pt").unlink()
    (checkpoints / "step_000008.pt").rename(checkpoints / "last.pt")
    _train(
        synthetic_config,
        tmp_path / "part",
        "steps=10",
        *common,
        "resume=true",
        plugin=TablePlugin(ForgetfulTableWorldModel),
    )
    assert [strip(r) for r in full] != [strip(r) for r in read_metrics(tmp_path / "part")]

"""A second domain plugin, written from the plugin API of docs/plugins.md alone: unit conversion.

A task asks to convert a quantity between two units (``3 ft -> m``); a solution is the index of a
conversion factor among a few candidates; execution scores ``-|log10(chosen / true factor)|``
(0 for the right factor). Its policy is a tabular softmax, its world model a biased guess. Then
every component makes the mistakes of a hurried author (wrong types and shapes, a raise in each
method, a hang), each fed to the real ``wmrl train`` (``wmrl_core.cli.main``): each must end with
a message naming the component, the method and the fix, no traceback.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch

from wmrl_core import cli, hookimpl
from wmrl_core.plugins import get_plugin_manager
from wmrl_core.types import Outcome, Rollouts, Task

pytestmark = pytest.mark.slow  # each test trains a few tiny steps

CONVERSIONS = [("ft", "m", 0.3048), ("in", "cm", 2.54), ("lb", "kg", 0.45359237), ("mi", "km", 1.609344)]
CANDIDATES = [0.3048, 2.54, 0.45359237, 1.609344, 3.2808, 0.3937]


class UnitEnv:
    """Converts between units; ``fault`` picks a mistake."""

    def __init__(self, *, fault: str = "none", hang_s: float = 30.0):
        self.fault, self.hang_s = fault, hang_s
        self._tasks = [
            Task(id=f"{a}->{b}", description=f"Convert {a} to {b}.", features=np.eye(len(CONVERSIONS))[i], data=i)
            for i, (a, b, _) in enumerate(CONVERSIONS)
        ]

    def tasks(self, split: str = "train") -> list[Any]:
        if self.fault == "tasks_raise":
            raise OSError("units.csv not found")
        if self.fault == "tasks_strings":
            return [t.id for t in self._tasks]
        if split not in ("train", "heldout"):
            raise ValueError(f"unknown split {split!r}")
        return list(self._tasks)

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> Any:
        if self.fault == "execute_raise":
            raise ZeroDivisionError("float division by zero")
        if self.fault == "execute_hang":
            time.sleep(self.hang_s)
        scores = [-abs(math.log10(CANDIDATES[int(s)] / CONVERSIONS[t.data][2])) for t, s in zip(tasks, solutions)]
        if self.fault == "execute_dict":
            return {t.id: s for t, s in zip(tasks, scores)}
        if self.fault == "execute_strings":
            return [f"{s:.3f}" for s in scores]
        return [Outcome(score=s) for s in scores]


class UnitPolicy(torch.nn.Module):
    def __init__(self, env: Any = None, *, fault: str = "none"):
        super().__init__()
        self.fault = fault
        self.logits = torch.nn.Parameter(torch.zeros(len(CONVERSIONS), len(CANDIDATES)))

    @torch.no_grad()
    def generate(self, tasks: Sequence[Task], group_size: int) -> Any:
        if self.fault == "generate_raise":
            raise IndexError("list index out of range")
        rows = torch.tensor([t.data for t in tasks]).repeat_interleave(group_size)
        dist = torch.distributions.Categorical(logits=self.logits[rows])
        picks = dist.sample()
        lp = dist.log_prob(picks)
        if self.fault == "generate_tuple":
            return picks.tolist(), lp
        if self.fault == "flat_log_probs":
            lp_out, mask = lp, torch.ones(len(picks))
        else:
            lp_out, mask = lp.unsqueeze(-1), torch.ones(len(picks), 1)
        return Rollouts(
            tasks=[t for t in tasks for _ in range(group_size)],
            solutions=picks.tolist(),
            group_ids=np.repeat(np.arange(len(tasks)), group_size),
            old_log_probs=lp_out,
            mask=mask,
            extra={"rows": rows, "picks": picks},
        )

    def log_probs(self, rollouts: Rollouts) -> Any:
        if self.fault == "log_probs_raise":
            raise KeyError("picks")
        lp = torch.log_softmax(self.logits[rollouts.extra["rows"]], -1).gather(-1, rollouts.extra["picks"][:, None])
        if self.fault == "log_probs_flat":
            return lp.squeeze(-1)
        if self.fault == "log_probs_numpy":
            return lp.detach().numpy()
        return lp


class UnitWorldModel:
    def __init__(self, env: Any = None, *, fault: str = "none", hang_s: float = 30.0):
        self.fault, self.hang_s = fault, hang_s

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> Any:
        if self.fault == "predict_raise":
            raise RuntimeError("CUDA out of memory")
        if self.fault == "predict_hang":
            time.sleep(self.hang_s)
        guesses = [-abs(math.log10(CANDIDATES[int(s)])) for s in solutions]  # a biased guess: factors near 1
        if self.fault == "predict_short":
            return guesses[1:]
        if self.fault == "predict_array":
            return np.asarray(guesses)
        return guesses


def unit_reward(env: Any = None, *, fault: str = "none"):
    def reward(task: Task, outcome: Outcome) -> Any:
        if fault == "reward_raise":
            raise AttributeError("'NoneType' object has no attribute 'score'")
        if fault == "reward_string":
            return "high"
        return outcome.score

    return reward


@hookimpl
def wmrl_register_environments(table):
    table.add("unit-conversion", UnitEnv, description="convert quantities between units")


@hookimpl
def wmrl_register_policies(table):
    table.add("unit-tabular", UnitPolicy, description="softmax over candidate factors per task")


@hookimpl
def wmrl_register_world_models(table):
    table.add("unit-guess", UnitWorldModel, description="guesses factors near 1 are right")


@hookimpl
def wmrl_register_reward_extractors(table):
    table.add("unit-score", unit_reward, description="the score")


@hookimpl
def wmrl_default_reward_extractor(environment_name):
    return "unit-score" if environment_name == "unit-conversion" else None


CONFIG = """\
mode: wmrl
steps: 3
seed: 0
environment: {name: unit-conversion}
policy: {name: unit-tabular}
world_model: {name: unit-guess}
rollout: {batch_tasks: 4, group_size: 3}
anchors: {fraction: 0.5}
grpo: {lr: 0.5}
eval: {every: 3, samples_per_task: 2}
logging: {tensorboard: false, progress: false}
checkpoint: {every: 2}
"""


@pytest.fixture(autouse=True)
def _unit_plugin(monkeypatch):
    this = sys.modules[__name__]
    monkeypatch.setattr("wmrl_core.trainer.get_plugin_manager", lambda: get_plugin_manager(extra_plugins=[this]))


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "units.yaml"
    path.write_text(CONFIG)
    return path


def train(capsys, config, tmp_path, *overrides: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = cli.main(["train", str(config), f"run_dir={tmp_path / 'run'}", *overrides])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return rc, err


def test_the_plugin_trains_in_every_mode(capsys, config, tmp_path):
    for mode in ("real", "world_model", "wmrl"):
        rc, err = train(capsys, config, tmp_path, f"mode={mode}")
        assert rc == 0, err


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["environment.kwargs.fault=tasks_raise"], ["environment `unit-conversion` raised OSError in tasks()"]),
        (["environment.kwargs.fault=tasks_strings"], ["environment `unit-conversion`: tasks('train') returned str"]),
        (
            ["environment.kwargs.fault=execute_raise"],
            ["environment `unit-conversion` raised ZeroDivisionError in execute()", "no checkpoint of this run"],
        ),
        (["environment.kwargs.fault=execute_dict"], ["environment `unit-conversion`: execute() returned dict"]),
        (["environment.kwargs.fault=execute_strings"], ["environment `unit-conversion`: execute() returned str"]),
        (["policy.kwargs.fault=generate_raise"], ["policy `unit-tabular` raised IndexError in generate()"]),
        (
            ["policy.kwargs.fault=generate_tuple"],
            ["policy `unit-tabular`: generate() must return wmrl_core.types.Rollouts", "got tuple"],
        ),
        (
            ["policy.kwargs.fault=flat_log_probs"],
            ["policy `unit-tabular`: generate() must give old_log_probs and mask as tensors of shape (12, T)"],
        ),
        (["policy.kwargs.fault=log_probs_raise"], ["policy `unit-tabular` raised KeyError in log_probs()"]),
        (["policy.kwargs.fault=log_probs_flat"], ["policy `unit-tabular`: log_probs() returned shape (12,)"]),
        (["policy.kwargs.fault=log_probs_numpy"], ["policy `unit-tabular`: log_probs() returned ndarray"]),
        (["world_model.kwargs.fault=predict_short"], ["world model `unit-guess` returned 11 predictions for 12"]),
        (["policy.kwargs.fualt=x"], ["policy `unit-tabular` has no parameter `fualt`", "Did you mean `fault`?"]),
    ],
)
def test_a_hurried_authors_mistake_is_named(capsys, config, tmp_path, overrides, expected):
    rc, err = train(capsys, config, tmp_path, *overrides)
    assert rc == 2
    for text in expected:
        assert text in err


def test_survivable_faults_train_on(capsys, config, tmp_path):
    # a world model that raises loses its rewards (counted), the anchors still train
    rc, err = train(capsys, config, tmp_path, "world_model.kwargs.fault=predict_raise")
    assert rc == 0 and "every world-model reward was dropped" in err
    # numpy arrays are sequences of numbers: accepted
    rc, err = train(capsys, config, tmp_path, "world_model.kwargs.fault=predict_array")
    assert rc == 0, err
    # a reward extractor that raises or returns a string loses that reward; with none left in
    # mode=real the run trained on nothing
    for fault in ("reward_raise", "reward_string"):
        rc, err = train(capsys, config, tmp_path, "mode=real", f"reward.kwargs.fault={fault}")
        assert rc == 2 and "the run trained on nothing" in err


def test_a_hanging_world_model_is_abandoned_and_a_hanging_environment_is_named(capsys, config, tmp_path):
    rc, err = train(
        capsys,
        config,
        tmp_path,
        "world_model.kwargs.fault=predict_hang",
        "world_model.kwargs.hang_s=3",
        "world_model_timeout_s=0.5",
        "steps=2",
    )
    assert rc == 0 and "every world-model reward was dropped" in err
    start = time.monotonic()
    rc, err = train(
        capsys,
        config,
        tmp_path,
        "environment.kwargs.fault=execute_hang",
        "environment.kwargs.hang_s=5",
        "environment.execute_timeout_s=0.5",
    )
    assert rc == 2 and time.monotonic() - start < 20
    assert "environment `unit-conversion`: execute() did not return within 0.5 s (environment.execute_timeout_s)" in err

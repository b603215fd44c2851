"""Faults of a new user's third domain plugin (issue 55), run against ``examples/gymnasium_control``.

Each test gives one CartPole component one mistake that the engine used to miss, and trains a step
through the Python API: duplicate task ids and a policy's rows holding task ids instead of tasks
(both trained on silently or blamed elsewhere), NaN ``old_log_probs`` (turned the parameters to NaN,
then a 300-line error blaming ``generate`` a step later), log-probabilities that disagree between
``generate`` and ``log_probs`` (silently wrong ratios), and a score or a prediction left as a
one-element array (a traceback, or every prediction dropped under a misleading warning).
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("gymnasium")

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "examples" / "gymnasium_control"
if str(PACKAGE) not in sys.path:  # importable without `pip install -e examples/gymnasium_control`
    sys.path.insert(0, str(PACKAGE))

from wmrl_gymnasium_control import plugin  # noqa: E402
from wmrl_gymnasium_control.environment import CartPoleSeeds  # noqa: E402
from wmrl_gymnasium_control.policy import LinearPlanPolicy  # noqa: E402
from wmrl_gymnasium_control.world_model import CartPoleLookahead  # noqa: E402

from wmrl_core import hookimpl  # noqa: E402
from wmrl_core.checkers import check_log_probs  # noqa: E402
from wmrl_core.config import load_config  # noqa: E402
from wmrl_core.errors import WMRLError  # noqa: E402
from wmrl_core.plugins import get_plugin_manager  # noqa: E402
from wmrl_core.trainer import train  # noqa: E402
from wmrl_core.types import Outcome, Rollouts, Task  # noqa: E402

CONFIG = PACKAGE / "wmrl_gymnasium_control" / "configs" / "cartpole.yaml"
SMALL = [
    "steps=1",
    "rollout.batch_tasks=4",
    "rollout.group_size=2",
    "eval.every=0",
    "checkpoint.every=0",
    "environment.kwargs.horizon=10",
    "environment.kwargs.num_train=6",
]


class FaultyCartPole(CartPoleSeeds):
    def __init__(self, *, fault: str = "none", **kwargs: Any):
        super().__init__(**kwargs)
        self.fault = fault

    def tasks(self, split: str = "train") -> list[Task]:
        tasks = super().tasks(split)
        if self.fault == "duplicate_ids":  # ids from a seed modulo 3: the 6 train tasks hold 3 ids
            return [Task(id=f"cartpole-seed-{t.data['seed'] % 3}", features=t.features, data=t.data) for t in tasks]
        return tasks

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        outcomes = super().execute(tasks, solutions)
        if self.fault == "score_array":  # np.sum(rewards, keepdims=True): a one-element array
            return [Outcome(o.status, np.array([o.score]), o.info) for o in outcomes]
        return outcomes


class FaultyPlan(LinearPlanPolicy):
    def __init__(self, env: Any, *, fault: str = "none"):
        super().__init__(env)
        self.fault = fault

    def generate(self, tasks: Sequence[Task], group_size: int) -> Rollouts:
        rollouts = super().generate(tasks, group_size)
        if self.fault == "task_ids_as_tasks":
            rollouts.tasks = [t.id for t in rollouts.tasks]
        if self.fault == "old_log_probs_nan":  # e.g. log(0) of a probability table
            rollouts.old_log_probs = torch.full_like(rollouts.old_log_probs, math.nan)
        if self.fault == "old_log_probs_negated":  # stored -log p, the token's surprisal
            rollouts.old_log_probs = -rollouts.old_log_probs
        return rollouts

    def log_probs(self, rollouts: Rollouts) -> torch.Tensor:
        lp = super().log_probs(rollouts)
        return lp.exp() if self.fault == "log_probs_as_probabilities" else lp


class FaultyLookahead(CartPoleLookahead):
    def __init__(self, env: Any, *, fault: str = "none", **kwargs: Any):
        super().__init__(env, **kwargs)
        self.fault = fault

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> Any:
        predictions = super().predict(tasks, solutions)
        return np.asarray(predictions, dtype=float)[:, None] if self.fault == "column" else predictions


class FaultyCartPolePlugin:
    @hookimpl
    def wmrl_register_environments(self, table):
        table.add("faulty-cartpole", FaultyCartPole, description="CartPole seeds with one chosen fault")

    @hookimpl
    def wmrl_register_policies(self, table):
        table.add("faulty-plan", FaultyPlan, description="the linear plan policy with one chosen fault")

    @hookimpl
    def wmrl_register_world_models(self, table):
        table.add("faulty-lookahead", FaultyLookahead, description="the lookahead world model with one chosen fault")


def run(tmp_path: Path, *overrides: str) -> dict[str, Any]:
    pm = get_plugin_manager(entry_points=False, extra_plugins=[plugin, FaultyCartPolePlugin()])
    cfg = load_config(CONFIG, [*SMALL, f"run_dir={tmp_path / 'R'}", *overrides], plugin_manager=pm)
    return train(cfg, plugin_manager=pm)


def one_line_error(tmp_path: Path, *overrides: str) -> str:
    with pytest.raises(WMRLError) as info:
        run(tmp_path, *overrides)
    message = str(info.value)
    assert "\n" not in message, message[:2000]
    return message


def test_an_environment_whose_tasks_repeat_ids_is_refused(tmp_path):
    message = one_line_error(tmp_path, "environment.name=faulty-cartpole", "environment.kwargs.fault=duplicate_ids")
    assert message.startswith("environment `faulty-cartpole`: tasks('train') returned 6 tasks with repeated ids")
    assert "['cartpole-seed-0', 'cartpole-seed-1', 'cartpole-seed-2']" in message and "unique" in message


def test_rollouts_whose_tasks_are_task_ids_are_blamed_on_generate(tmp_path):
    message = one_line_error(tmp_path, "policy.name=faulty-plan", "policy.kwargs.fault=task_ids_as_tasks")
    assert message.startswith("policy `faulty-plan`: generate() returned Rollouts.tasks holding str"), message
    assert "the Task objects given to generate" in message


def test_nan_old_log_probs_are_refused_before_the_update_spreads_them(tmp_path):
    message = one_line_error(tmp_path, "policy.name=faulty-plan", "policy.kwargs.fault=old_log_probs_nan")
    assert message.startswith("policy `faulty-plan`: generate() returned old_log_probs NaN or inf at 80 of 80"), message
    assert not (tmp_path / "R" / "checkpoints" / "last.pt").exists()


@pytest.mark.parametrize("fault", ["old_log_probs_negated", "log_probs_as_probabilities"])
def test_log_probs_that_disagree_with_generate_before_any_update_are_warned_about(tmp_path, fault):
    with pytest.warns(
        UserWarning, match=r"policy `faulty-plan`: log_probs\(\) and generate\(\)'s old_log_probs differ"
    ):
        run(tmp_path, "policy.name=faulty-plan", f"policy.kwargs.fault={fault}")


def test_log_probs_that_agree_with_generate_are_not_warned_about():
    env = CartPoleSeeds(horizon=10, num_train=3)
    policy = LinearPlanPolicy(env)
    torch.nn.init.normal_(policy.weight)
    rollouts = policy.generate(env.tasks("train"), 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_log_probs("policy `cartpole-linear-plan`", policy.log_probs(rollouts), rollouts)


def test_a_score_left_as_a_one_element_array_is_named(tmp_path):
    message = one_line_error(tmp_path, "environment.name=faulty-cartpole", "environment.kwargs.fault=score_array")
    assert message.startswith("environment `faulty-cartpole`: execute() returned Outcome(score=array([")
    assert "one number" in message


def test_predictions_as_a_column_array_are_named_not_dropped(tmp_path):
    message = one_line_error(tmp_path, "world_model.name=faulty-lookahead", "world_model.kwargs.fault=column")
    assert message.startswith("world model `faulty-lookahead`: predict() returned ndarray array([")
    assert "one number" in message

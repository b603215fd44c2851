"""The third domain plugin (issue 55), ``examples/gymnasium_control``: CartPole-v1 plans rolled out
in gymnasium, written from README.md and docs/plugins.md alone. Registered without installing it
(``get_plugin_manager(extra_plugins=[plugin])``), checked with ``wmrl_core.checkers`` and trained
for a few steps through the Python API."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

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

from wmrl_core.builtin_rewards import ScoreReward  # noqa: E402
from wmrl_core.checkers import (  # noqa: E402
    check_environment,
    check_log_probs,
    check_policy,
    check_reward_extractor,
    check_rollouts,
    check_world_model,
)
from wmrl_core.config import load_config  # noqa: E402
from wmrl_core.plugins import get_plugin_manager  # noqa: E402
from wmrl_core.trainer import train  # noqa: E402

CONFIG = PACKAGE / "wmrl_gymnasium_control" / "configs" / "cartpole.yaml"
SMALL = ["steps=3", "rollout.batch_tasks=4", "rollout.group_size=4", "eval.every=0", "checkpoint.every=0"]


def plugin_manager():
    return get_plugin_manager(entry_points=False, extra_plugins=[plugin])


@pytest.fixture(scope="module")
def components():
    env = CartPoleSeeds(horizon=20, num_train=4, num_heldout=2)
    return env, LinearPlanPolicy(env), CartPoleLookahead(env, lookahead=5)


def test_the_splits_are_disjoint_seeds_with_their_initial_states(components):
    env = components[0]
    train_ids, heldout_ids = ({t.id for t in env.tasks(s)} for s in ("train", "heldout"))
    assert len(train_ids) == 4 and len(heldout_ids) == 2 and not train_ids & heldout_ids
    with pytest.raises(ValueError, match="unknown split 'test'.*'heldout', 'train'"):
        env.tasks("test")


def test_the_checkers_pass_on_every_component(components):
    env, policy, world_model = components
    check_environment(env)
    outcomes = check_environment(env, policy=policy, reward=ScoreReward(), n_solutions=4)
    assert [o.status for o in outcomes] == ["ok"] * 4 and all(0 < o.score <= 1 for o in outcomes)
    check_policy(policy)
    check_world_model(world_model)
    check_reward_extractor(ScoreReward())
    tasks = env.tasks("train")
    rollouts = policy.generate(tasks, 3)
    check_rollouts(rollouts, len(tasks), 3, "policy `cartpole-linear-plan`", tasks)
    check_log_probs("policy `cartpole-linear-plan`", policy.log_probs(rollouts), rollouts)
    assert torch.allclose(policy.log_probs(rollouts).detach(), rollouts.old_log_probs)


def test_execution_scores_the_share_of_the_horizon_balanced_and_refuses_bad_plans(components):
    env = components[0]
    task = env.tasks("train")[0]
    left, bad_action, short = [0] * 20, [0] * 19 + [2], [0] * 5
    good, out_of_space, too_short = env.execute([task] * 3, [left, bad_action, short])
    assert good.status == "ok" and good.score == good.info["steps"] / 20 < 1  # pushing left: the pole falls
    assert (out_of_space.status, too_short.status) == ("invalid_solution", "invalid_solution")
    assert "0..1" in out_of_space.info["error"] and "(5,)" in too_short.info["error"]


def test_the_world_model_is_exact_where_the_pole_falls_within_the_lookahead(components):
    env, policy, _ = components
    exact = CartPoleLookahead(env, lookahead=20)  # the whole horizon simulated: the real score
    tasks = env.tasks("train")
    rollouts = policy.generate(tasks, 4)
    real = [o.score for o in env.execute(rollouts.tasks, rollouts.solutions)]
    assert np.allclose(exact.predict(rollouts.tasks, rollouts.solutions), real)
    assert exact.predict(tasks[:1], [[0, 1]]) == [None]  # an unreadable plan: no prediction
    with pytest.raises(ValueError, match="at least 1"):
        CartPoleLookahead(env, lookahead=0)


def test_wmrl_trains_the_plan_policy_with_world_model_rewards(tmp_path):
    pm = plugin_manager()
    cfg = load_config(CONFIG, [*SMALL, f"run_dir={tmp_path}"], plugin_manager=pm)

    summary = train(cfg, plugin_manager=pm)

    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    records = [r for r in map(json.loads, lines) if r["step"] > 0]  # step 0: the record before training
    assert summary["steps"] == 3 and [r["step"] for r in records] == [1, 2, 3]
    for record in records:
        assert record["compute/step_world_model_s"] > 0 and math.isfinite(record["reward/world_model_mean"])
        assert record["anchors/groups"] == 1 and math.isfinite(record["reward/real_mean"])
        assert record["grad_norm"] > 0, record
    assert records[-1]["compute/world_model_items"] == 3 * 4 * 4  # every rollout of every step scored

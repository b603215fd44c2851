"""What a new user hits, fed to the real ``wmrl train`` command line (``wmrl_core.cli.main``).

Each test gives the CLI one mistake and checks that the message names the problem and the fix,
with no traceback, and the exit status. The components with faults below make the mistakes a
new plugin author makes; this module registers them as a plugin, through the same hooks as any.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from wmrl_core import cli, hookimpl
from wmrl_core.plugins import get_plugin_manager
from wmrl_core.synthetic.bandit import SyntheticBanditEnvironment
from wmrl_core.types import Outcome, Task

pytestmark = pytest.mark.slow  # each test trains a few tiny steps

SMALL = [
    "steps=4",
    "rollout.batch_tasks=4",
    "rollout.group_size=2",
    "eval.every=2",
    "eval.samples_per_task=3",
    "checkpoint.every=2",
    "environment.kwargs.num_tasks=4",
]
EVAL_BATCH = 4 * 3  # tasks x samples per task (training calls execute 4 x 2)
FAULTY_ENV = ["environment.name=faulty-bandit", f"environment.kwargs.eval_batch={EVAL_BATCH}"]


class FaultyBandit:
    """The synthetic bandit without ``true_reward`` (so evaluation executes), with one fault.

    :param fault: ``none``; ``short`` (one outcome too few); ``bad_status`` (a status outside the
        vocabulary); ``raise_in_eval`` (the ``raise_at``-th evaluation-sized call raises);
        ``interrupt`` (the ``raise_at``-th call raises ``KeyboardInterrupt``, as Ctrl-C would).
    :param eval_batch: the size of an evaluation call (tasks x ``eval.samples_per_task``).
    """

    def __init__(self, *, fault: str = "none", raise_at: int = 1, eval_batch: int = 0, **bandit: Any):
        self.env = SyntheticBanditEnvironment(**bandit)
        self.truth = self.env.truth  # what the tabular policy sizes itself by
        self.fault, self.raise_at, self.eval_batch = fault, raise_at, eval_batch
        self.calls = self.eval_calls = 0
        self.cost = self.env.cost

    def tasks(self, split: str = "train") -> list[Task]:
        return self.env.tasks(split)

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        self.calls += 1
        self.eval_calls += len(solutions) == self.eval_batch
        if self.fault == "interrupt" and self.calls == self.raise_at:
            raise KeyboardInterrupt
        if self.fault == "raise_in_eval" and len(solutions) == self.eval_batch and self.eval_calls == self.raise_at:
            raise RuntimeError("sqlite3.OperationalError: database is locked")
        outcomes = self.env.execute(tasks, solutions)
        if self.fault == "short":
            return outcomes[:-1]
        if self.fault == "bad_status":
            outcomes[0] = Outcome(status="failed", score=0.0)
        return outcomes

    def state_dict(self) -> dict:
        return self.env.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.env.load_state_dict(state)


class FaultyWorldModel:
    """Predicts ``nan`` for every solution, or an outcome with status ``fine`` (not a status)."""

    def __init__(self, env: Any = None, *, fault: str = "nan"):
        self.fault = fault

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Any]:
        if self.fault == "bad_status":
            return [Outcome(status="fine", score=0.5) for _ in solutions]
        return [math.nan for _ in solutions]


@hookimpl
def wmrl_register_environments(table):
    table.add("faulty-bandit", FaultyBandit, description="the synthetic bandit with one chosen fault")


@hookimpl
def wmrl_register_world_models(table):
    table.add("faulty-world-model", FaultyWorldModel, description="NaN or invalid-status predictions")


@hookimpl
def wmrl_default_reward_extractor(environment_name):
    return "score" if environment_name == "faulty-bandit" else None


@pytest.fixture(autouse=True)
def _faulty_plugin(monkeypatch):
    this = sys.modules[__name__]
    monkeypatch.setattr("wmrl_core.trainer.get_plugin_manager", lambda: get_plugin_manager(extra_plugins=[this]))


def wmrl_train(capsys, config: Path, *overrides: str) -> tuple[int, str, str]:
    """``wmrl train CONFIG OVERRIDES`` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    rc = cli.main(["train", str(config), *SMALL, *overrides])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def steps_in(run: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------- run identity and resume


def test_fresh_run_moves_the_old_run_aside_and_resume_never_crosses_runs(capsys, synthetic_config, tmp_path):
    run = tmp_path / "R"
    rc, _, _ = wmrl_train(capsys, synthetic_config, "mode=real", "seed=5", f"run_dir={run}", *FAULTY_ENV)
    assert rc == 0 and (run / "checkpoints" / "step_000004.pt").exists()
    # another seed into the same run_dir, interrupted (Ctrl-C) before its first checkpoint
    rc, _, err = wmrl_train(
        capsys, synthetic_config, "mode=real", "seed=7", "steps=8", "checkpoint.every=25", f"run_dir={run}",
        *FAULTY_ENV, "environment.kwargs.fault=interrupt", "environment.kwargs.raise_at=4",
    )  # fmt: skip
    assert rc == 130
    moved = sorted(tmp_path.glob("R/previous-*"))
    assert len(moved) == 1 and (moved[0] / "checkpoints" / "step_000004.pt").exists()
    assert f"moved it to {moved[0]}" in err
    assert "no checkpoint of this run was written yet" in err and "is kept" not in err
    # resuming it must not continue seed 5's policy: there is no checkpoint of seed 7's run
    rc, _, err = wmrl_train(
        capsys, synthetic_config, "mode=real", "seed=7", "steps=8", "checkpoint.every=25", f"run_dir={run}",
        "resume=true", *FAULTY_ENV,
    )  # fmt: skip
    assert rc == 0
    assert "holds no checkpoint of this run: starting from step 0" in err
    assert steps_in(run) == list(range(9))
    import torch

    saved = torch.load(run / "checkpoints" / "last.pt", weights_only=False)
    assert saved["run"]["id"] == json.loads((run / "run.json").read_text())["id"]
    assert saved["run"]["config"]["seed"] == 7


def test_resume_lists_changed_settings_and_refuses_those_that_break_exactness(capsys, synthetic_config, tmp_path):
    run = f"run_dir={tmp_path / 'R'}"
    assert wmrl_train(capsys, synthetic_config, run)[0] == 0
    rc, _, err = wmrl_train(capsys, synthetic_config, run, "resume=true", "steps=6", "grpo.lr=0.5")
    assert rc == 2
    assert "grpo.lr: 0.1 -> 0.5" in err and "resume_allow_changes=[grpo.lr]" in err
    rc, _, err = wmrl_train(
        capsys, synthetic_config, run, "resume=true", "steps=6", "grpo.lr=0.5", "resume_allow_changes=[grpo.lr]"
    )
    assert rc == 0
    assert "resuming from step 4 with changed settings" in err and "steps: 4 -> 6" in err and "grpo.lr" in err
    assert steps_in(tmp_path / "R") == list(range(7))


def test_a_setting_added_after_the_checkpoint_resumes_at_its_default_only(capsys, synthetic_config, tmp_path):
    import torch

    run = tmp_path / "R"
    assert wmrl_train(capsys, synthetic_config, f"run_dir={run}")[0] == 0
    last = run / "checkpoints" / "last.pt"
    saved = torch.load(last, weights_only=False)
    del saved["run"]["config"]["grpo.drop_uninformative_groups"]  # as written before the setting existed
    torch.save(saved, last)
    rc, _, err = wmrl_train(capsys, synthetic_config, f"run_dir={run}", "resume=true", "steps=6")
    assert rc == 0 and "drop_uninformative_groups" not in err
    torch.save(saved, last)
    rc, _, err = wmrl_train(
        capsys, synthetic_config, f"run_dir={run}", "resume=true", "steps=8", "grpo.drop_uninformative_groups=true"
    )
    assert rc == 2 and "grpo.drop_uninformative_groups: None -> True" in err


def test_resume_below_the_checkpoint_step_is_refused(capsys, synthetic_config, tmp_path):
    run = f"run_dir={tmp_path / 'R'}"
    assert wmrl_train(capsys, synthetic_config, run)[0] == 0
    rc, _, err = wmrl_train(capsys, synthetic_config, run, "resume=true", "steps=2")
    assert rc == 2
    assert "already past steps=2" in err and "checkpoint is at step 4" in err and "steps above 4" in err


def test_resume_at_the_last_step_keeps_the_final_record(capsys, synthetic_config, tmp_path):
    run = tmp_path / "R"
    assert wmrl_train(capsys, synthetic_config, f"run_dir={run}")[0] == 0
    rc, _, err = wmrl_train(capsys, synthetic_config, f"run_dir={run}", "resume=true")
    assert rc == 0 and "nothing to train" in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["final"]["step"] == 4 and summary["eval_last"]["step"] == 4


def test_interrupt_during_start_up_does_not_claim_a_checkpoint(capsys, monkeypatch, synthetic_config, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("wmrl_core.trainer.make_components", interrupted)
    capsys.readouterr()
    rc = cli.main(["train", str(synthetic_config), f"run_dir={tmp_path / 'R'}"])
    err = capsys.readouterr().err
    assert rc == 130
    assert "no checkpoint was written" in err and "is kept" not in err


# ----------------------------------------------------------------- config


def test_unknown_eval_split_lists_the_environments_splits(capsys, synthetic_config, tmp_path):
    rc, _, err = wmrl_train(capsys, synthetic_config, f"run_dir={tmp_path / 'R'}", "eval.split=test")
    assert rc == 2
    assert "eval.split='test'" in err and "Its splits: train, heldout" in err and "set eval.split" in err
    assert not (tmp_path / "R" / "metrics.jsonl").exists()


def test_component_kwargs_typo_names_component_key_parameters_and_close_match(capsys, synthetic_config, tmp_path):
    rc, _, err = wmrl_train(capsys, synthetic_config, f"run_dir={tmp_path / 'R'}", "world_model.kwargs.qualty=perfect")
    assert rc == 2
    assert "world_model `synthetic-world-model` has no parameter `qualty`" in err
    assert "Did you mean `quality`?" in err and "Its parameters: " in err and "curvature" in err
    rc, _, err = wmrl_train(capsys, synthetic_config, f"run_dir={tmp_path / 'R'}", "environment.kwargs.num_arm=3")
    assert rc == 2 and "environment `synthetic-bandit` has no parameter `num_arm`" in err and "`num_arms`" in err


def test_a_factory_that_raises_is_named(capsys, synthetic_config, tmp_path):
    rc, _, err = wmrl_train(
        capsys, synthetic_config, f"run_dir={tmp_path / 'R'}", "world_model.name=noise", "world_model.kwargs.low=2"
    )
    assert rc == 2
    assert "world_model `noise` (plugin wmrl_core.experiments.noise) failed to start: ValueError" in err
    assert "world_model.kwargs" in err


def test_switching_a_component_on_the_command_line_drops_the_files_kwargs(capsys, synthetic_config, tmp_path):
    run = tmp_path / "R"
    rc, _, _ = wmrl_train(capsys, synthetic_config, f"run_dir={run}", "mode=world_model", "world_model.name=noise")
    assert rc == 0
    assert json.loads((run / "summary.json").read_text())["components"]["world_model"] == "noise"
    from omegaconf import OmegaConf

    assert OmegaConf.load(run / "config.yaml").world_model.kwargs == {}
    rc, _, _ = wmrl_train(
        capsys, synthetic_config, f"run_dir={run}", "world_model.name=noise", "world_model.kwargs.low=-1"
    )
    assert rc == 0 and OmegaConf.load(run / "config.yaml").world_model.kwargs == {"low": -1}
    for cleared in ("world_model.kwargs={}", "world_model.kwargs=null"):  # none of the file's kwargs
        rc, _, _ = wmrl_train(capsys, synthetic_config, f"run_dir={run}", cleared)
        assert rc == 0 and OmegaConf.load(run / "config.yaml").world_model.kwargs == {}


def test_yaml_syntax_error_names_file_line_and_column(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("mode: wmrl\nsteps: 4\nrollout: {batch_tasks: 4, group_size: 2\nseed: 0\n")
    rc, _, err = wmrl_train(capsys, bad)
    assert rc == 2
    assert f"{bad}:4:5: YAML syntax error" in err and "expected ',' or '}'" in err


def test_a_misspelt_setting_value_names_the_closest_choice_and_where_settings_are_listed(capsys, synthetic_config):
    rc, _, err = wmrl_train(capsys, synthetic_config, "fusion.method=rectifed")
    assert rc == 2 and "fusion.method='rectifed' is unknown (did you mean rectified?); use one of " in err
    rc, _, err = wmrl_train(capsys, synthetic_config, "anchors.fraction=lots")
    assert rc == 2 and "at `anchors.fraction`" in err and "`wmrl train --help` lists every setting" in err


def test_unknown_policy_message_spells_policies(capsys, synthetic_config, tmp_path):
    rc, _, err = wmrl_train(capsys, synthetic_config, f"run_dir={tmp_path / 'R'}", "policy.name=tabular-softmx")
    assert rc == 2 and "Known policies: " in err and "policys" not in err


# ----------------------------------------------------------------- what components return


def test_environment_returning_too_few_outcomes(capsys, synthetic_config, tmp_path):
    rc, _, err = wmrl_train(
        capsys,
        synthetic_config,
        f"run_dir={tmp_path / 'R'}",
        "mode=real",
        *FAULTY_ENV,
        "environment.kwargs.fault=short",
    )
    assert rc == 2
    assert f"environment `faulty-bandit` returned {EVAL_BATCH - 1} outcomes for {EVAL_BATCH} solutions" in err
    assert "one per solution" in err


def test_environment_raising_in_evaluation_keeps_the_checkpoint(capsys, synthetic_config, tmp_path):
    rc, _, err = wmrl_train(
        capsys, synthetic_config, f"run_dir={tmp_path / 'R'}", "mode=real", "eval.every=3", *FAULTY_ENV,
        "environment.kwargs.fault=raise_in_eval", "environment.kwargs.raise_at=2",
    )  # fmt: skip
    assert rc == 2
    assert "environment `faulty-bandit` raised RuntimeError in execute() during the evaluation" in err
    assert "database is locked" in err
    assert "the checkpoint of step 2 is kept" in err and (tmp_path / "R" / "checkpoints" / "step_000002.pt").exists()


def test_invalid_outcome_status_is_named_with_its_component(capsys, synthetic_config, tmp_path):
    rc, _, err = wmrl_train(
        capsys,
        synthetic_config,
        f"run_dir={tmp_path / 'R'}",
        "mode=real",
        *FAULTY_ENV,
        "environment.kwargs.fault=bad_status",
    )
    assert rc == 2
    assert "environment `faulty-bandit`: execute() returned Outcome(status='failed')" in err and "use one of ok" in err
    rc, _, err = wmrl_train(
        capsys, synthetic_config, f"run_dir={tmp_path / 'R'}", "mode=world_model",
        "world_model.name=faulty-world-model", "world_model.kwargs.fault=bad_status",
    )  # fmt: skip
    assert rc == 2 and "world model `faulty-world-model`: predict() returned Outcome(status='fine')" in err


def test_all_nan_world_model_warns_and_a_run_that_trained_on_nothing_fails(capsys, synthetic_config, tmp_path):
    nan_wm = ["world_model.name=faulty-world-model", "world_model.kwargs.fault=nan"]
    rc, _, err = wmrl_train(capsys, synthetic_config, f"run_dir={tmp_path / 'A'}", "mode=world_model", *nan_wm)
    assert rc == 2
    assert "warning: step 1: every world-model reward was dropped (8 of 8)" in err
    assert "the run trained on nothing: none of its 4 steps had a usable reward" in err
    assert (tmp_path / "A" / "summary.json").exists()
    # with anchors the run still learns from real rewards: a warning, exit 0
    rc, _, err = wmrl_train(capsys, synthetic_config, f"run_dir={tmp_path / 'B'}", "mode=wmrl", *nan_wm)
    assert rc == 0 and "every world-model reward was dropped" in err and "trained on nothing" not in err


# ----------------------------------------------------------------- what the run writes


def _strict(text: str) -> object:
    def refuse(constant):
        raise AssertionError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_summary_is_strict_json_and_the_run_directory_line_lists_what_exists(capsys, synthetic_config, tmp_path):
    run = tmp_path / "R"
    rc, out, _ = wmrl_train(capsys, synthetic_config, f"run_dir={run}", "mode=real", "logging.tensorboard=false")
    assert rc == 0
    summary = _strict((run / "summary.json").read_text())
    assert summary["final"]["reward/world_model_mean"] is None  # NaN in mode=real, written as null
    line = next(x for x in out.splitlines() if x.startswith("run directory:"))
    assert "tensorboard/" not in line and "checkpoints/" in line and "metrics.jsonl" in line
    for record in (run / "metrics.jsonl").read_text().splitlines():
        _strict(record)
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in summary["final"].values())


def test_evaluation_plot_has_error_bars_and_calibration_plot_draws_raw_against_calibrated(
    capsys, synthetic_config, tmp_path
):
    from wmrl_core.metrics import read_metrics
    from wmrl_core.plots import PANELS, panel_series

    run = tmp_path / "R"
    rc, _, _ = wmrl_train(capsys, synthetic_config, f"run_dir={run}", "mode=wmrl", "anchors.fraction=0.5")
    assert rc == 0 and (run / "plots" / "evaluation.png").exists() and (run / "plots" / "calibration.png").exists()
    panels = {panel.name: panel.keys for panel in PANELS}
    records = read_metrics(run)
    evaluation = panel_series(records, panels["evaluation"])
    steps, values, se = evaluation["eval/true_reward"]
    assert steps == [0, 2, 4] and se == [r["eval/true_reward_se"] for r in records if "eval/true_reward_se" in r]
    calibration = panel_series(records, panels["calibration"])
    assert {"calibration/within_group_error_raw", "calibration/within_group_error_calibrated"} <= set(calibration)


def test_panel_series_takes_errors_only_where_every_point_has_one():
    from wmrl_core.plots import panel_series

    records = [{"step": 0, "a": 1.0, "a_se": 0.5, "b": 2.0}, {"step": 1, "a": 3.0, "a_se": 0.25, "b": None}]
    assert panel_series(records, ("a", "b", "c")) == {"a": ([0, 1], [1.0, 3.0], [0.5, 0.25]), "b": ([0], [2.0], None)}
    records[1]["a_se"] = float("nan")
    assert panel_series(records, ("a",))["a"][2] is None

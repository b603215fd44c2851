"""What a second new user hits (issue 55), through the Python API: ``load_config`` and ``train``.

The synthetic domain's components, each with one mistake a plugin author makes, registered by a
plugin object of this module (``get_plugin_manager(extra_plugins=[...])``). Each mistake must
end in one :class:`~wmrl_core.errors.WMRLError` line naming the component, the problem and the fix.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from wmrl_core import hookimpl
from wmrl_core.config import load_config
from wmrl_core.errors import WMRLError
from wmrl_core.plugins import get_plugin_manager
from wmrl_core.synthetic.bandit import SyntheticBanditEnvironment
from wmrl_core.synthetic.policy import TabularSoftmaxPolicy
from wmrl_core.trainer import train
from wmrl_core.types import Outcome, Rollouts, Task

pytestmark = pytest.mark.slow  # each test trains a few tiny steps

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC = ROOT / "configs" / "synthetic" / "wmrl.yaml"
SMALL = [
    "steps=2",
    "rollout.batch_tasks=4",
    "rollout.group_size=2",
    "eval.every=0",
    "checkpoint.every=0",
    "environment.kwargs.num_tasks=4",
]


class FaultyEnvironment(SyntheticBanditEnvironment):
    """The synthetic bandit; ``fault="nan_score"`` grades every solution ``ok`` with score NaN."""

    def __init__(self, *, fault: str = "none", declared_timeout_s: float | None = None, **bandit: Any):
        super().__init__(**bandit)
        self.fault = fault
        if declared_timeout_s is not None:  # what a domain that knows its costs declares
            self.timeout_s = lambda n_solutions: declared_timeout_s

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        if self.fault == "execute_raises":
            return _a_bug_in_the_plugin()
        if self.fault == "execute_hangs":
            time.sleep(30)
        if self.fault == "execute_raises_long":
            raise RuntimeError("the grader failed\n" + "a dumped tensor line\n" * 300)
        if self.fault == "all_invalid":
            return [Outcome(status="invalid_solution", score=None) for _ in solutions]
        outcomes = super().execute(tasks, solutions)
        if self.fault == "nan_score":
            return [Outcome(status="ok", score=math.nan) for _ in outcomes]
        return outcomes


def _a_bug_in_the_plugin() -> list[Outcome]:
    """What a plugin's ``execute()`` calls when it has a bug."""
    return [Outcome(status="ok", score=1 / 0)]


class FaultyPolicy(TabularSoftmaxPolicy):
    """The tabular policy with one fault in its ``group_ids`` or its ``log_probs``."""

    def __init__(self, env: Any, *, fault: str = "none", **kwargs: Any):
        super().__init__(env, **kwargs)
        self.fault = fault

    def generate(self, tasks: Sequence[Task], group_size: int) -> Rollouts:
        rollouts = super().generate(tasks, group_size)
        n, ids = len(rollouts), np.asarray(rollouts.group_ids)
        rollouts.group_ids = {
            "group_ids_zero": np.zeros(n, dtype=int),
            "group_ids_from_1": ids + 1,
            "group_ids_float": ids.astype(float),
            "group_ids_swapped": np.where(np.arange(n) == 0, ids[-1], np.where(np.arange(n) == n - 1, ids[0], ids)),
        }.get(self.fault, ids)
        return rollouts

    def log_probs(self, rollouts: Rollouts) -> Any:
        lp = super().log_probs(rollouts)
        if self.fault == "log_probs_detached":
            return lp.detach()
        if self.fault == "log_probs_nan":
            return lp * math.nan
        self.calls = getattr(self, "calls", 0) + 1
        if self.fault == "log_probs_nan_after_first" and self.calls > 1:
            return lp * math.nan
        return lp


class FaultsPlugin:
    """Registers ``faulty-bandit`` and ``faulty-policy``."""

    @hookimpl
    def wmrl_register_environments(self, table):
        table.add("faulty-bandit", FaultyEnvironment, description="the synthetic bandit with one chosen fault")

    @hookimpl
    def wmrl_register_policies(self, table):
        table.add("faulty-policy", FaultyPolicy, description="the tabular policy with one chosen fault")

    @hookimpl
    def wmrl_default_reward_extractor(self, environment_name):
        return "score" if environment_name == "faulty-bandit" else None


def run(tmp_path: Path, *overrides: str, plugins: Sequence[object] = ()) -> dict[str, Any]:
    """``train`` on the small synthetic config with ``overrides``, in ``tmp_path/R``."""
    pm = get_plugin_manager(extra_plugins=[FaultsPlugin(), *plugins])
    cfg = load_config(SYNTHETIC, [*SMALL, f"run_dir={tmp_path / 'R'}", *overrides], plugin_manager=pm)
    return train(cfg, plugin_manager=pm)


def one_line_error(tmp_path: Path, *overrides: str) -> str:
    """The message of the :class:`WMRLError` that ``run`` raises: one line."""
    with pytest.raises(WMRLError) as info:
        run(tmp_path, *overrides)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_log_probs_that_turn_nan_after_the_first_check_stop_the_run_before_the_update(tmp_path):
    message = one_line_error(tmp_path, "policy.name=faulty-policy", "policy.kwargs.fault=log_probs_nan_after_first")
    assert "log_probs() returned NaN or inf at" in message and "at step 1" in message
    assert "no optimizer step was taken" in message


def test_a_component_error_with_a_long_message_stays_one_line(tmp_path):
    message = one_line_error(tmp_path, "environment.name=faulty-bandit", "environment.kwargs.fault=execute_raises_long")
    assert "RuntimeError in execute()" in message and "the grader failed …" in message and len(message) < 700


def test_anchors_that_never_get_a_reward_are_named_and_a_wmrl_run_that_learned_nothing_fails(tmp_path, capsys):
    from wmrl_core.errors import TrainedOnNothingError

    with pytest.raises(TrainedOnNothingError) as info:  # the gate never opens: nothing reached the update
        run(tmp_path, "environment.name=faulty-bandit", "environment.kwargs.fault=all_invalid", "mode=wmrl")
    assert "invalid_solution" in str(info.value) and "failure_reward" in str(info.value)
    err = capsys.readouterr().err
    assert "none of the" in err and "executed outcomes has a reward (statuses: invalid_solution" in err


def test_an_installed_plugin_given_again_in_extra_plugins_is_loaded_once():
    from wmrl_core.fusion import plugin as fusion_plugin

    pm = get_plugin_manager(extra_plugins=[fusion_plugin, FaultsPlugin(), FaultsPlugin()])
    assert sum(p is fusion_plugin for p in pm.get_plugins()) == 1
    assert pm.get_plugin("FaultsPlugin") is not None  # named by its class, not by id


def test_evaluating_on_the_training_split_is_noticed(tmp_path, capsys):
    run(tmp_path, "eval.split=train", "eval.every=2")
    assert "the evaluations run on the split training samples from ('train')" in capsys.readouterr().err
    run(tmp_path / "default", "eval.every=2")  # heldout falling back to train where a domain has none: no notice
    assert "the evaluations run on the split training samples" not in capsys.readouterr().err


# ----------------------------------------------------------------- calls that never return


def test_a_hung_execute_stops_at_the_environments_own_deadline_with_progress_lines_meanwhile(tmp_path, capsys):
    start = time.monotonic()
    message = one_line_error(
        tmp_path,
        "environment.name=faulty-bandit",
        "environment.kwargs.fault=execute_hangs",
        "environment.kwargs.declared_timeout_s=1.2",
        "heartbeat_s=0.5",
    )
    assert time.monotonic() - start < 20
    assert (
        "environment `faulty-bandit`: execute() did not return within 1.2 s (the environment's timeout_s())" in message
    )
    assert "environment.execute_timeout_s" in message  # the fix
    err = capsys.readouterr().err
    assert re.search(
        r"wmrl: waiting on environment `faulty-bandit` execute\(\) of \d+ solutions at step 1: "
        r"\d+ s so far \(deadline 1\.2 s\)",
        err,
    ), err


def test_the_config_deadline_wins_over_the_environments(tmp_path):
    message = one_line_error(
        tmp_path,
        "environment.name=faulty-bandit",
        "environment.kwargs.fault=execute_hangs",
        "environment.kwargs.declared_timeout_s=600",
        "environment.execute_timeout_s=0.5",
    )
    assert "within 0.5 s (environment.execute_timeout_s)" in message


def test_every_execute_has_a_deadline_by_default():
    from wmrl_core.waits import DEFAULT_EXECUTE_TIMEOUT_S, deadline_s

    class Declares:
        def timeout_s(self, n: int) -> float:
            return 2.0 * n

    assert deadline_s(None, object(), 8, DEFAULT_EXECUTE_TIMEOUT_S) == DEFAULT_EXECUTE_TIMEOUT_S
    assert deadline_s(None, Declares(), 8, DEFAULT_EXECUTE_TIMEOUT_S) == 16.0
    assert deadline_s(5.0, Declares(), 8, DEFAULT_EXECUTE_TIMEOUT_S) == 5.0
    assert deadline_s(math.inf, Declares(), 8, DEFAULT_EXECUTE_TIMEOUT_S) is None
    bad = Declares()
    bad.timeout_s = lambda n: -1  # type: ignore[method-assign]
    with pytest.raises(ValueError, match=r"timeout_s\(8\) returned -1; it must return seconds > 0"):
        deadline_s(None, bad, 8, DEFAULT_EXECUTE_TIMEOUT_S)


def test_a_call_that_returns_says_nothing_and_a_slow_one_says_what_it_waits_on():
    from wmrl_core.waits import heartbeat

    lines: list[str] = []
    with heartbeat("the thing", 0.2, None, say=lines.append):
        pass
    assert lines == []
    with heartbeat("the thing", 0.2, 9.0, say=lines.append):
        time.sleep(0.5)
    assert lines and lines[0] == "waiting on the thing: 0 s so far (deadline 9 s)", lines


# ----------------------------------------------------------------- what components return


def test_an_environment_grading_ok_with_a_nan_score_is_refused(tmp_path):
    message = one_line_error(tmp_path, "environment.name=faulty-bandit", "environment.kwargs.fault=nan_score")
    assert "environment `faulty-bandit`" in message and "status='ok'" in message and "nan" in message
    assert "finite score" in message


@pytest.mark.parametrize("fault", ["group_ids_zero", "group_ids_from_1", "group_ids_float", "group_ids_swapped"])
def test_group_ids_that_do_not_match_the_tasks_are_refused_before_execution(tmp_path, fault):
    message = one_line_error(tmp_path, "policy.name=faulty-policy", f"policy.kwargs.fault={fault}")
    assert message.startswith("policy `faulty-policy`: generate() returned group_ids"), message
    assert "0..3" in message
    assert not (tmp_path / "R" / "anchor_pairs.jsonl").read_text()


def test_groups_must_be_the_tasks_given_to_generate():
    import torch

    from wmrl_core.checkers import check_rollouts
    from wmrl_core.errors import ContractError

    given = [Task(id="a"), Task(id="b")]
    rows = [given[0]] * 4  # both groups hold task a: task b was given but is no group's
    rollouts = Rollouts(rows, [0] * 4, np.array([0, 0, 1, 1]), torch.zeros(4, 1), torch.ones(4, 1))
    check_rollouts(rollouts, 2, 2, "policy `p`")  # without the tasks given: each group holds one task
    with pytest.raises(ContractError, match=r"groups' tasks \['a', 'a'\] are not the 2 tasks it was given"):
        check_rollouts(rollouts, 2, 2, "policy `p`", given)


def test_log_probs_without_grad_is_named(tmp_path):
    message = one_line_error(tmp_path, "policy.name=faulty-policy", "policy.kwargs.fault=log_probs_detached")
    assert "policy `faulty-policy`: log_probs() returned a tensor without grad" in message


def test_nan_log_probs_are_blamed_on_log_probs(tmp_path):
    message = one_line_error(tmp_path, "policy.name=faulty-policy", "policy.kwargs.fault=log_probs_nan")
    assert "policy `faulty-policy`: log_probs() returned NaN" in message and "generate()" not in message


# ----------------------------------------------------------------- plugins


class MisspeltHookPlugin:
    """Registers a world model through a hook that does not exist (``..._world_model``, no ``s``)."""

    @hookimpl
    def wmrl_register_world_model(self, table):
        table.add("never-registered", FaultyEnvironment)


def test_a_misspelt_hook_names_the_plugin_the_hook_and_the_close_match():
    with pytest.raises(WMRLError) as info:
        get_plugin_manager(entry_points=False, extra_plugins=[MisspeltHookPlugin()])
    message = str(info.value)
    assert message == (
        "plugin `MisspeltHookPlugin` (given in extra_plugins) implements `wmrl_register_world_model`, which is not a "
        "WMRL hook (wmrl_core.hookspecs lists them). Did you mean `wmrl_register_world_models`? Rename it in the "
        "plugin, or leave it out of extra_plugins"
    )


MISSPELT_PLUGIN = """\
from wmrl_core import hookimpl


@hookimpl
def wmrl_register_world_model(table):
    table.add("never-registered", "x:y")
"""


@pytest.mark.slow  # starts the CLI in a fresh interpreter to discover the plugin
def test_an_installed_plugin_with_a_misspelt_hook_says_how_to_disable_it(tmp_path):
    (tmp_path / "misspelt_plugin.py").write_text(MISSPELT_PLUGIN)
    dist = tmp_path / "misspelt-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: misspelt\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[wmrl]\nmisspelt = misspelt_plugin\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "wmrl_core.cli", "plugins"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "wmrl: error: plugin `misspelt` implements `wmrl_register_world_model`, which is not a WMRL hook "
        "(wmrl_core.hookspecs lists them). Did you mean `wmrl_register_world_models`? Rename it in the plugin, or "
        "run without the plugin: WMRL_DISABLE_PLUGINS=misspelt"
    ]
    env["WMRL_DISABLE_PLUGINS"] = "misspelt"
    proc = subprocess.run(
        [sys.executable, "-m", "wmrl_core.cli", "plugins", "--json"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------- the run directory


def test_resume_in_another_configurations_run_is_refused_before_loading(tmp_path, monkeypatch):
    run(tmp_path)  # the synthetic bandit with its tabular policy, 4 tasks x 10 arms
    loaded = []
    monkeypatch.setattr("wmrl_core.step.TrainState.load_state_dict", lambda self, state: loaded.append(state))
    with pytest.raises(WMRLError) as info:
        run(tmp_path, "resume=true", "steps=1", "policy.name=faulty-policy", "environment.name=faulty-bandit")
    message = str(info.value)
    assert "\n" not in message and not loaded
    assert f"{tmp_path / 'R'} holds the run of another configuration" in message
    assert "environment.name: 'synthetic-bandit' -> 'faulty-bandit'" in message
    assert "policy.name: 'tabular-softmax' -> 'faulty-policy'" in message
    assert "; also " in message and "steps above" not in message and "resume_allow_changes" not in message


HOLD_THE_LOCK = """\
import sys, time
from pathlib import Path
from wmrl_core.run_lock import run_dir_lock

with run_dir_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_training_in_a_busy_run_dir_refuses_naming_the_holder_and_a_dead_holders_lock_is_taken_over(
    tmp_path, capsys
):
    (tmp_path / "R").mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK, str(tmp_path / "R")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        message = one_line_error(tmp_path)
        assert message.startswith(f"{tmp_path / 'R'} is in use: process {holder.pid} is training there"), message
        assert not (tmp_path / "R" / "metrics.jsonl").exists()
    finally:
        holder.kill()  # SIGKILL: the lock file stays behind, with the dead holder's pid
        holder.wait()
    assert (tmp_path / "R" / ".lock").read_text() == f"{holder.pid}\n"
    capsys.readouterr()
    run(tmp_path)
    err = capsys.readouterr().err
    assert f"was left by process {holder.pid}, which ended without releasing it; taking the run directory over" in err
    assert not (tmp_path / "R" / ".lock").exists()


def test_the_run_dir_lock_is_released_when_training_fails(tmp_path):
    one_line_error(tmp_path, "environment.name=faulty-bandit", "environment.kwargs.fault=nan_score")
    assert not (tmp_path / "R" / ".lock").exists()
    run(tmp_path)


def test_more_batch_tasks_than_tasks_is_noticed_once(tmp_path, capsys):
    capsys.readouterr()
    run(tmp_path, "rollout.batch_tasks=6", "steps=3")
    err = capsys.readouterr().err
    assert err.count("rollout.batch_tasks=6 is more than the 4 tasks of split 'train'") == 1, err
    assert "Set rollout.batch_tasks<=4" in err
    run(tmp_path)
    assert "rollout.batch_tasks" not in capsys.readouterr().err


def test_a_fresh_run_in_an_old_run_dir_moves_the_whole_old_run_aside_together(tmp_path, capsys):
    run(tmp_path, "seed=3", "mode=wmrl", "anchors.fraction=0.5", "checkpoint.every=1", "eval.every=1")
    old = tmp_path / "R"
    written = {p.name for p in old.iterdir()}
    assert {"metrics.jsonl", "summary.json", "config.yaml", "run.json", "anchor_pairs.jsonl", "checkpoints"} <= written
    (old / "notes.txt").write_text("mine")  # not a run file: stays
    before = {name: (old / name).read_bytes() for name in ("metrics.jsonl", "summary.json", "config.yaml")}
    capsys.readouterr()
    run(tmp_path, "seed=4", "steps=1", "mode=real")
    err = capsys.readouterr().err
    (previous,) = old.glob("previous-*")
    assert f"{old} held an earlier run (metrics.jsonl, summary.json, config.yaml" in err
    assert f"moved it to {previous}" in err
    assert {p.name for p in previous.iterdir()} == written - {"notes.txt"}
    assert {name: (previous / name).read_bytes() for name in before} == before
    assert (old / "notes.txt").read_text() == "mine" and not list(old.glob("checkpoints.replaced-*"))
    assert [json.loads(line)["step"] for line in (old / "metrics.jsonl").read_text().splitlines()] == [0, 1]
    assert not (old / "checkpoints" / "step_000002.pt").exists()


# ----------------------------------------------------------------- a plugin's own traceback


@pytest.mark.parametrize("debug", ["off", "--debug", "WMRL_DEBUG=1"])
def test_a_bug_in_a_plugins_execute_says_how_to_see_its_traceback_and_debug_prints_it(
    tmp_path, monkeypatch, capsys, debug
):
    from wmrl_core import cli

    monkeypatch.setattr(
        "wmrl_core.trainer.get_plugin_manager", lambda: get_plugin_manager(extra_plugins=[FaultsPlugin()])
    )
    monkeypatch.delenv("WMRL_DEBUG", raising=False)
    if debug == "WMRL_DEBUG=1":
        monkeypatch.setenv("WMRL_DEBUG", "1")
    argv = [str(SYNTHETIC), *SMALL, f"run_dir={tmp_path / 'R'}", "environment.name=faulty-bandit"]
    argv = [*(["--debug"] if debug == "--debug" else []), "train", *argv, "environment.kwargs.fault=execute_raises"]

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("wmrl: error:"))
    assert line.startswith("wmrl: error: environment `faulty-bandit`") and "ZeroDivisionError in execute()" in line
    if debug == "off":
        assert "rerun with --debug (or WMRL_DEBUG=1) for the plugin's traceback" in line
        assert "Traceback" not in err
    else:
        assert "rerun with --debug" not in err
        assert "Traceback (most recent call last)" in err and "in _a_bug_in_the_plugin" in err
        assert "ZeroDivisionError: division by zero" in err


# ----------------------------------------------------------------- start-up of the CLI

QUICK_COMMANDS = [["--help"], ["train", "--help"], ["train", "missing.yaml"], ["train", str(SYNTHETIC), "stepz=1"]]


@pytest.mark.parametrize("argv", QUICK_COMMANDS, ids=" ".join)
def test_help_and_configuration_errors_answer_without_importing_torch_or_scikit_learn(argv):
    # what made every command take ~3 s (benchmarks/cli_startup.py measures the seconds)
    code = (
        "import sys\n"
        "from wmrl_core import cli\n"
        "try:\n"
        f"    cli.main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('torch', 'sklearn', 'scipy', 'pandas') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout[-2000:] + done.stderr[-2000:]

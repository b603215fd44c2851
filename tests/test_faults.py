"""Faults injected into the core engine's stages, each against the real component, each with its promise.

* a truncated or corrupt checkpoint is named in a warning and the previous one is used;
* a full disk (a real 1 MiB tmpfs) stops the run with an error naming the directory and its free
  space; the metrics and checkpoints written before stay readable and the run resumes to the
  same metrics as an uninterrupted one;
* a world model that raises, hangs past ``world_model_timeout_s`` or returns NaN for some items,
  and a reward extractor that raises on one outcome, cost only those rewards (NaN, counted
  under ``faults/``); the step goes on.
"""

import errno
import math
import os
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest

from wmrl_core import hookimpl
from wmrl_core.builtin_rewards import ScoreReward
from wmrl_core.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from wmrl_core.config import load_config
from wmrl_core.errors import ConfigError
from wmrl_core.faults import DROPPED, DiskFullError, StepFaults, atomic_write_text
from wmrl_core.metrics import MetricsWriter, read_metrics
from wmrl_core.plugins import get_plugin_manager
from wmrl_core.synthetic.world_model import SyntheticWorldModel
from wmrl_core.testing import require
from wmrl_core.trainer import train
from wmrl_core.types import Outcome, Task

SMALL = ["rollout.batch_tasks=4", "eval.every=2", "logging.progress=false", "logging.tensorboard=false"]


def _cfg(config, run_dir, *overrides):
    return load_config(config, [f"run_dir={run_dir}", *SMALL, *overrides])


def _strip_wall(records):
    return [{k: v for k, v in r.items() if not k.startswith("wall/")} for r in records]


# ------------------------------------------------------------------ checkpoints


def test_a_corrupt_checkpoint_is_named_and_the_previous_one_resumes_to_the_same_metrics(synthetic_config, tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    train(_cfg(synthetic_config, full, "steps=8", "checkpoint.every=4"))
    train(_cfg(synthetic_config, part, "steps=8", "checkpoint.every=4"))
    ckpt = part / "checkpoints"
    # last.pt truncated mid-file, its twin step file overwritten with garbage
    data = (ckpt / "last.pt").read_bytes()
    (ckpt / "last.pt").write_bytes(data[: len(data) // 2])
    (ckpt / "step_000008.pt").write_bytes(b"\x00garbage" * 100)
    with pytest.warns(RuntimeWarning) as caught:
        train(_cfg(synthetic_config, part, "steps=8", "checkpoint.every=4", "resume=true"))
    messages = " ".join(str(w.message) for w in caught)
    assert "last.pt" in messages and "step_000008.pt" in messages and "resuming from" in messages
    assert "step 4" in messages
    assert _strip_wall(read_metrics(full)) == _strip_wall(read_metrics(part))


def test_only_a_truncated_last_checkpoint_uses_its_step_twin(tmp_path):
    save_checkpoint(tmp_path, 2, {"x": 2})
    save_checkpoint(tmp_path, 4, {"x": 4})
    (tmp_path / "last.pt").write_bytes((tmp_path / "last.pt").read_bytes()[:100])
    with pytest.warns(RuntimeWarning, match="last.pt is truncated or corrupt"):
        assert load_checkpoint(tmp_path)["x"] == 4


def test_no_readable_checkpoint_is_an_error_listing_every_file(tmp_path):
    save_checkpoint(tmp_path, 2, {"x": 2})
    for p in tmp_path.glob("*.pt"):
        p.write_bytes(b"")
    with pytest.warns(RuntimeWarning), pytest.raises(CheckpointError, match=r"last.pt .*step_000002.pt"):
        load_checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing")


def test_a_failed_checkpoint_write_leaves_the_previous_one_and_no_temporary_file(tmp_path, monkeypatch):
    import torch

    save_checkpoint(tmp_path, 2, {"x": 2})

    def half_then_fail(obj, f):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", half_then_fail)
    with pytest.raises(DiskFullError, match=str(tmp_path)):
        save_checkpoint(tmp_path, 4, {"x": 4})
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt", "step_000002.pt"]
    assert load_checkpoint(tmp_path)["x"] == 2


# ------------------------------------------------------------------ metrics


def test_a_partial_last_metrics_line_is_skipped_and_a_corrupt_middle_line_named(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "lo')
    with pytest.warns(RuntimeWarning, match="partial last line"):
        assert [r["step"] for r in read_metrics(path)] == [0, 1]
    path.write_text('{"step": 0}\n{"st\n{"step": 2}\n')
    with pytest.raises(ValueError, match="line 2"):
        read_metrics(path)


def test_a_metrics_line_cut_by_a_full_disk_is_removed_again(tmp_path):
    writer = MetricsWriter(tmp_path, tensorboard=False)
    writer.write({"step": 0, "x": 1.0})
    real = writer._file

    class FillsUp:  # writes a few bytes of the line, then the disk is full
        def fileno(self):
            return real.fileno()

        def write(self, data):
            real.write(bytes(data[:5]))
            raise OSError(errno.ENOSPC, "No space left on device")

    writer._file = FillsUp()
    with pytest.raises(DiskFullError, match=r"metrics metrics.jsonl in .* free"):
        writer.write({"step": 1, "x": 2.0})
    writer._file = real
    writer.close()
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 0, "x": 1.0}\n'


def test_atomic_write_replaces_whole_files_only(tmp_path):
    path = tmp_path / "summary.json"
    atomic_write_text(path, "old")
    atomic_write_text(path, "new")
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB tmpfs (needs root and mount rights: CI runs as root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    ok = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
        ).returncode
        == 0
    )
    require(ok, "mounting a 1 MiB tmpfs needs root and mount rights")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_full_disk_stops_with_a_clear_error_and_the_run_resumes_after_space_is_freed(
    synthetic_config, tmp_path, small_disk
):
    filler = small_disk / "filler"
    free = shutil.disk_usage(small_disk).free
    filler.write_bytes(b"\0" * (free - 100 * 1024))  # leave 100 KiB: room for a checkpoint or two
    run = small_disk / "run"
    steps = ["steps=12", "checkpoint.every=2"]
    with pytest.raises(DiskFullError) as info:
        train(_cfg(synthetic_config, run, *steps))
    message = str(info.value)
    assert str(small_disk) in message and "MiB free" in message and "resume=true" in message
    # what was written before is intact: whole metrics lines, a loadable checkpoint, no temporary files
    records = read_metrics(run)
    assert [r["step"] for r in records] == list(range(len(records)))
    state = load_checkpoint(run / "checkpoints")
    assert 2 <= state["step"] < 12 and state["step"] <= records[-1]["step"]
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    filler.unlink()
    train(_cfg(synthetic_config, run, *steps, "resume=true"))
    train(_cfg(synthetic_config, tmp_path / "uninterrupted", *steps))
    assert _strip_wall(read_metrics(run)) == _strip_wall(read_metrics(tmp_path / "uninterrupted"))


# ------------------------------------------------------------------ world model and reward extractor


class FaultyWorldModel(SyntheticWorldModel):
    """The synthetic world model, failing on chosen calls (1-based): raising, hanging, or NaN for every 4th item."""

    def __init__(self, env, *, raise_on=(), nan_on=(), hang_on=(), hang_s=30.0, **kwargs):
        super().__init__(env, **kwargs)
        self.raise_on, self.nan_on, self.hang_on, self.hang_s = set(raise_on), set(nan_on), set(hang_on), hang_s
        self.calls = 0

    def predict(self, tasks, solutions):
        self.calls += 1
        if self.calls in self.raise_on:
            raise ConnectionError("world model server went away")
        if self.calls in self.hang_on:
            time.sleep(self.hang_s)
        out = super().predict(tasks, solutions)
        if self.calls in self.nan_on:
            out = [math.nan if i % 4 == 0 else v for i, v in enumerate(out)]
        return out


class FaultyReward(ScoreReward):
    """The score reward, raising on its ``raise_on``-th call."""

    def __init__(self, env=None, *, raise_on=0):
        super().__init__(env)
        self.raise_on, self.calls = raise_on, 0

    def __call__(self, task, outcome):
        self.calls += 1
        if self.calls == self.raise_on:
            raise KeyError("metric")
        return super().__call__(task, outcome)


class FaultPlugin:
    @hookimpl
    def wmrl_register_world_models(self, table):
        table.add("faulty-world-model", FaultyWorldModel)

    @hookimpl
    def wmrl_register_reward_extractors(self, table):
        table.add("faulty-score", FaultyReward)


@pytest.mark.slow
def test_world_model_and_reward_faults_drop_only_their_rewards_and_are_counted(synthetic_config, tmp_path):
    n = 4 * 8  # batch_tasks x group_size
    cfg = _cfg(
        synthetic_config,
        tmp_path / "run",
        "steps=5",
        "world_model.name=faulty-world-model",
        "world_model.kwargs.raise_on=[2]",
        "world_model.kwargs.nan_on=[3]",
        "world_model.kwargs.hang_on=[5]",
        "world_model_timeout_s=0.5",
        "reward.name=faulty-score",
        "reward.kwargs.raise_on=5",
    )
    started = time.perf_counter()
    train(cfg, plugin_manager=get_plugin_manager(extra_plugins=[FaultPlugin()]))
    assert time.perf_counter() - started < 30.0  # the hung call (30 s) was abandoned
    by_step = {r["step"]: r for r in read_metrics(tmp_path / "run")}
    counts = {
        s: tuple(
            by_step[s][k]
            for k in (
                "faults/world_model_errors",
                "faults/world_model_timeouts",
                "faults/world_model_dropped",
                "faults/reward_errors",
            )
        )
        for s in range(1, 6)
    }
    assert counts == {1: (0, 0, 0, 1), 2: (1, 0, n, 0), 3: (0, 0, n // 4, 0), 4: (0, 0, 0, 0), 5: (0, 1, n, 0)}
    for s in (2, 5):  # no world-model reward at all: the update used the anchors alone, nothing became 0
        assert by_step[s]["reward/world_model_mean"] is None and by_step[s]["fusion/n_world_model"] == 0
        assert by_step[s]["fusion/w_real"] == pytest.approx(1.0)
    assert by_step[3]["fusion/n_world_model"] < by_step[4]["fusion/n_world_model"]
    assert by_step[1]["reward/world_model_mean"] is not None and by_step[5]["loss"] is not None


def test_a_model_still_hung_is_not_called_again_until_it_returns():
    release = threading.Event()

    class Hangs:
        calls = 0

        def predict(self, tasks, solutions):
            self.calls += 1
            if self.calls == 1:
                release.wait(10)
            return [1.0] * len(solutions)

    model, faults = Hangs(), StepFaults(world_model_timeout_s=0.1)
    tasks = [Task("t")] * 3
    assert faults.predict(model, tasks, [0, 1, 2]) == [DROPPED] * 3
    assert faults.predict(model, tasks, [0, 1, 2]) == [DROPPED] * 3 and model.calls == 1
    assert faults.metrics()["faults/world_model_timeouts"] == 2
    release.set()
    time.sleep(0.2)
    assert faults.predict(model, tasks, [0, 1, 2]) == [1.0] * 3 and model.calls == 2
    assert faults.metrics()["faults/world_model_dropped"] == 0


def test_dropped_and_failed_rewards_are_nan_never_zero():
    faults = StepFaults()
    tasks = [Task(str(i)) for i in range(5)]
    predictions = faults.predict(
        type("M", (), {"predict": lambda self, t, s: [0.5, math.inf, None, Outcome("ok", math.nan), 0.0]})(),
        tasks,
        list(range(5)),
    )
    assert predictions[0] == 0.5 and predictions[4] == 0.0 and predictions[1:4] == [DROPPED] * 3

    def penalizes_everything(task, outcome):  # would give 0 to a dropped item if it ever saw one
        if task.id == "4":
            raise ValueError("bad outcome")
        return outcome.score if outcome.ok else 0.0

    rewards = faults.rewards(penalizes_everything, tasks, predictions)
    np.testing.assert_array_equal(np.isnan(rewards), [False, True, True, True, True])
    assert rewards[0] == 0.5
    assert faults.metrics() == {
        "faults/world_model_errors": 0,
        "faults/world_model_timeouts": 0,
        "faults/world_model_dropped": 3,
        "faults/reward_errors": 1,
    }


def test_world_model_timeout_is_validated(synthetic_config, tmp_path):
    with pytest.raises(ConfigError, match="world_model_timeout_s"):
        _cfg(synthetic_config, tmp_path, "world_model_timeout_s=0")


def test_an_extractor_that_raises_during_evaluation_loses_that_reward_not_the_evaluation():
    from types import SimpleNamespace

    from wmrl_core.trainer import evaluate

    class Policy:
        def generate(self, tasks, n):
            return SimpleNamespace(tasks=[t for t in tasks for _ in range(n)], solutions=[0.2, 0.8] * len(tasks))

    class Env:  # executed for real: no true_reward
        def execute(self, tasks, solutions):
            return [Outcome("ok", s) for s in solutions]

    calls = []

    def reward(task, outcome):
        calls.append(task.id)
        if len(calls) == 2:
            raise KeyError("metric")
        return outcome.score

    c = SimpleNamespace(policy=Policy(), environment=Env(), reward=reward)
    out = evaluate(c, [Task("a"), Task("b")], 2, seed=0)
    assert out["eval/reward_errors"] == 1
    assert out["eval/reward"] == pytest.approx((0.2 + 0.2 + 0.8) / 3)  # the mean of the three kept

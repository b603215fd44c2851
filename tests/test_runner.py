"""The arm runner on tiny synthetic runs: run order, resume, skip, archive, refusals."""

import json
import shutil
import tarfile

import pytest

from wmrl_core.errors import ConfigError
from wmrl_core.experiments.runner import (
    Arm,
    as_arms,
    by_arm,
    check_settings,
    pack_unfinished,
    run_arms,
    unpack_unfinished,
)
from wmrl_core.metrics import read_metrics

COMMON = ["steps=2", "eval.every=1", "eval.samples_per_task=4", "rollout.batch_tasks=4", "checkpoint.every=1"]
ARMS = [Arm("real", ("mode=real",)), Arm("wmrl", ("mode=wmrl",))]


def _final_reward(run):
    return {"final": read_metrics(run.run_dir)[-1]["eval/true_reward"]}


@pytest.mark.slow
def test_every_arm_runs_for_every_seed_seeds_outer_and_a_finished_run_is_skipped(synthetic_config, tmp_path):
    calls = []

    def evaluate(run):
        calls.append(run.name)
        return _final_reward(run)

    runs = run_arms(synthetic_config, ARMS, [3, 4], tmp_path, overrides=COMMON, evaluate=evaluate)
    assert [r.name for r in runs] == ["real-seed3", "wmrl-seed3", "real-seed4", "wmrl-seed4"]
    assert calls == [r.name for r in runs] and all(r.trained for r in runs)
    assert [r.config.seed for r in runs] == [3, 3, 4, 4] and runs[1].config.mode == "wmrl"
    assert all(r.train_cpu_s > 0 and r.record["final"] == _final_reward(r)["final"] for r in runs)
    first = [r.record for r in runs]

    again = run_arms(synthetic_config, ARMS, [3, 4], tmp_path, overrides=COMMON, evaluate=evaluate)
    assert calls == [r.name for r in runs]  # neither trained nor evaluated again
    assert not any(r.trained for r in again) and [r.record for r in again] == first
    assert list(by_arm(again)) == ["real", "wmrl"] and [r.seed for r in by_arm(again)["wmrl"]] == [3, 4]


def test_reuse_false_trains_again_from_scratch(synthetic_config, tmp_path):
    run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=COMMON)
    again = run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=COMMON, reuse=False)
    assert again[0].trained and len([r for r in read_metrics(again[0].run_dir) if r["step"] > 0]) == 2


def test_progress_names_the_arm_seed_then_shows_each_step_and_is_off_by_default(synthetic_config, tmp_path, capsys):
    short = [*COMMON, "eval.every=0"]
    (run,) = run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=short, progress=True)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[runner] real-seed0: training"
    assert [line.split()[:3] for line in lines[1:]] == [["real:", "step", "1/2"], ["real:", "step", "2/2"]]
    assert run.config.logging.progress
    (again,) = run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=short, report_only=True)
    assert not again.config.logging.progress  # the default, for experiments of many short runs


@pytest.mark.slow
def test_a_half_done_run_resumes_from_its_checkpoint(synthetic_config, tmp_path):
    run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=COMMON)
    longer = [*COMMON, "steps=4"]
    (run,) = run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=longer)
    assert run.trained and run.config.resume
    steps = [r["step"] for r in read_metrics(run.run_dir) if "train/loss" in r or "reward/train_mean" in r]
    assert steps == sorted(set(steps)) and max(steps) == 4  # continued, not restarted: no step twice
    assert json.loads((run.run_dir / "summary.json").read_text())["steps"] == 4


@pytest.mark.slow
def test_a_finished_run_with_other_settings_is_refused(synthetic_config, tmp_path):
    run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=COMMON)
    with pytest.raises(ConfigError, match=r"grpo\.lr: 0\.1 -> 0\.5"):
        run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=[*COMMON, "grpo.lr=0.5"])
    # nor is a trained run whose evaluation was interrupted evaluated under other settings
    with pytest.raises(ConfigError, match=r"grpo\.lr"):
        run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=[*COMMON, "grpo.lr=0.5"], evaluate=_final_reward)
    # where and how often it logs or checkpoints is not a setting of the result
    run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=[*COMMON, "logging.tensorboard=true"])


@pytest.mark.slow
def test_settings_a_run_never_read_or_that_postdate_it_do_not_refuse_it(synthetic_config, tmp_path):
    (real,) = run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=COMMON)
    # a real-mode run reads no fusion setting: another fusion method or its settings find it finished
    again = [*COMMON, "fusion.method=mse_weighted", "fusion.kwargs.window=7"]
    (same,) = run_arms(synthetic_config, ARMS[:1], [0], tmp_path, overrides=again)
    assert not same.trained
    (wmrl,) = run_arms(synthetic_config, ARMS[1:], [0], tmp_path, overrides=COMMON)
    with pytest.raises(ConfigError, match=r"fusion\.kwargs\.window: 60 -> 7"):  # a wmrl run reads them
        run_arms(synthetic_config, ARMS[1:], [0], tmp_path, overrides=again)
    # a setting added after the run was written is absent from its file: not compared, whatever its value now
    path = wmrl.run_dir / "config.yaml"
    path.write_text(path.read_text().replace("    rho2_quantile: 0.05\n", ""))
    (kept,) = run_arms(
        synthetic_config, ARMS[1:], [0], tmp_path, overrides=[*COMMON, "fusion.kwargs.rho2_quantile=0.2"]
    )
    assert not kept.trained and real.run_dir.exists()


def test_experiment_settings_are_written_once_and_then_refused_when_they_differ(tmp_path):
    check_settings(tmp_path, {"samples": 4, "tasks": [0, 1]})
    check_settings(tmp_path, {"samples": 4, "tasks": [0, 1]})
    with pytest.raises(ConfigError, match=r"samples: stored 4, now 8"):
        check_settings(tmp_path, {"samples": 8, "tasks": [0, 1]})


@pytest.mark.slow
def test_an_archived_run_is_restored_on_a_wiped_machine_and_not_trained_again(synthetic_config, tmp_path):
    archive, runs_dir = tmp_path / "archive", tmp_path / "runs"
    kw = dict(overrides=COMMON, evaluate=_final_reward, archive=archive, settings={"samples": 4})
    (first,) = run_arms(synthetic_config, ARMS[:1], [0], runs_dir, **kw)
    assert (archive / "real-seed0" / "record.json").is_file() and not (archive / "real-seed0" / "checkpoints").exists()
    shutil.rmtree(runs_dir)
    (again,) = run_arms(synthetic_config, ARMS[:1], [0], runs_dir, **kw)
    assert again.restored and not again.trained and again.record == first.record
    with pytest.raises(ConfigError, match="samples: stored 4, now 8"):
        run_arms(synthetic_config, ARMS[:1], [0], runs_dir, **{**kw, "settings": {"samples": 8}})


@pytest.mark.slow
def test_a_packed_half_done_run_resumes_on_a_wiped_machine_and_its_pack_goes_once_finished(
    synthetic_config, tmp_path, capsys
):
    archive, runs_dir = tmp_path / "archive", tmp_path / "runs"
    run_arms(synthetic_config, ARMS[:1], [0], runs_dir, overrides=COMMON)  # 2 steps trained, nothing evaluated
    (pack,) = pack_unfinished(runs_dir, archive)
    assert pack == archive / "partial" / "real-seed0.tar.gz"
    with tarfile.open(pack) as tar:
        assert "real-seed0/checkpoints/last.pt" in tar.getnames()
    shutil.rmtree(runs_dir)
    longer = dict(overrides=[*COMMON, "steps=4"], evaluate=_final_reward, archive=archive)
    (run,) = run_arms(synthetic_config, ARMS[:1], [0], runs_dir, **longer)
    assert "real-seed0: resuming the half-done run packed in" in capsys.readouterr().out
    assert run.trained and run.config.resume  # continued from step 2, not started again
    steps = [r["step"] for r in read_metrics(run.run_dir) if "reward/train_mean" in r]
    assert steps == sorted(set(steps)) and max(steps) == 4
    assert not pack.exists() and (archive / "real-seed0" / "record.json").is_file()  # finished: the pack is gone
    assert pack_unfinished(runs_dir, archive) == []  # nothing half-done is left to pack


def test_unpack_keeps_a_newer_run_folder_and_refuses_a_foreign_pack(tmp_path):
    archive, runs_dir = tmp_path / "archive", tmp_path / "runs"
    (runs_dir / "real-seed0").mkdir(parents=True)
    (runs_dir / "real-seed0" / "config.yaml").write_text("steps: 2\n")
    (runs_dir / "real-seed0" / "record.json").write_text("{}\n")
    (runs_dir / "wmrl-seed0").mkdir()
    (runs_dir / "wmrl-seed0" / "config.yaml").write_text("steps: 2\n")
    assert [p.name for p in pack_unfinished(runs_dir, archive)] == ["wmrl-seed0.tar.gz"]  # the evaluated one is done
    assert not unpack_unfinished(archive, runs_dir, "wmrl-seed0")  # a folder already there is the newer state
    shutil.rmtree(runs_dir / "wmrl-seed0")
    assert unpack_unfinished(archive, runs_dir, "wmrl-seed0") and (runs_dir / "wmrl-seed0" / "config.yaml").is_file()
    with tarfile.open(archive / "partial" / "real-seed1.tar.gz", "w:gz") as tar:
        tar.add(runs_dir / "wmrl-seed0", arcname="wmrl-seed0")  # a pack named for one arm-seed holding another
    with pytest.raises(ConfigError, match="not a pack of that arm-seed"):
        unpack_unfinished(archive, runs_dir, "real-seed1")


def test_an_untrained_arm_is_only_evaluated_and_report_only_returns_finished_runs(synthetic_config, tmp_path):
    arms = as_arms({"base": None, "real": ["mode=real"]})
    assert [a.train for a in arms] == [False, True]
    nothing = run_arms(synthetic_config, arms, [0], tmp_path, overrides=COMMON, evaluate=dict, report_only=True)
    assert nothing == []
    runs = run_arms(synthetic_config, arms[:1], [0], tmp_path, overrides=COMMON, evaluate=lambda run: {"n": 1})
    assert runs[0].record == {"n": 1} and not runs[0].trained and not (runs[0].run_dir / "summary.json").exists()
    done = run_arms(synthetic_config, arms, [0], tmp_path, overrides=COMMON, evaluate=lambda run: {}, report_only=True)
    assert [r.arm.name for r in done] == ["base"]


def test_bad_arms_are_refused():
    with pytest.raises(ConfigError, match="unique"):
        as_arms([Arm("a"), Arm("a")])
    with pytest.raises(ConfigError, match="non-empty name"):
        Arm("x/y")

"""The bookkeeping of ``wmrl experiment libero-transfer`` (no simulator needed): ``--archive`` keeps
finished arm-seeds across wiped machines, never archives unfinished ones and never pools two
experiments; archives in the per-split format are read; long evaluations print their progress."""

import argparse
import json
from pathlib import Path

import pytest

from experiments.libero_transfer import transfer
from wmrl_core.errors import ConfigError
from wmrl_core.experiments.runner import Arm, check_settings, run_arms


def _finished_run(run_dir: Path) -> Path:
    """An arm-seed folder as the experiment leaves it, in the per-split format."""
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "step_12.pt").write_bytes(b"weights")
    (run_dir / "summary.json").write_text(json.dumps({"steps": 12}))
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    (run_dir / "train_cpu_s.txt").write_text("3.5\n")
    for split, k in (("train", 11), ("heldout", 7)):
        (run_dir / f"eval_{split}.json").write_text(json.dumps({"successes": k, "episodes": 20}))
    return run_dir


def _base_arm(tmp_path: Path, runs: Path, archive: Path, evaluated: list) -> list:
    """The ``base`` arm (evaluated, not trained) of seed 0 through the runner as the experiment
    calls it; ``evaluated`` collects the arm-seeds it evaluates."""

    def evaluate(run):
        evaluated.append(run.name)
        for split, k in (("train", 11), ("heldout", 7)):
            (run.run_dir / f"eval_{split}.json").write_text(json.dumps({"successes": k, "episodes": 20}))
        return {"eval": {"train": {"successes": 11}, "heldout": {"successes": 7}}}

    config = tmp_path / "base.yaml"
    config.write_text("mode: real\nsteps: 12\nenvironment: {name: synthetic-bandit}\npolicy: {name: tabular-softmax}\n")
    return run_arms(
        config,
        [Arm("base", train=False)],
        seeds=[0],
        runs_dir=runs,
        evaluate=evaluate,
        archive=archive,
        archive_files=(*transfer.EVALUATION_FILES, "train_cpu_s.txt"),
    )


def test_a_finished_run_is_archived_without_checkpoints_and_restored(tmp_path):
    evaluated: list[str] = []
    (run,) = _base_arm(tmp_path, tmp_path / "runs", tmp_path / "archive", evaluated)
    assert evaluated == ["base-seed0"] and not run.restored
    archived = tmp_path / "archive" / "base-seed0"
    assert sorted(p.name for p in archived.iterdir()) == [
        "eval_heldout.json",
        "eval_train.json",
        "record.json",
        "runner.json",
    ]
    # a wiped machine: the run folder is gone, the archive restores it and nothing is evaluated again
    (again,) = _base_arm(tmp_path, tmp_path / "wiped", tmp_path / "archive", evaluated)
    assert again.restored and evaluated == ["base-seed0"]
    assert json.loads((tmp_path / "wiped" / "base-seed0" / "eval_heldout.json").read_text())["successes"] == 7
    assert not (tmp_path / "wiped" / "base-seed0" / "checkpoints").exists()


def test_per_split_results_count_as_finished_and_keep_their_cpu_seconds(tmp_path):
    run = _finished_run(tmp_path / "archive" / "real-seed0")
    unfinished = _finished_run(tmp_path / "archive" / "wmrl-progress-seed1")
    (unfinished / "eval_heldout.json").unlink()
    (tmp_path / "archive" / "notes").mkdir()  # not an arm-seed: left alone
    transfer.adopt_per_split_results(tmp_path / "archive")
    assert json.loads((run / "record.json").read_text()) == {
        "eval": {"train": {"successes": 11, "episodes": 20}, "heldout": {"successes": 7, "episodes": 20}}
    }
    assert json.loads((run / "runner.json").read_text()) == {
        "arm": "real",
        "seed": 0,
        "overrides": ["mode=real"],
        "train_cpu_s": 3.5,
    }
    assert not (unfinished / "record.json").exists()  # an unfinished arm-seed is not made finished
    assert sorted(p.name for p in (tmp_path / "archive" / "notes").iterdir()) == []
    transfer.adopt_per_split_results(tmp_path / "missing")  # no folder: nothing to do


def test_an_unfinished_run_is_not_archived_nor_overwritten(tmp_path):
    runs, archive = tmp_path / "runs", tmp_path / "archive"
    (runs / "base-seed0" / "checkpoints").mkdir(parents=True)
    (runs / "base-seed0" / "checkpoints" / "last.pt").write_bytes(b"weights")
    _base_arm(tmp_path, tmp_path / "elsewhere", archive, [])  # a finished copy in the archive
    with pytest.raises(ConfigError, match="unfinished run"):
        _base_arm(tmp_path, runs, archive, [])  # its checkpoint would silently lose to the archived copy
    assert not (runs / "base-seed0" / "record.json").exists()


def test_an_archive_refuses_another_experiments_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # paths inside the working directory are stored relative to it
    args = argparse.Namespace(
        base=str(tmp_path / "plugins/libero/checkpoints/small_vla_dagger_t0-9_h1024.pt"),
        wm=str(tmp_path / "plugins/libero/checkpoints/libero_wm_t0-9.pt"),
        config="configs/libero/libero_long.yaml",
        suite="libero_10",
        tasks=[0, 1],
        train_init=[0, 1],
        heldout_init=[40, 41],
        rollouts=2,
        steps=0,
        max_episode_steps=520,
        quick=False,
        user_override=[],
    )
    settings = transfer.experiment_settings(args)
    assert settings["base"] == "plugins/libero/checkpoints/small_vla_dagger_t0-9_h1024.pt"  # portable
    assert settings["config"] == "configs/libero/libero_long.yaml"
    check_settings(tmp_path / "archive", settings)
    check_settings(tmp_path / "archive", settings)  # the same experiment: accepted
    args.rollouts = 4
    with pytest.raises(ConfigError, match="rollouts: stored 2, now 4"):
        check_settings(tmp_path / "archive", transfer.experiment_settings(args))


def test_evaluation_progress_prints_every_few_episodes_and_at_the_end(capsys):
    progress = transfer.EvaluationProgress("seed 0 real heldout", total=5, every=2)
    for success, status in ((True, "ok"), (False, "ok"), (True, "infrastructure_failure"), (True, "ok"), (False, "ok")):
        progress(argparse.Namespace(success=success, status=status))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "seed 0 real heldout: 2/5 episodes",
        "seed 0 real heldout: 4/5 episodes",
        "seed 0 real heldout: 5/5 episodes",
    ]
    assert lines[-1].split(", ")[1] == "2 successes"  # the crashed episode's flag is not a success

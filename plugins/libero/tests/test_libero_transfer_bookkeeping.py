"""The bookkeeping of ``benchmarks/libero_transfer.py`` (no simulator needed): ``--archive`` keeps
finished arm-seeds across wiped machines, never archives unfinished ones and never pools two
experiments; long evaluations print their progress."""

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "libero_transfer.py"


@pytest.fixture(scope="module")
def transfer():
    spec = importlib.util.spec_from_file_location("libero_transfer", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _finished_run(run_dir: Path) -> Path:
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "step_12.pt").write_bytes(b"weights")
    (run_dir / "summary.json").write_text(json.dumps({"steps": 12}))
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    for split, k in (("train", 11), ("heldout", 7)):
        (run_dir / f"eval_{split}.json").write_text(json.dumps({"successes": k, "episodes": 20}))
    return run_dir


def test_a_finished_run_is_archived_without_checkpoints_and_restored(transfer, tmp_path):
    run = _finished_run(tmp_path / "runs" / "real-seed0")
    archived = tmp_path / "archive" / "real-seed0"
    transfer.archive_run(run, archived)
    assert sorted(p.name for p in archived.iterdir()) == [
        "eval_heldout.json",
        "eval_train.json",
        "metrics.jsonl",
        "summary.json",
    ]
    fresh = tmp_path / "wiped" / "real-seed0"
    assert transfer.restore_run(archived, fresh)
    assert json.loads((fresh / "eval_heldout.json").read_text())["successes"] == 7
    assert transfer.is_finished(fresh) and not (fresh / "checkpoints").exists()
    assert not transfer.restore_run(archived, fresh)  # already there: nothing to do


def test_an_unfinished_run_is_not_archived_nor_overwritten(transfer, tmp_path):
    run = _finished_run(tmp_path / "runs" / "real-seed0")
    (run / "eval_heldout.json").unlink()
    with pytest.raises(ValueError, match="not evaluated yet"):
        transfer.archive_run(run, tmp_path / "archive" / "real-seed0")
    archived = _finished_run(tmp_path / "other" / "real-seed0")
    with pytest.raises(SystemExit, match="unfinished run"):
        transfer.restore_run(archived, run)  # its checkpoint would silently lose to the archived copy
    assert not transfer.restore_run(tmp_path / "nothing", tmp_path / "fresh")


def test_an_archive_refuses_another_experiments_settings(transfer, tmp_path):
    args = argparse.Namespace(
        base=str(ROOT / "plugins/libero/checkpoints/small_vla_dagger_t0-9_h1024.pt"),
        wm=str(ROOT / "plugins/libero/checkpoints/libero_wm_t0-9.pt"),
        config=str(ROOT / "configs/libero/libero_long.yaml"),
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
    transfer.check_archive_settings(tmp_path, settings)
    transfer.check_archive_settings(tmp_path, settings)  # the same experiment: accepted
    args.rollouts = 4
    with pytest.raises(SystemExit, match="rollouts: archived 2, now 4"):
        transfer.check_archive_settings(tmp_path, transfer.experiment_settings(args))


def test_evaluation_progress_prints_every_few_episodes_and_at_the_end(transfer, capsys):
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

"""``wmrl experiment equal-execution --quick``: every arm end to end in real containers, the
endpoints computed, and a second invocation that trains and evaluates nothing."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments.autoresearch_equal_execution import equal_execution as ee
from experiments.autoresearch_heldout_gain import heldout_gain as hg
from wmrl_core.components import make_components
from wmrl_core.plugins import build_registry

ROOT = Path(__file__).resolve().parents[3]  # the repository: `wmrl experiment` finds its studies there

COMMAND = [sys.executable, "-m", "wmrl_core.cli", "experiment", "equal-execution", "--quick"]


@pytest.mark.slow
def test_quick_runs_every_arm_and_resumes_without_work(docker_ready, tmp_path):
    paths = ["--runs", str(tmp_path / "runs"), "--archive", str(tmp_path / "archive"), "--out", str(tmp_path / "out")]
    proc = subprocess.run(
        [*COMMAND, *paths, "--override", "environment.kwargs.limits.timeout_s=60"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert list(summary["seeds_per_arm"]) == list(ee.ARMS)
    assert all(seeds == [0] for seeds in summary["seeds_per_arm"].values())
    for arm, curves in summary["curves"].items():  # equal steps: every arm kept and scored steps 0, 1, 2
        assert [p["step"] for p in curves["0"]] == [0, 1, 2], arm
    curves = summary["curves"]
    assert curves["real"]["0"][-1]["executions"] == 2 * 2 * 2  # B x G x steps
    assert curves["wmrl_rectified"]["0"][-1]["executions"] == 1 * 2 * 2  # one anchor group of 2 per step
    assert curves["world_model"]["0"][-1]["executions"] == 0
    assert "0" in summary["equal_execution"]["wmrl_rectified"]["per_seed"]
    assert summary["non_inferiority"]["non_inferior"] is None  # one seed: undecided, never a pass
    assert set(summary["minus_controls"]) == {
        f"{a} - {c}" for a in ee.ARMS if a.startswith("wmrl_") for c in ("anchors_only", "noise_control")
    }
    assert summary["w_corpus"]["executions"] > 0
    # compute from the ledgers' counts at declared cost ratios: real 8 generated + 8 executed; rectified
    # 8 generated, each scored by the world model (plus the anchors it learns from), 4 executed
    accounting = summary["accounting"]["arms"]
    assert "noise_control" not in accounting and ee.ANCHORS_ALONE in accounting
    assert accounting["real"]["10"]["per_seed"]["0"] == pytest.approx(1.0)
    assert accounting[ee.ANCHORS_ALONE]["10"]["per_seed"]["0"] == pytest.approx((8 + 80) / (4 + 40))
    assert 1.0 < accounting["wmrl_rectified"]["10"]["per_seed"]["0"] < (8 + 80) / (8 + 40)
    assert set(summary["live_ratio"]) == {a for a in ee.ARMS if a.startswith("wmrl_")}
    table = (tmp_path / "out" / "table.md").read_text()
    assert "## Accounting" in table and "## The fusion's live predicted ratio" in table
    assert (tmp_path / "out" / "equal_execution.png").stat().st_size > 0
    assert (tmp_path / "archive" / "real-seed0" / "eval_step001.json").is_file()
    assert "[arm-seed 8/8]" in proc.stdout
    # the second invocation finds everything finished: nothing trained, nothing evaluated
    again = subprocess.run([*COMMAND, *paths], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    summary2 = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary2["this_invocation"] == {"trained": 0, "evaluations": 0}
    assert summary2["curves"] == summary["curves"]
    for cache in ("eval_cache.jsonl", "train_cache.jsonl"):  # the caches travel with the archive
        assert (tmp_path / "archive" / "caches" / f"{cache}.gz").stat().st_size > 0
    # the evaluation's noise, measured: seed 0's initial policy again under fresh sampling noise
    check = subprocess.run([*COMMAND, *paths, "--noise-check"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stderr[-3000:]
    assert "[noise] seed 0: shared" in check.stdout and (tmp_path / "archive" / "noise_check" / "seed0.json").is_file()
    summary3 = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary3["this_invocation"] == {"trained": 0, "evaluations": 0}  # no arm trained or evaluated again
    noise = summary3["evaluation_noise"]
    assert noise["seeds"] == [0] and set(noise["per_seed"]) == {"0"}
    shared = json.loads((tmp_path / "runs" / "real-seed0" / "eval_step000.json").read_text())
    fresh = json.loads((tmp_path / "runs" / "noise_check" / "seed0.json").read_text())
    assert fresh["sampling_seed"] == ee.EVAL_SEED + ee.FRESH_NOISE != shared["sampling_seed"]
    assert "## The evaluation's noise, measured directly" in (tmp_path / "out" / "table.md").read_text()
    # what the check evaluates is the seed's initial policy: the weights of its step-0 checkpoint
    args = ee.eval_args(
        argparse.Namespace(
            config=tmp_path / "runs" / "config.yaml", uncached_seeds=set(), cache=None, samples=2, max_tasks=2
        ),
        0,
    )
    args.override = ["seed=0"]
    pm = hg.plugin_manager()
    rebuilt = make_components(hg.eval_config(args), build_registry(pm), pm).policy.state_dict()
    kept = torch.load(tmp_path / "runs" / "real-seed0" / "checkpoints" / "step_000000.pt", weights_only=False)["policy"]
    assert set(rebuilt) == set(kept) and all(torch.equal(rebuilt[k], kept[k]) for k in kept)


def test_caches_round_trip_through_the_archive_and_never_overwrite_a_newer_one(tmp_path):
    runs, archive = tmp_path / "runs", tmp_path / "archive"
    runs.mkdir()
    caches = [runs / "eval_cache.jsonl", runs / "train_cache.jsonl"]
    caches[0].write_text('{"key": "a"}\n{"key": "b"}\n')  # the train cache does not exist yet
    ee.archive_caches(archive, caches)
    assert ee.archived_cache(archive, caches[0]).is_file()
    assert not ee.archived_cache(archive, caches[1]).exists()

    fresh = tmp_path / "fresh"  # a later session's empty --runs
    fresh_caches = [fresh / c.name for c in caches]
    ee.restore_caches(archive, fresh_caches)
    assert fresh_caches[0].read_text() == caches[0].read_text()
    assert not fresh_caches[1].exists()

    fresh_caches[0].write_text('{"key": "newer"}\n')
    ee.restore_caches(archive, fresh_caches)  # a cache already in --runs is kept
    assert fresh_caches[0].read_text() == '{"key": "newer"}\n'
    ee.restore_caches(None, fresh_caches)  # no archive: nothing to do


def test_pack_partial_packs_the_half_done_arm_seeds_and_the_caches(tmp_path, capsys):
    runs, archive = tmp_path / "runs", tmp_path / "archive"
    (runs / "real-seed1" / "checkpoints").mkdir(parents=True)
    (runs / "real-seed1" / "config.yaml").write_text("steps: 32\n")
    (runs / "real-seed1" / "checkpoints" / "last.pt").write_bytes(b"state")
    (runs / "eval_cache.jsonl").write_text('{"key": "a"}\n')
    assert ee.main(["--runs", str(runs), "--archive", str(archive), "--pack-partial"]) == 0
    assert (archive / "partial" / "real-seed1.tar.gz").stat().st_size > 0
    assert ee.archived_cache(archive, runs / "eval_cache.jsonl").is_file()
    assert "1 half-done arm-seed(s)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        ee.main(["--runs", str(runs), "--pack-partial"])
    assert "--pack-partial needs --archive" in capsys.readouterr().err


def test_the_frozen_config_travels_with_the_archive(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "config.yaml").write_text("steps: 7\n")
    resumed = argparse.Namespace(runs=tmp_path / "runs", archive=archive, config=ee.CONFIG, override=[])
    assert ee.freeze_config(resumed).read_text() == "steps: 7\n"  # an empty --runs starts from the archive's copy
    first = argparse.Namespace(runs=tmp_path / "new", archive=tmp_path / "kept", config=ee.CONFIG, override=["steps=3"])
    frozen = ee.freeze_config(first)
    assert "steps: 3" in frozen.read_text() and (tmp_path / "kept" / "config.yaml").read_text() == frozen.read_text()

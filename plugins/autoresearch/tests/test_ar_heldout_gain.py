"""``wmrl experiment heldout-gain``: the noise arm's pieces, the paired bootstrap, and a tiny run
end to end in real containers."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.autoresearch_heldout_gain import heldout_gain as hg
from wmrl_core.experiments.noise import NoiseReward
from wmrl_core.experiments.stats import paired_bootstrap_se
from wmrl_core.types import Outcome

ROOT = Path(__file__).resolve().parents[3]  # the repository: `wmrl experiment` finds its studies there

COMMAND = [sys.executable, "-m", "wmrl_core.cli", "experiment", "heldout-gain"]


def test_noise_reward_ignores_the_outcome_and_is_reproducible():
    a, b = NoiseReward(seed=3), NoiseReward(seed=3)
    good, bad = Outcome("ok", 0.99), Outcome("crashed", None)
    draws_a = [a(None, good if i % 2 else bad) for i in range(200)]
    draws_b = [b(None, bad) for _ in range(200)]
    assert draws_a == draws_b  # the same draws whatever the outcomes
    assert 0.0 <= min(draws_a) and max(draws_a) < 1.0 and np.std(draws_a) > 0.2
    assert NoiseReward(seed=4)(None, good) != draws_a[0]


def test_unexecuted_environment_has_the_pool_and_runs_nothing():
    env = hg.unexecuted_environment(task_sets=["autoresearch-pool"])
    tasks = env.tasks("train")[:3]
    outcomes = env.execute(tasks, ["raise SystemExit(1)"] * 3)
    assert [(o.status, o.info["cost_s"]) for o in outcomes] == [("ok", 0.0)] * 3
    assert env._pool is None  # no sandbox was ever started


def test_reward_matrix_places_each_record_and_leaves_unrewarded_ones_nan():
    evaluation = {
        "samples_per_task": 2,
        "records": [
            {"task": "b", "sample": 1, "reward": 0.5},
            {"task": "a", "sample": 0, "reward": -1.0},
            {"task": "a", "sample": 1, "reward": None},
            {"task": "b", "sample": 0, "reward": 0.25},
        ],
    }
    tasks, m = hg.reward_matrix(evaluation)
    assert tasks == ["a", "b"]
    np.testing.assert_array_equal(m, [[-1.0, np.nan], [0.25, 0.5]])


def test_paired_bootstrap_cancels_what_two_evaluations_share():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(30, 4))
    assert paired_bootstrap_se([m, m + 0.3], [1.0, -1.0]) == pytest.approx(0.0, abs=1e-12)  # paired: only the shift
    unpaired = paired_bootstrap_se([m], [1.0])
    assert unpaired == pytest.approx(np.sqrt(np.mean(m.var(axis=1, ddof=0)) / m.size), rel=0.15)


def test_bootstrap_with_one_sample_per_task_resamples_tasks():
    rng = np.random.default_rng(1)
    m = rng.normal(size=(200, 1))
    assert paired_bootstrap_se([m], [1.0]) == pytest.approx(m.std() / np.sqrt(m.size), rel=0.15)


def test_a_tiny_benchmark_runs_both_arms_end_to_end(docker_ready, tmp_path):
    proc = subprocess.run(
        [
            *COMMAND,
            "--seeds",
            "0-0",
            "--samples",
            "2",
            "--max-tasks",
            "2",
            "--runs",
            str(tmp_path / "runs"),
            "--out",
            str(tmp_path / "out"),
            "--override",
            "steps=2",
            "rollout.batch_tasks=2",
            "rollout.group_size=2",
            "environment.kwargs.limits.timeout_s=60",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "heldout_gain.json").read_text())
    assert result["before"]["programs"] == 4
    (row,) = result["seeds"]
    assert row["after_wmrl"]["programs"] == row["after_noise"]["programs"] == 4
    assert np.isfinite(row["difference"]) and row["difference_se"] >= 0
    assert row["train"]["wmrl"]["executions"] == 2 * 1 * 2  # one anchor group of 2 per step, executed
    assert (tmp_path / "out" / "heldout_gain.png").stat().st_size > 0
    assert "| 0 |" in (tmp_path / "out" / "heldout_gain_table.md").read_text()
    # resuming reads everything back: no training, no execution
    again = subprocess.run(
        [*COMMAND, "--seeds", "0-0", "--samples", "2", "--max-tasks", "2"]
        + ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out2")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "[train]" not in again.stdout and "[eval]" not in again.stdout
    assert json.loads((tmp_path / "out2" / "heldout_gain.json").read_text())["seeds"] == json.loads(
        json.dumps(result["seeds"])
    )
    # resuming with another evaluation size would mix two settings in one result: refused before anything runs
    other = subprocess.run(
        [*COMMAND, "--seeds", "0-0", "--samples", "3", "--max-tasks", "2"]
        + ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out3")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert other.returncode == 2 and "samples_per_task: stored 2, now 3" in other.stderr
    assert "[eval]" not in other.stdout and not (tmp_path / "out3").exists()

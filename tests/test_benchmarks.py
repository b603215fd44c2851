"""The compute-to-target benchmark runs every arm end to end on its quick setting."""

import json
import math
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each test runs every benchmark arm end to end in a subprocess

COMMAND = [sys.executable, "-m", "wmrl_core.cli", "experiment", "compute-to-target"]


def test_synthetic_quick_benchmark_writes_table_json_and_plots(tmp_path):
    # one seed: the same report over two seeds is tests/test_theorem.py's
    proc = subprocess.run(
        [*COMMAND, "--suite", "synthetic", "--quick", "--seeds", "0-0", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["arms"]) == {
        "real",
        "world_model",
        "wmrl",
        "wmrl_inverse_variance",
        "wmrl_no_debias",
        "wmrl_no_denoise",
    }
    assert summary["arms"]["world_model"]["final_mean"] < summary["target"]
    for name in ("table.md", "reward_vs_compute.png", "calibration.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert "| wmrl |" in (tmp_path / "table.md").read_text()
    assert "execution cache: off" in (tmp_path / "table.md").read_text()


def test_the_benchmark_says_when_the_execution_cache_is_on(tmp_path):
    cache = tmp_path / "executions.jsonl"
    proc = subprocess.run(
        [
            *COMMAND,
            "--suite",
            "synthetic",
            "--quick",
            "--seeds",
            "0-0",
            "--arms",
            "real",
            "wmrl",
            "--cache",
            str(cache),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"execution cache: on ({cache})" in proc.stdout
    assert f"execution cache: on ({cache})" in (tmp_path / "out" / "table.md").read_text()
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["execution_cache"] == str(cache)
    assert len(cache.read_text().splitlines()) > 0
    records = [
        json.loads(line)
        for line in (tmp_path / "out" / "runs" / "wmrl-seed0" / "metrics.jsonl").read_text().splitlines()
    ]
    assert all("execution/replayed" in r for r in records if r["step"] > 0)


def test_synthetic_quick_sweep(tmp_path):
    proc = subprocess.run(
        [
            *COMMAND,
            "--suite",
            "synthetic",
            "--sweep",
            "--quick",
            "--seeds",
            "0-0",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert len(sweep["measured"]) == len(sweep["cost_ratios"]) == 3
    # the ideal ratio grows with the execution/generation cost ratio
    ideal = [row[0] for row in sweep["ideal"]]
    assert ideal == sorted(ideal) and ideal[0] < ideal[-1]
    # every cell measured (wmrl reaches real's final reward on this seed), and the measured ratio at the
    # smallest anchor fraction grows with the cost ratio too
    measured = [row[0] for row in sweep["measured"]]
    assert all(math.isfinite(v) for row in sweep["measured"] for v in row), sweep["measured"]
    assert measured == sorted(measured) and measured[0] < measured[-1]
    assert "not reached" not in (tmp_path / "sweep.md").read_text()
    assert (tmp_path / "sweep.png").stat().st_size > 0

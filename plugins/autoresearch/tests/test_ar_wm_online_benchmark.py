"""The offline benchmark of the program world model's anchor updates runs on its quick setting."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]  # the repository: `wmrl experiment` finds its studies there


@pytest.mark.slow  # a subprocess that imports torch and sklearn
def test_quick_benchmark_prints_the_table_and_starts_from_the_prior(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "wmrl_core.cli", "experiment", "wm-online-update", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| task-fold | 8 | 8 |" in proc.stdout
    results = json.loads((tmp_path / "summary.json").read_text())["results"]
    assert [r["groups"] for r in results] == [0, 4, 8]
    assert results[0]["updated_rho"] == results[0]["prior_rho"]  # nothing learned yet: the prior itself
    assert results[2]["seen_per_task"] > 0 and results[2]["updated_rho"] != results[2]["prior_rho"]

"""The sandbox load test (``wmrl experiment sandbox-load``), quick mode, against the real engine."""

import json
import subprocess
import sys

import pytest


@pytest.mark.serial  # counts every container and process on the machine
@pytest.mark.slow
def test_ar_load_test_quick_records_every_outcome_once_and_leaves_nothing(docker_ready, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "wmrl_core.cli", "experiment", "sandbox-load", "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["executions"] == s["outcomes_recorded"] == 24 and s["recorded_exactly_once"]
    assert s["containers_left"] == 0 and s["processes_left"] == 0
    assert s["after"]["session_dir_bytes"] == 0  # the pool's host directories are gone
    kinds = s["statuses_by_kind"]
    assert kinds["good"] == {"ok": 18} and kinds["crash"] == {"crashed": 2} and kinds["timeout"] == {"timeout": 2}, s[
        "unexpected_records"
    ]
    assert s["flood_logs_truncated"] and set(kinds["flood"]) <= {"ok", "timeout"}
    assert s["executions_per_minute"] > 0 and "executions per minute" in proc.stdout

"""The AutoResearch suite of the compute-to-target benchmark, quick setting, real containers."""

import json
import subprocess
import sys


def test_autoresearch_quick_benchmark_runs_each_arm_with_the_cache(docker_ready, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wmrl_core.cli",
            "experiment",
            "compute-to-target",
            "--suite",
            "autoresearch",
            "--quick",
            "--seeds",
            "0-0",
            "--out",
            str(tmp_path),
            "--cache",
            str(tmp_path / "executions.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    # the cache is on (as CI runs it) and said so; every arm's real executions were recorded for replay
    assert summary["execution_cache"] == str(tmp_path / "executions.jsonl")
    assert "execution cache: on" in (tmp_path / "table.md").read_text()
    assert len((tmp_path / "executions.jsonl").read_text().splitlines()) > 0
    arms = summary["arms"]
    assert set(arms) == {
        "real",
        "world_model",
        "wmrl",
        "wmrl_inverse_variance",
        "wmrl_shrinkage",
        "wmrl_no_debias",
        "wmrl_no_denoise",
        "noise_control",
    }
    assert arms["world_model"]["compute_execution_s"] == 0.0
    assert arms["noise_control"]["compute_execution_s"] == 0.0
    assert arms["real"]["compute_execution_s"] > 0 and arms["wmrl"]["compute_execution_s"] > 0
    for plot in ("reward_vs_compute.png", "reward_vs_compute_runs.png", "calibration.png"):
        assert (tmp_path / plot).stat().st_size > 0, plot
    # the world model's training corpus is priced at its recorded costs (else the rate measured in this run)
    from wmrl_autoresearch.program.corpus import load_corpus

    corpus = summary["world_model_corpus"]
    assert corpus["executions"] == len(load_corpus()) and corpus["cost_s"] > 0
    assert "World model corpus (one-off" in (tmp_path / "table.md").read_text()
    # every evaluation logged its own standard error, and the table says what it was
    assert summary["evaluation_se"]["evaluations"] > 0 and summary["evaluation_se"]["mean"] >= 0
    assert "Evaluation noise" in (tmp_path / "table.md").read_text()

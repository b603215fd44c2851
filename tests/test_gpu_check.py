"""The GPU checks: what they run, and that they refuse clearly where there is no GPU.

The checks themselves need an NVIDIA GPU; CI machines have none, so `.ci/run` calls the launcher
`benchmarks/gpu_check.py` only where `nvidia-smi -L` lists one. These tests pin its contract on
every machine."""

import subprocess
import sys

import pytest

from benchmarks import gpu_check


def test_every_listed_check_has_a_runner_and_every_entry_point_resolves():
    assert set(gpu_check.RUNNERS) == set(gpu_check.CHECKS)
    assert {"vllm_generate", "weight_sync", "llm_world_model", "libero_egl"} <= set(gpu_check.CHECKS)
    for name, runner in gpu_check.RUNNERS.items():  # the plugins' checks import without a GPU
        assert callable(gpu_check.resolve(runner)), name


def test_an_entry_point_that_does_not_import_fails_only_its_check(monkeypatch, capsys):
    monkeypatch.setitem(gpu_check.RUNNERS, "libero_egl", "wmrl_not_installed.gpu_checks:check")
    monkeypatch.setitem(gpu_check.RUNNERS, "cuda", lambda ctx: {"tflops": 1.0})
    results = gpu_check.run_checks(["libero_egl", "cuda"])
    assert [(r.name, r.ok) for r in results] == [("libero_egl", False), ("cuda", True)]
    assert "ModuleNotFoundError" in results[0].error and "wmrl_not_installed" in results[0].error


def test_without_a_gpu_nothing_runs_and_the_exit_status_says_so(monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "gpu_available", lambda: (False, "torch sees no CUDA device"))
    ran = []
    monkeypatch.setattr(gpu_check, "run_checks", lambda names: ran.append(names) or [])
    assert gpu_check.main([]) == 2
    assert ran == []
    err = capsys.readouterr().err
    assert "no NVIDIA GPU" in err and "pip install vllm" in err


def test_a_failing_check_is_reported_and_the_others_still_run(monkeypatch, capsys):
    def broken(ctx):
        raise RuntimeError("engine exploded")

    closed = []
    monkeypatch.setitem(gpu_check.RUNNERS, "cuda", broken)
    monkeypatch.setitem(
        gpu_check.RUNNERS, "libero_egl", lambda ctx: ctx.setdefault("close", []).append(lambda: closed.append(1)) or {}
    )
    results = gpu_check.run_checks(["cuda", "libero_egl"])
    assert [(r.name, r.ok) for r in results] == [("cuda", False), ("libero_egl", True)]
    assert "engine exploded" in results[0].error
    assert "FAILED cuda" in capsys.readouterr().out
    assert closed == [1]  # what a check opened for the others is closed once, at the end


@pytest.mark.slow  # a subprocess that imports torch
def test_the_launcher_rejects_unknown_check_names_with_the_known_ones():
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--only", "tpu"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=gpu_check.CHECKOUT,
    )
    assert proc.returncode == 2
    assert "invalid choice: 'tpu'" in proc.stderr and "weight_sync" in proc.stderr


@pytest.mark.slow  # two interpreters that import torch
def test_each_check_runs_in_its_own_process_and_reports_one_json_line(capsys):
    results = gpu_check.run_checks(["cuda", "cuda"], isolated=True)
    assert [(r.name, r.ok) for r in results] == [("cuda", False), ("cuda", False)]  # no GPU here: each fails alone
    assert all(r.error and ("CUDA" in r.error or "cuda" in r.error) for r in results), results
    out = capsys.readouterr().out
    assert out.count("FAILED cuda") == 2

"""The GPU check script: what it runs, and that it refuses clearly where there is no GPU.

The checks themselves need an NVIDIA GPU; CI machines have none, so `.ci/run` calls the script
only where `nvidia-smi -L` lists one. These tests pin its contract on every machine."""

import importlib.util
import subprocess
import sys
from pathlib import Path


SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_listed_check_has_a_runner():
    gpu_check = _load()
    assert set(gpu_check.RUNNERS) == set(gpu_check.CHECKS)
    assert {"vllm_generate", "weight_sync", "llm_world_model", "libero_egl"} <= set(gpu_check.CHECKS)


def test_without_a_gpu_nothing_runs_and_the_exit_status_says_so(monkeypatch, capsys):
    gpu_check = _load()
    monkeypatch.setattr(gpu_check, "gpu_available", lambda: (False, "torch sees no CUDA device"))
    ran = []
    monkeypatch.setattr(gpu_check, "run_checks", lambda names: ran.append(names) or [])
    assert gpu_check.main([]) == 2
    assert ran == []
    err = capsys.readouterr().err
    assert "no NVIDIA GPU" in err and "pip install vllm" in err


def test_a_failing_check_is_reported_and_the_others_still_run(monkeypatch, capsys):
    gpu_check = _load()

    def broken(ctx):
        raise RuntimeError("engine exploded")

    monkeypatch.setitem(gpu_check.RUNNERS, "cuda", broken)
    monkeypatch.setitem(gpu_check.RUNNERS, "libero_egl", lambda ctx: {"frames_per_s": 1.0})
    results = gpu_check.run_checks(["cuda", "libero_egl"])
    assert [(r.name, r.ok) for r in results] == [("cuda", False), ("libero_egl", True)]
    assert "engine exploded" in results[0].error
    assert "FAILED cuda" in capsys.readouterr().out


def test_unknown_check_names_are_rejected_with_the_known_ones():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--only", "tpu"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "invalid choice: 'tpu'" in proc.stderr and "weight_sync" in proc.stderr

"""The local-process fallback: never chosen silently, warns loudly, keeps timeouts and caps."""

from __future__ import annotations

import time

import pytest
from wmrl_autoresearch.environment import AutoResearchEnvironment
from wmrl_autoresearch.grading.outcomes import to_outcome
from wmrl_autoresearch.sandbox.docker_client import DockerUnavailableError
from wmrl_autoresearch.sandbox.pool import RunRequest, SandboxPool


@pytest.fixture
def local_pool(small_limits, tmp_path):
    with pytest.warns(UserWarning, match="NOT ISOLATED"):
        pool = SandboxPool(
            "local-unsafe", limits=small_limits.with_overrides(memory_mb=2048), max_parallel=2, workdir=tmp_path
        )
    yield pool
    pool.close()


def test_ar_docker_missing_is_an_error_not_a_silent_fallback(monkeypatch, tiny_classification):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    env = AutoResearchEnvironment(sandbox="docker", task_sets=[])
    with pytest.raises(DockerUnavailableError, match="local-unsafe"):
        env.execute([tiny_classification], ["print(1)"])
    env.close()


def test_ar_unknown_sandbox_is_rejected():
    with pytest.raises(ValueError, match="local-unsafe"):
        AutoResearchEnvironment(sandbox="subprocess", task_sets=[])


def test_ar_local_fallback_grades_a_solution(local_pool, tiny_classification):
    script = (
        "import os\nwith open(os.path.join(os.environ['OUTPUT_DIR'], 'predictions.csv'), 'w') as f:\n"
        f"    f.write('prediction\\n' + '1\\n' * {tiny_classification.n_test})\n"
    )
    outcome = to_outcome(tiny_classification, local_pool.run(RunRequest(tiny_classification, script)))
    assert outcome.status == "ok" and outcome.info["backend"] == "local-unsafe"
    assert "not isolated" in " ".join(outcome.info["notes"])


def test_ar_local_fallback_kills_at_timeout_with_children(local_pool, tiny_classification, small_limits):
    script = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "while True: pass\n"
    )
    t0 = time.perf_counter()
    ex = local_pool.run(RunRequest(tiny_classification, script, small_limits.with_overrides(timeout_s=1.5)))
    assert ex.timed_out and to_outcome(tiny_classification, ex).status == "timeout"
    assert 1.5 < ex.resources["cpu_s"] < 3.5  # RLIMIT_CPU: SIGXCPU at 2 s (whole seconds), SIGKILL at 3 s
    assert time.perf_counter() - t0 < 120  # killed by CPU time, however loaded the host


def test_ar_local_fallback_caps_output(local_pool, tiny_classification, small_limits):
    ex = local_pool.run(RunRequest(tiny_classification, "print('z' * 1_000_000)"))
    assert ex.stdout_bytes > 1_000_000 and ex.logs_truncated
    assert len(ex.stdout) < small_limits.log_bytes + 200


def test_ar_local_fallback_crash_and_syntax_error(local_pool, tiny_classification):
    executions = local_pool.run_many(
        [RunRequest(tiny_classification, "def f(:"), RunRequest(tiny_classification, "import sys; sys.exit(3)")]
    )
    assert [to_outcome(tiny_classification, ex).status for ex in executions] == ["crashed", "crashed"]
    assert "SyntaxError" in executions[0].stderr and executions[1].exit_code == 3

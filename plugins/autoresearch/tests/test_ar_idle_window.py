"""The idle window: a script that stops using CPU (sleeping, deadlocked) ends as ``timeout`` after
``SandboxLimits.idle_window_s`` seconds under 1 % of a core, not at the wall-clock safety net, so a
batch of hanging scripts does not hold the pool's sandboxes for ten times their CPU budget."""

from __future__ import annotations

import time

import pytest
from wmrl_autoresearch.grading.outcomes import to_outcome
from wmrl_autoresearch.sandbox.cpu_meter import IDLE_WINDOW_CPU_FRACTION, CpuWatch
from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.sandbox.pool import RunRequest


def test_ar_idle_window_verdict_by_hand():
    # 0.5 CPU-s/s for 10 s (5 CPU-s), then 0.001 CPU-s/s. With a 30 s window the rate over
    # [9, 39] is (5.029 - 4.5) / 30 = 0.0176 >= 0.01: still running; over [10, 40] it is
    # (5.030 - 5.0) / 30 = 0.001 < 0.01: idle, at t = 40, long before the 150 s safety net.
    watch = CpuWatch(cpu_limit_s=15.0, wall_limit_s=150.0, start_cpu_s=0.0, idle_window_s=30.0)

    def cpu(t: int) -> float:
        return 0.5 * t if t <= 10 else 5.0 + 0.001 * (t - 10)

    verdicts = {t: watch.observe(t, cpu(t)) for t in range(1, 41)}
    assert [t for t, v in verdicts.items() if v is not None] == [40] and verdicts[40] == "idle"
    assert watch.window_cpu_rate(30.0) == pytest.approx(0.001)
    reason = watch.reason("idle")
    assert reason.startswith("idle:") and "sleeping or deadlocked" in reason
    assert "idle_window_s=30" in reason and "150 s wall-clock safety net" in reason
    # a script that computes is never idle, and without a window only the wall limit judges
    busy = CpuWatch(cpu_limit_s=100.0, wall_limit_s=150.0, start_cpu_s=0.0, idle_window_s=30.0)
    assert all(busy.observe(t, 0.9 * t) is None for t in range(1, 100))
    plain = CpuWatch(cpu_limit_s=15.0, wall_limit_s=150.0, start_cpu_s=0.0)
    assert all(plain.observe(t, cpu(t)) is None for t in range(1, 100))
    assert IDLE_WINDOW_CPU_FRACTION == 0.01


def test_ar_idle_window_is_a_limit():
    assert SandboxLimits().idle_window_s == 30.0
    assert SandboxLimits(idle_window_s=None).idle_window_s is None
    with pytest.raises(ValueError, match="idle_window_s must be >= 0"):
        SandboxLimits(idle_window_s=-1.0)


@pytest.mark.slow
def test_ar_sleeping_script_ends_at_the_idle_window_not_the_safety_net(pool, tiny_classification, small_limits):
    limits = small_limits.with_overrides(timeout_s=15.0, idle_window_s=4.0)
    assert limits.wall_limit_s == 150.0
    start = time.monotonic()
    outcome = to_outcome(
        tiny_classification, pool.run(RunRequest(tiny_classification, "import time\ntime.sleep(10**6)\n", limits))
    )
    elapsed = time.monotonic() - start
    assert outcome.status == "timeout"
    assert outcome.info["error"].startswith("idle") and "idle_window_s=4" in outcome.info["error"]
    assert outcome.info["resources"]["cpu_s"] < 0.5
    assert 4.0 <= outcome.info["runtime_s"] < 20.0, outcome.info["runtime_s"]
    assert elapsed < 60.0  # the container is back long before the 150 s safety net


@pytest.mark.filterwarnings("ignore:wmrl-autoresearch. LocalProcessSandbox is NOT ISOLATED")
def test_ar_local_fallback_has_the_idle_window_and_counts_the_scripts_children(
    tiny_classification, small_limits, tmp_path
):
    from wmrl_autoresearch.sandbox.pool import SandboxPool

    limits = small_limits.with_overrides(memory_mb=2048, timeout_s=15.0, idle_window_s=2.0)
    # the script waits on a child that computes: the session is busy, not idle (runs to its CPU limit)
    busy_child = (
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'import time\\nt = time.process_time()\\n"
        "while time.process_time() - t < 3: pass'])\n"
        "time = __import__('time')\ntime.sleep(10**6)\n"
    )
    with SandboxPool("local-unsafe", limits=limits, max_parallel=1, workdir=tmp_path) as pool:
        start = time.monotonic()
        sleeping = to_outcome(
            tiny_classification, pool.run(RunRequest(tiny_classification, "import time\ntime.sleep(10**6)\n", limits))
        )
        assert time.monotonic() - start < 20
        waiting = to_outcome(tiny_classification, pool.run(RunRequest(tiny_classification, busy_child, limits)))
    assert sleeping.status == "timeout" and sleeping.info["error"].startswith("idle")
    assert "idle_window_s=2" in sleeping.info["error"]
    # idle only once the child's 3 CPU-s are done: at least 3 s plus the 2 s window
    assert waiting.status == "timeout" and waiting.info["error"].startswith("idle")
    assert waiting.info["runtime_s"] >= 4.5, waiting.info["runtime_s"]

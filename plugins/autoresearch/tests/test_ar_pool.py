"""Parallel and warm execution with real containers, and exclusive GPU allocation."""

from __future__ import annotations

import threading
import time

import pytest
from wmrl_autoresearch.sandbox.docker_sandbox import DockerSandbox
from wmrl_autoresearch.sandbox.gpus import GpuPool, detect_nvidia_gpus
from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE
from wmrl_autoresearch.sandbox.pool import RunRequest, SandboxPool

TIMED = "import time\nstart = time.time()\ntime.sleep({sleep})\nprint(start, time.time())\n"


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


def test_ar_parallel_runs_are_bounded(pool, tiny_classification):
    executions = pool.run_many([RunRequest(tiny_classification, TIMED.format(sleep=1.0))] * 4)
    assert all(ex.exit_code == 0 for ex in executions), [ex.stderr for ex in executions]
    intervals = [tuple(float(v) for v in ex.stdout.split()) for ex in executions]
    assert _max_overlap(intervals) == pool.max_parallel == 2


def test_ar_run_many_keeps_request_order(pool, tiny_classification):
    scripts = [f"print({i})" for i in range(4)]
    executions = pool.run_many([RunRequest(tiny_classification, s) for s in scripts])
    assert [ex.stdout.strip() for ex in executions] == ["0", "1", "2", "3"]


def test_ar_container_never_runs_two_solutions(docker_client, pool, small_limits, tiny_classification):
    sandbox = DockerSandbox(docker_client, SANDBOX_IMAGE, small_limits, pool.workspace.new_slot(), lifetime_s=600)
    sandbox.start()
    try:
        first = sandbox.run(pool.task_dir(tiny_classification), "print('first')")
        assert first.exit_code == 0
        with pytest.raises(RuntimeError, match="never runs two"):
            sandbox.run(pool.task_dir(tiny_classification), "print('second')")
    finally:
        sandbox.remove()


def test_ar_warm_mode_starts_containers_ahead_and_uses_each_once(
    docker_ready, small_limits, tiny_classification, live_sandboxes
):
    with SandboxPool("docker", limits=small_limits, max_parallel=1, warm=1, gpus="none") as warm_pool:
        deadline = time.monotonic() + 20
        while warm_pool._warm.qsize() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert warm_pool._warm.qsize() == 1, "no container was started ahead of need"
        hostnames = set()
        for _ in range(2):
            while warm_pool._warm.qsize() < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            ex = warm_pool.run(
                RunRequest(tiny_classification, "import os; print(os.getpid(), open('/proc/self/cgroup').read())")
            )
            assert ex.warm is True and ex.exit_code == 0
            assert ex.startup_s < 0.1  # no container start on the critical path
            hostnames.add(ex.stdout)
        assert len(hostnames) == 2  # two different containers (cgroups differ)
        # a run whose limits differ from the pool's gets a cold container of its own
        ex = warm_pool.run(RunRequest(tiny_classification, "print('x')", small_limits.with_overrides(memory_mb=100)))
        assert ex.warm is False and ex.exit_code == 0
    time.sleep(0.5)
    assert live_sandboxes() == []  # close() removed the waiting warm container


def test_ar_cold_start_latency_is_recorded(pool, tiny_classification):
    ex = pool.run(RunRequest(tiny_classification, "print('ok')"))
    assert ex.warm is False
    assert 0.01 < ex.startup_s < 30


def test_ar_gpu_pool_gives_disjoint_devices_and_blocks_when_empty():
    gpus = GpuPool(["0", "1", "2", "3"], per_sandbox=2)
    a, b = gpus.acquire(), gpus.acquire()
    assert set(a).isdisjoint(b) and len(a) == len(b) == 2
    with pytest.raises(TimeoutError):
        gpus.acquire(timeout_s=0.1)
    got = []
    waiter = threading.Thread(target=lambda: got.append(gpus.acquire(timeout_s=5)))
    waiter.start()
    time.sleep(0.1)
    gpus.release(a)
    waiter.join(5)
    assert got and set(got[0]) == set(a)
    with pytest.raises(ValueError, match="released twice"):
        gpus.release(("9",))


def test_ar_cpu_only_pool_requests_no_devices():
    gpus = GpuPool([])
    assert not gpus.enabled and gpus.acquire() == ()


def test_ar_sandbox_with_gpus_requests_exactly_those_devices(tmp_path, small_limits):
    """The device request a GPU host would send (checked on the kwargs; no GPU is needed to build them)."""
    from wmrl_autoresearch.sandbox.workspace import Slot

    sandbox = DockerSandbox(
        None, SANDBOX_IMAGE, small_limits, Slot(tmp_path / "slot"), lifetime_s=60, gpu_ids=("1", "3")
    )
    (request,) = sandbox.create_kwargs()["device_requests"]
    assert request["DeviceIDs"] == ["1", "3"] and request["Capabilities"] == [["gpu"]]
    sandbox_cpu = DockerSandbox(None, SANDBOX_IMAGE, small_limits, Slot(tmp_path / "slot2"), lifetime_s=60)
    assert "device_requests" not in sandbox_cpu.create_kwargs()


def test_ar_gpus_are_exclusive_on_a_gpu_host(docker_ready, small_limits, tiny_classification):
    devices = detect_nvidia_gpus()
    if not devices:
        pytest.skip("no NVIDIA GPU on this host (the CPU-only path is covered by the other tests)")
    script = "import glob, time; print(sorted(glob.glob('/dev/nvidia[0-9]*'))); time.sleep(1)"
    with SandboxPool("docker", limits=small_limits, max_parallel=len(devices), gpus=devices) as gpu_pool:
        executions = gpu_pool.run_many([RunRequest(tiny_classification, script)] * len(devices))
    assert all(ex.exit_code == 0 for ex in executions), [ex.stderr for ex in executions]
    held = [tuple(ex.resources["gpu_ids"]) for ex in executions]
    assert len(set(held)) == len(devices)  # concurrent sandboxes held different GPUs
    assert all(ex.stdout.count("/dev/nvidia") == 1 for ex in executions)  # each sees only its own device


@pytest.mark.slow
def test_ar_bench_sandbox_reports_every_figure(docker_ready):
    from wmrl_autoresearch.experiments.sandbox_bench import bench_sandbox

    result = bench_sandbox(latency_runs=1, throughput_runs=2, parallel=2, sklearn_runs=2, repetitions=1)
    assert 0 < result.cold_startup_s < 30 and 0 <= result.warm_startup_s < result.cold_startup_s
    assert result.cold_end_to_end_s > 0 and result.warm_end_to_end_s > 0
    assert result.trivial_per_minute > 0 and result.trivial_per_minute_cold > 0
    assert [b["mode"] for b in result.sklearn] == ["cold", "warm"]
    for batch in result.sklearn:
        assert batch["statuses"] == {"ok": 2} and batch["per_minute"] > 0 and batch["preimported"] == 2
        assert 0 < batch["cpu_s"] < batch["container_cpu_s"]  # the container's CPU includes the pre-import
    assert result.sklearn[0]["warm"] == 0 and result.sklearn[1]["warm"] == 2
    assert "cold start-up latency" in result.summary() and "warm/cold throughput ratio" in result.summary()

"""Containers are removed even when the caller crashes or is interrupted (real containers).

A child Python process runs a pool with a long script; the test kills or interrupts the
child and checks what is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from wmrl_autoresearch.sandbox.orphans import LABEL_OWNER_PID, owner_labels, sweep_orphans

CHILD = textwrap.dedent("""
    import signal, sys
    # what a user at a terminal has, whatever the test runner's process passed down (a child
    # inherits ignored signals and the blocked-signal mask of the thread that started it)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    from wmrl_autoresearch.sandbox.limits import SandboxLimits
    from wmrl_autoresearch.sandbox.pool import RunRequest, SandboxPool
    from wmrl_autoresearch.tasks.task import AutoResearchTask
    task = AutoResearchTask.create(id="child", kind="regression", metric="rmse", split="train", columns=["a"],
                                   x_train=[[1.0], [2.0]], y_train=[1.0, 2.0], x_test=[[3.0], [4.0]], y_test=[3.0, 5.0])
    pool = SandboxPool("docker", limits=SandboxLimits(timeout_s=60, memory_mb=64, cpus=0.5), max_parallel=2,
                       warm=int(sys.argv[1]), gpus="none")
    print("READY", flush=True)
    pool.run_many([RunRequest(task, "import time; time.sleep(120)")] * 2)
""")


def _start_child(warm: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", CHILD, str(warm)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "READY", proc.stderr.read()
    return proc


def _owned_by(client, pid: int) -> list:
    return client.containers.list(all=True, ignore_removed=True, filters={"label": f"{LABEL_OWNER_PID}={pid}"})


def _wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


@pytest.mark.serial  # another process's pool start could sweep these orphans first
def test_ar_sigkilled_caller_leaves_orphans_that_are_swept(docker_client):
    proc = _start_child(warm=1)
    try:
        assert _wait_for(lambda: len(_owned_by(docker_client, proc.pid)) >= 2, 30), "child never started sandboxes"
    finally:
        proc.kill()  # SIGKILL: no finally, no atexit
        proc.wait()
    orphans = _owned_by(docker_client, proc.pid)
    assert orphans, "SIGKILL gives no chance to clean up: the containers should still exist here"
    removed = sweep_orphans(docker_client)
    assert {c.name for c in orphans} <= set(removed)
    assert _wait_for(lambda: not _owned_by(docker_client, proc.pid), 10)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ar_interrupted_caller_removes_its_containers(docker_client, sig):
    proc = _start_child(warm=1)
    try:
        assert _wait_for(lambda: len(_owned_by(docker_client, proc.pid)) >= 2, 30), "child never started sandboxes"
        proc.send_signal(sig)
        # SandboxPool.close() removes every live sandbox, then waits up to 10 s for the warming
        # thread and 30 s for the reaper: on a loaded host the interrupted caller may take that long
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # name where it hangs: faulthandler dumps every thread on SIGABRT
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"the child did not exit within 60 s of {sig.name}; its threads:\n{err[-6000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _wait_for(lambda: not _owned_by(docker_client, proc.pid), 10), "interrupted caller left containers behind"


def test_ar_sweep_keeps_containers_of_live_owners(docker_client, pool, small_limits):
    from wmrl_autoresearch.sandbox.docker_sandbox import DockerSandbox
    from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE

    sandbox = DockerSandbox(docker_client, SANDBOX_IMAGE, small_limits, pool.workspace.new_slot(), lifetime_s=60)
    sandbox.start()
    try:
        assert sandbox.name not in sweep_orphans(docker_client)  # this process is alive
        assert docker_client.containers.get(sandbox.name).status == "running"
    finally:
        sandbox.remove()


def test_ar_orphan_dies_by_itself_after_its_lifetime(docker_client, pool, small_limits):
    """The last line of defence: a container nobody removes exits after lifetime_s and auto-removes."""
    from wmrl_autoresearch.sandbox.docker_sandbox import DockerSandbox
    from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE

    sandbox = DockerSandbox(docker_client, SANDBOX_IMAGE, small_limits, pool.workspace.new_slot(), lifetime_s=2)
    sandbox.start()
    try:
        assert _wait_for(
            lambda: not docker_client.containers.list(all=True, ignore_removed=True, filters={"name": sandbox.name}), 15
        )
    finally:
        sandbox.remove()


def test_ar_owner_labels_identify_this_process():
    labels = owner_labels(60)
    assert labels[LABEL_OWNER_PID] == str(os.getpid())
    assert int(labels["org.wmrl.autoresearch.deadline"]) > time.time()

"""Fixtures of the AutoResearch tests.

Tests that run containers use the ``pool`` fixture (or ``docker_ready``): on a machine
without a Docker engine or without the sandbox image they skip, under ``CI=true`` they fail
(``wmrl_core.testing.require``). Docker is never mocked. Limits are small (5 s timeouts,
128 MiB memory) because the CI machine has 2 shared cores.
"""

from __future__ import annotations

import numpy as np
import pytest
from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.tasks.task import AutoResearchTask

from wmrl_core.testing import require

SMALL_LIMITS = SandboxLimits(
    timeout_s=5.0,
    memory_mb=128,
    cpus=1.0,
    pids=64,
    tmp_mb=16,
    output_mb=8,
    shm_mb=8,
    log_bytes=4096,
    predictions_bytes=64 * 1024,
)


def _docker_state() -> tuple[bool, str]:
    from wmrl_autoresearch.sandbox.docker_client import DockerUnavailableError, docker_client
    from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE, image_exists

    try:
        client = docker_client(timeout_s=10)
    except DockerUnavailableError as exc:
        return False, f"no Docker engine: {exc}"
    try:
        if not image_exists(client, SANDBOX_IMAGE):
            return False, f"sandbox image {SANDBOX_IMAGE} missing: run `wmrl-autoresearch build-image`"
    finally:
        client.close()
    return True, ""


@pytest.fixture(scope="session")
def docker_ready() -> None:
    ok, reason = _docker_state()
    require(ok, reason or "Docker engine and sandbox image are needed")


@pytest.fixture(scope="session")
def docker_client(docker_ready):
    from wmrl_autoresearch.sandbox.docker_client import docker_client as make_client

    client = make_client()
    yield client
    client.close()


@pytest.fixture(scope="module")
def pool(docker_ready):
    from wmrl_autoresearch.sandbox.pool import SandboxPool

    with SandboxPool("docker", limits=SMALL_LIMITS, max_parallel=2, warm=0, gpus="none") as p:
        yield p


def make_task(
    kind: str = "classification",
    metric: str | None = None,
    n_train: int = 12,
    n_test: int = 8,
    task_id: str | None = None,
) -> AutoResearchTask:
    """A tiny deterministic task: y = 1 when x0 + x1 > 0 (classification) or y = 2 x0 - x1 (regression)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n_train + n_test, 2)).round(3)
    if kind == "classification":
        y = (x[:, 0] + x[:, 1] > 0).astype(int)
        y[:2] = [0, 1]
    else:
        y = 2 * x[:, 0] - x[:, 1]
    return AutoResearchTask.create(
        id=task_id or f"tiny-{kind}",
        kind=kind,
        metric=metric or ("accuracy" if kind == "classification" else "rmse"),
        split="train",
        columns=["x0", "x1"],
        x_train=x[:n_train],
        y_train=y[:n_train],
        x_test=x[n_train:],
        y_test=y[n_train:],
        time_limit_s=5.0,
        memory_mb=128,
    )


@pytest.fixture(scope="session")
def tiny_classification() -> AutoResearchTask:
    return make_task("classification")


@pytest.fixture(scope="session")
def tiny_regression() -> AutoResearchTask:
    return make_task("regression")


def sandbox_containers(client) -> list:
    """Sandbox containers of this test process that currently exist (any state).

    Filtered by owner pid: other processes (a training run, another test session) may use the
    same engine at the same time.
    """
    import os

    from wmrl_autoresearch.sandbox.orphans import LABEL, LABEL_OWNER_PID

    return client.containers.list(
        all=True, ignore_removed=True, filters={"label": [f"{LABEL}=1", f"{LABEL_OWNER_PID}={os.getpid()}"]}
    )


@pytest.fixture(scope="session")
def task_factory():
    """``task_factory(kind, metric=..., n_train=..., n_test=..., task_id=...)`` -> a tiny AutoResearchTask."""
    return make_task


@pytest.fixture
def live_sandboxes(docker_client):
    """``live_sandboxes()`` -> this process's sandbox containers that exist right now."""
    return lambda: sandbox_containers(docker_client)


@pytest.fixture(scope="session")
def small_limits() -> SandboxLimits:
    return SMALL_LIMITS

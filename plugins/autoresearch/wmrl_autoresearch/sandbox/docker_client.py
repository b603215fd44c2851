"""Connecting to the Docker engine, with errors that say how to fix a missing one."""

from __future__ import annotations

import os

from wmrl_core.errors import ComponentError

__all__ = ["DockerUnavailableError", "docker_client"]


class DockerUnavailableError(ComponentError):
    """No reachable Docker engine (or no ``docker`` Python package)."""


def docker_client(timeout_s: float = 120.0):
    """A pinged ``docker.DockerClient`` from the environment (``DOCKER_HOST`` or the local socket).

    :param timeout_s: HTTP timeout of API calls, seconds (log streams are not subject to it).
    :raises DockerUnavailableError: naming the fix.
    """
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - a dependency of this package
        raise DockerUnavailableError("the `docker` Python package is missing; `pip install docker`") from exc
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=int(timeout_s), max_pool_size=64)
        client.ping()
    except Exception as exc:
        raise DockerUnavailableError(
            f"no Docker engine reachable at {where} ({exc.__class__.__name__}: {exc}). Start one "
            "(`systemctl start docker`, or `dockerd &` as root; the AutoResearch plugin's ci/setup.sh installs and "
            "starts it), or choose the NOT isolated fallback explicitly with sandbox='local-unsafe'"
        ) from exc
    return client

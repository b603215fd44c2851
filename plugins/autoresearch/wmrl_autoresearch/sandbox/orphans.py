"""Labels on every sandbox container, and the start-up sweep that removes orphans.

Every container gets the labels below. A container is an *orphan* when the process that
created it is gone (it crashed or was killed with SIGKILL, so its ``finally`` blocks never
ran). :func:`sweep_orphans` runs whenever a :class:`~wmrl_autoresearch.sandbox.pool.SandboxPool`
starts and removes them. As a last line of defence each container's main process is
``sleep <lifetime>``, and containers are created with ``auto_remove``, so even an orphan
nobody sweeps disappears by itself after ``lifetime_s``.
"""

from __future__ import annotations

import logging
import os
import socket
import time

__all__ = ["LABEL", "owner_labels", "sweep_orphans", "process_start_ticks"]

log = logging.getLogger(__name__)

LABEL = "org.wmrl.autoresearch.sandbox"
LABEL_OWNER_HOST = "org.wmrl.autoresearch.owner-host"
LABEL_OWNER_PID = "org.wmrl.autoresearch.owner-pid"
LABEL_OWNER_START = "org.wmrl.autoresearch.owner-start"
LABEL_DEADLINE = "org.wmrl.autoresearch.deadline"


def process_start_ticks(pid: int) -> str:
    """Start time of ``pid`` in clock ticks since boot (tells a live owner from a reused pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # the command name (field 2) may contain spaces; fields after the last ')' are fixed
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def owner_labels(lifetime_s: float) -> dict[str, str]:
    """Labels naming this process as the owner of a new container that lives ``lifetime_s`` at most."""
    pid = os.getpid()
    return {
        LABEL: "1",
        LABEL_OWNER_HOST: socket.gethostname(),
        LABEL_OWNER_PID: str(pid),
        LABEL_OWNER_START: process_start_ticks(pid),
        LABEL_DEADLINE: str(int(time.time() + lifetime_s)),
    }


def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get(LABEL_OWNER_HOST) != socket.gethostname():
        # created from another host/namespace sharing this engine: alive until its deadline
        try:
            return time.time() < float(labels.get(LABEL_DEADLINE, "0"))
        except ValueError:
            return False
    try:
        pid = int(labels.get(LABEL_OWNER_PID, "-1"))
    except ValueError:
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    return process_start_ticks(pid) == labels.get(LABEL_OWNER_START)


def sweep_orphans(client) -> list[str]:
    """Remove sandbox containers whose owner process is gone; returns their names."""
    import docker.errors

    removed = []
    for container in client.containers.list(all=True, ignore_removed=True, filters={"label": f"{LABEL}=1"}):
        labels = container.labels or {}
        if _owner_alive(labels):
            continue
        try:
            container.remove(force=True)
            removed.append(container.name)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:  # e.g. removal already in progress (auto_remove)
            log.debug("sweep: could not remove %s: %s", container.name, exc)
    if removed:
        log.warning(
            "removed %d orphaned sandbox container(s) left by dead processes: %s", len(removed), ", ".join(removed)
        )
    return removed

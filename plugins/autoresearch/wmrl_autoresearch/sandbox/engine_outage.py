"""What the sandbox pool does when the Docker engine stops answering.

The promise (tested by stopping a real ``dockerd`` in ``tests/test_ar_engine_faults.py``):

* executions running when the engine stops come back as ``sandbox_error``; the reward extractor
  drops those rollouts (reward ``None``): never a reward of 0, never a penalty;
* before each batch, and after a batch that had sandbox errors, the pool pings the engine. If it
  does not answer, the pool waits up to ``engine_wait_s`` seconds for it (pinging every 2 s);
* once the engine answers again, the pool discards its warm containers (they died with the
  engine) and removes every container this process created that is not running a solution now,
  so no container is left behind;
* if the engine does not come back in time, :class:`EngineLostError` stops the run with the fix;
  checkpoints and metrics written so far are intact and ``resume=true`` continues.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable

from wmrl_autoresearch.sandbox.docker_client import DockerUnavailableError
from wmrl_autoresearch.sandbox.orphans import LABEL, LABEL_OWNER_PID, LABEL_OWNER_START, process_start_ticks
from wmrl_core.errors import WMRLError

__all__ = ["EngineLostError", "engine_answers", "wait_for_engine", "remove_own_containers", "recover_from_outage"]

log = logging.getLogger(__name__)

POLL_S = 2.0


class EngineLostError(DockerUnavailableError, WMRLError):
    """The Docker engine stopped answering during a run and did not come back in time
    (a ``WMRLError``: ``wmrl train`` prints its message, not a traceback)."""


def engine_answers(client) -> bool:
    try:
        client.ping()
        return True
    except Exception:  # connection refused, socket gone, HTTP error: all mean "not now"
        return False


def recover_from_outage(client, wait_s: float, keep: Callable[[], Iterable[str]]) -> None:
    """Wait for the engine (:func:`wait_for_engine`), then remove this process's containers except
    ``keep()``. An engine that goes away again meanwhile (one shutting down still answers a ping
    for a moment) is waited for again, within the same ``wait_s``.

    :raises EngineLostError: when the engine is not back within ``wait_s`` seconds.
    """
    start = time.monotonic()
    while True:
        wait_for_engine(client, max(0.0, wait_s - (time.monotonic() - start)))
        try:
            remove_own_containers(client, keep())
            return
        except Exception:  # the engine went away again between the ping and the listing
            if time.monotonic() - start >= wait_s:
                raise _lost(wait_s) from None
            time.sleep(POLL_S)


def wait_for_engine(client, wait_s: float) -> float:
    """Block until the engine answers; returns the seconds waited (0 when it answered at once).

    :raises EngineLostError: when it does not answer within ``wait_s`` seconds.
    """
    if engine_answers(client):
        return 0.0
    log.warning("the Docker engine at %s does not answer; waiting up to %.0f s for it", _where(), wait_s)
    start = time.monotonic()
    while time.monotonic() - start < wait_s:
        time.sleep(min(POLL_S, max(0.0, wait_s - (time.monotonic() - start))))
        if engine_answers(client):
            waited = time.monotonic() - start
            log.warning("the Docker engine is back after %.1f s", waited)
            return waited
    raise _lost(wait_s)


def _where() -> str:
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def _lost(wait_s: float) -> EngineLostError:
    return EngineLostError(
        f"the Docker engine at {_where()} stopped answering during the run and did not come back within "
        f"{wait_s:.0f} s (environment.kwargs.engine_wait_s). Executions running when it stopped were recorded as "
        "sandbox_error (rewards dropped, never 0); checkpoints and metrics so far are intact. Start the engine "
        "(`systemctl start docker`, or the AutoResearch plugin's ci/setup.sh as root) and continue with resume=true"
    )


def remove_own_containers(client, keep: Iterable[str] = ()) -> list[str]:
    """Remove the sandbox containers this process created, except those named in ``keep``."""
    started = process_start_ticks(os.getpid())  # tells this process from an earlier one with the same pid
    keep = set(keep)
    removed = []
    for container in client.containers.list(
        all=True, ignore_removed=True, filters={"label": [f"{LABEL}=1", f"{LABEL_OWNER_PID}={os.getpid()}"]}
    ):
        labels = container.labels or {}
        if container.name in keep or labels.get(LABEL_OWNER_START) != started:
            continue
        try:
            container.remove(force=True)
            removed.append(container.name)
        except Exception as exc:  # already being removed (auto_remove), or gone
            log.debug("could not remove %s: %s", container.name, exc)
    if removed:
        log.warning("removed %d sandbox container(s) left by the engine outage: %s", len(removed), ", ".join(removed))
    return removed

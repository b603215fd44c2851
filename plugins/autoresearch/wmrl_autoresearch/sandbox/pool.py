"""SandboxPool: many sandboxes at once (bounded), optionally started ahead of need (warm).

* At most ``max_parallel`` scripts run at the same time; :meth:`SandboxPool.run_many`
  returns the executions in request order.
* ``warm=N`` keeps N started containers waiting, refilled in the background, so a run skips
  container creation and start. A container never runs two solutions: each is removed after
  its one run and replaced.
* With NVIDIA GPUs, every sandbox holds ``gpus_per_sandbox`` devices exclusively
  (:class:`~wmrl_autoresearch.sandbox.gpus.GpuPool`); on CPU-only hosts the pool is empty.
* Cleanup: every sandbox is removed after its run (``finally``); :meth:`close` removes the
  rest (also called at interpreter exit, and on SIGTERM, which is turned into ``SystemExit``
  when no other handler is installed); orphans of crashed processes are swept at start-up.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import signal
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from wmrl_autoresearch.sandbox.docker_sandbox import CONTAINER_GRACE_S, DockerSandbox, SandboxStartError
from wmrl_autoresearch.sandbox.gpus import GpuPool, detect_nvidia_gpus
from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE
from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.sandbox.result import Execution
from wmrl_autoresearch.sandbox.workspace import Workspace
from wmrl_autoresearch.tasks.task import AutoResearchTask

__all__ = ["SandboxPool", "RunRequest", "BACKENDS"]

log = logging.getLogger(__name__)

BACKENDS = ("docker", "local-unsafe")


@dataclass
class RunRequest:
    """One script to run against one task's visible files.

    :param task: the task (its visible files are written once per pool).
    :param script: Python source.
    :param limits: limits of this run (its ``timeout_s`` is the wall-clock limit); default: the pool's.
        Warm containers are used only when these equal the pool's limits.
    """

    task: AutoResearchTask
    script: str
    limits: SandboxLimits | None = None


def _sigterm_to_exit(signum, frame):  # pragma: no cover - exercised through a subprocess test
    raise SystemExit(128 + signum)


class SandboxPool:
    """Runs scripts in sandboxes, ``max_parallel`` at a time.

    :param backend: ``"docker"`` (isolated) or ``"local-unsafe"`` (NOT isolated; warns loudly).
    :param limits: limits of every sandbox.
    :param max_parallel: concurrent runs; default ``cpu_count // cpus`` (and no more than the GPU groups).
    :param warm: containers kept started ahead of need (docker only); 0 disables warm mode.
    :param image: sandbox image name.
    :param client: a docker client to reuse; created from the environment otherwise.
    :param gpus: ``"auto"`` (detect NVIDIA GPUs), ``"none"``, or a list of device ids.
    :param gpus_per_sandbox: devices given to each sandbox when GPUs are present.
    :param warm_lifetime_s: a warm container removes itself after this long, seconds.
    :param workdir: host directory for task files and slots (see :mod:`wmrl_autoresearch.sandbox.workspace`).
    :param handle_sigterm: turn SIGTERM into ``SystemExit`` so that cleanup runs (main thread only,
        only when SIGTERM still has its default handler).
    """

    def __init__(
        self,
        backend: str = "docker",
        *,
        limits: SandboxLimits | None = None,
        max_parallel: int | None = None,
        warm: int = 0,
        image: str = SANDBOX_IMAGE,
        client=None,
        gpus: str | Sequence[str] = "auto",
        gpus_per_sandbox: int = 1,
        warm_lifetime_s: float = 1800.0,
        workdir: str | os.PathLike | None = None,
        handle_sigterm: bool = True,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"unknown sandbox backend {backend!r}; use one of {BACKENDS}")
        self.backend = backend
        self.limits = limits or SandboxLimits()
        self.image = image
        self.warm_target = int(warm) if backend == "docker" else 0
        self.warm_lifetime_s = float(warm_lifetime_s)
        self.client = None
        if backend == "docker":
            from wmrl_autoresearch.sandbox.docker_client import docker_client
            from wmrl_autoresearch.sandbox.orphans import sweep_orphans

            self.client = client or docker_client()
            self.swept = sweep_orphans(self.client)
            device_ids = detect_nvidia_gpus() if gpus == "auto" else ([] if gpus == "none" else list(gpus))
        else:
            from wmrl_autoresearch.sandbox.local_sandbox import warn_unsafe

            warn_unsafe()
            self.swept = []
            device_ids = []
            if warm:
                log.warning("warm mode needs the docker backend; ignored for %s", backend)
        self.gpu_pool = GpuPool(device_ids, gpus_per_sandbox)
        default_parallel = max(1, int((os.cpu_count() or 1) // max(self.limits.cpus, 1e-9)))
        self.max_parallel = max(1, min(int(max_parallel or default_parallel), self.gpu_pool.capacity))
        self.workspace = Workspace(workdir)
        self._executor = ThreadPoolExecutor(self.max_parallel, thread_name_prefix="wmrl-sandbox")
        self._live: set = set()
        self._live_lock = threading.Lock()
        self._warm: queue.Queue = queue.Queue()
        self._closed = threading.Event()
        self._refill = threading.Event()
        self._warmer: threading.Thread | None = None
        # used sandboxes are removed by a background reaper, off the run's critical path
        self._to_reap: queue.Queue = queue.Queue()
        self._unreaped = 0
        self._reaped = threading.Condition()
        self._reaper = threading.Thread(target=self._reap, name="wmrl-sandbox-reaper", daemon=True)
        self._reaper.start()
        if self.warm_target > 0:
            self._warmer = threading.Thread(target=self._keep_warm, name="wmrl-sandbox-warmer", daemon=True)
            self._warmer.start()
            self._refill.set()
        ref = weakref.ref(self)
        atexit.register(lambda: (p := ref()) is not None and p.close())
        if handle_sigterm and threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _sigterm_to_exit)

    # ---------------------------------------------------------------- sandboxes

    def _new_sandbox(self, lifetime_s: float, gpu_wait_s: float | None = None, limits: SandboxLimits | None = None):
        """Create and start one sandbox (holding its GPUs). Raises SandboxStartError/TimeoutError."""
        limits = limits or self.limits
        slot = self.workspace.new_slot()
        if self.backend == "local-unsafe":
            from wmrl_autoresearch.sandbox.local_sandbox import LocalProcessSandbox

            sandbox = LocalProcessSandbox(limits, slot)
        else:
            try:
                gpu_ids = self.gpu_pool.acquire(gpu_wait_s)
            except TimeoutError:
                slot.remove()
                raise
            sandbox = DockerSandbox(self.client, self.image, limits, slot, lifetime_s, gpu_ids)
        with self._live_lock:
            self._live.add(sandbox)
        try:
            sandbox.start()
        except BaseException:
            self._discard(sandbox)
            raise
        return sandbox

    def _discard(self, sandbox) -> None:
        """Remove a sandbox and give its GPUs back; idempotent."""
        with self._live_lock:
            was_live = sandbox in self._live
            self._live.discard(sandbox)
        try:
            sandbox.remove()
        finally:
            if was_live:
                self.gpu_pool.release(getattr(sandbox, "gpu_ids", ()))

    def _reap(self) -> None:
        while True:
            sandbox = self._to_reap.get()
            if sandbox is None:
                return
            try:
                self._discard(sandbox)
            except Exception as exc:
                log.warning("could not remove sandbox %s: %s", getattr(sandbox, "name", sandbox), exc)
            with self._reaped:
                self._unreaped -= 1
                self._reaped.notify_all()
            if self._to_reap.empty():
                self._refill.set()  # start replacements once removals are done (less CPU contention)

    def _keep_warm(self) -> None:
        while not self._closed.is_set():
            self._refill.wait(1.0)
            self._refill.clear()
            while not self._closed.is_set() and self._warm.qsize() < self.warm_target:
                try:
                    sandbox = self._new_sandbox(self.warm_lifetime_s, gpu_wait_s=1.0)
                except TimeoutError:
                    break  # every GPU is busy; retry on the next signal
                except Exception as exc:
                    log.warning("could not start a warm sandbox (retrying in 5 s): %s", exc)
                    self._closed.wait(5.0)
                    break
                if self._closed.is_set():
                    self._discard(sandbox)
                    return
                self._warm.put(sandbox)

    def _acquire(self, limits: SandboxLimits):
        """A started sandbox for one run: a warm one if available, else a new one. Returns (sandbox, warm)."""
        timeout_s = limits.timeout_s
        deadline_margin = timeout_s + CONTAINER_GRACE_S
        while True:
            sandbox = None
            if limits == self.limits:
                try:
                    sandbox = self._warm.get_nowait()
                except queue.Empty:
                    pass
            if sandbox is not None:
                if sandbox.remaining_lifetime_s() > deadline_margin:
                    return sandbox, True
                self._discard(sandbox)  # too old for this run
                self._refill.set()
                continue
            try:
                # with GPUs, poll so that a warm container that appears meanwhile is taken instead
                wait = 0.2 if self.gpu_pool.enabled else None
                return self._new_sandbox(timeout_s + 60.0, gpu_wait_s=wait, limits=limits), False
            except TimeoutError:
                continue

    # ---------------------------------------------------------------- running

    def task_dir(self, task: AutoResearchTask) -> Path:
        return self.workspace.task_dir(task)

    def run(self, request: RunRequest) -> Execution:
        """Run one script in a fresh sandbox; never raises for a bad script."""
        if self._closed.is_set():
            raise RuntimeError("SandboxPool is closed; create a new one")
        limits = request.limits or self.limits
        timeout_s = limits.timeout_s
        task_dir = self.task_dir(request.task)
        t0 = time.perf_counter()
        try:
            sandbox, warm = self._acquire(limits)
        except SandboxStartError as exc:
            return Execution(backend=self.backend, sandbox_error=str(exc), startup_s=time.perf_counter() - t0)
        startup_s = time.perf_counter() - t0
        if self._closed.is_set():
            self._discard(sandbox)
            return Execution(backend=self.backend, sandbox_error="SandboxPool closed before the run started")
        try:
            execution = sandbox.run(task_dir, request.script, timeout_s)
        except BaseException:
            self._discard(sandbox)
            raise
        with self._reaped:
            self._unreaped += 1
        self._to_reap.put(sandbox)  # the container is dead to us: removed in the background
        execution.warm = warm
        execution.startup_s = startup_s
        execution.resources.setdefault("timeout_s", timeout_s)
        return execution

    def run_many(self, requests: Sequence[RunRequest]) -> list[Execution]:
        """Run all requests, ``max_parallel`` at a time; executions in request order.

        On an interrupt (``KeyboardInterrupt``, ``SystemExit``) every live sandbox is removed
        before the exception propagates.
        """
        futures = [self._executor.submit(self.run, r) for r in requests]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            self.close()
            raise

    def wait_reaped(self, timeout_s: float = 30.0) -> bool:
        """Block until every used sandbox has been removed; False on timeout."""
        with self._reaped:
            return self._reaped.wait_for(lambda: self._unreaped == 0, timeout_s)

    @property
    def warm_count(self) -> int:
        """Started containers waiting for work."""
        return self._warm.qsize()

    @property
    def live_count(self) -> int:
        with self._live_lock:
            return len(self._live)

    def close(self) -> None:
        """Remove every sandbox (warm or running) and the session directory; idempotent."""
        if self._closed.is_set() and not self._live:
            return
        self._closed.set()
        self._refill.set()
        with self._live_lock:
            live = list(self._live)
        for sandbox in live:
            try:
                self._discard(sandbox)
            except Exception as exc:  # keep going: remove the others
                log.warning("could not remove sandbox %s: %s", getattr(sandbox, "name", sandbox), exc)
        if self._warmer is not None and self._warmer is not threading.current_thread():
            self._warmer.join(10.0)
        self._to_reap.put(None)
        if self._reaper is not threading.current_thread():
            self._reaper.join(30.0)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.workspace.close()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

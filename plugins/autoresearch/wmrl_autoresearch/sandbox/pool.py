"""SandboxPool: many sandboxes at once (bounded), optionally started ahead of need (warm).

* ``backend`` names a registered sandbox backend (:mod:`.registry`: ``docker``, ``local-unsafe``, or
  one a plugin adds); the pool asks its registration what it can do (warm starts, GPUs, an image)
  and drives its :class:`~.backend.SandboxProvider`, never its name.
* At most ``max_parallel`` scripts run at the same time; :meth:`SandboxPool.run_many`
  returns the executions in request order.
* ``warm=N`` keeps N started sandboxes waiting (backends with warm starts), refilled in the
  background, so a run skips container creation and start; with ``preimport`` (default) each has
  already imported numpy, pandas and scikit-learn in its waiting runner (:mod:`.runner`). A sandbox
  never runs two solutions: each is removed after its one run and replaced.
* Scripts are limited and charged by CPU time (:mod:`.cpu_meter`). A run killed at the
  wall-clock safety net while still computing (``starved``: the host gave it no CPU) is not the
  script's fault: it is retried once in a new sandbox, then reported as ``sandbox_error``. So is
  a sandbox that failed before the script started (the container, its pre-importing runner or
  the engine's exec refused): the script has not run, and a transient engine error under load
  would otherwise cost a reward.
* A script larger than ``limits.script_bytes`` is refused without running (``rejected``).
* With NVIDIA GPUs and a backend that uses them, every sandbox holds ``gpus_per_sandbox`` devices
  exclusively (:class:`~wmrl_autoresearch.sandbox.gpus.GpuPool`); on CPU-only hosts the pool is empty.
* Cleanup: every sandbox is removed after its run (``finally``); :meth:`close` removes the
  rest (also called at interpreter exit, and on SIGTERM, which is turned into ``SystemExit``
  when no other handler is installed); the Docker backend sweeps orphans of crashed processes
  when it opens.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import queue
import signal
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from wmrl_autoresearch.sandbox.backend import LIFETIME_GRACE_S, ProviderSettings, SandboxStartError
from wmrl_autoresearch.sandbox.gpus import GpuPool, detect_nvidia_gpus
from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.sandbox.registry import SandboxTable, sandbox_table
from wmrl_autoresearch.sandbox.result import Execution
from wmrl_autoresearch.sandbox.runner import PREIMPORT_MIN_MEMORY_MB, PREIMPORT_WAIT_S
from wmrl_autoresearch.sandbox.workspace import Workspace
from wmrl_autoresearch.tasks.task import AutoResearchTask

__all__ = ["SandboxPool", "RunRequest"]

log = logging.getLogger(__name__)


@dataclass
class RunRequest:
    """One script to run against one task's visible files.

    :param task: the task (its visible files are written once per pool).
    :param script: Python source.
    :param limits: limits of this run (its ``timeout_s`` is the CPU-time limit); default: the pool's.
        Warm containers are used only when these equal the pool's limits.
    """

    task: AutoResearchTask
    script: str
    limits: SandboxLimits | None = None


def _sigterm_to_exit(signum, frame):  # pragma: no cover - exercised through a subprocess test
    raise SystemExit(128 + signum)


class SandboxPool:
    """Runs scripts in sandboxes, ``max_parallel`` at a time.

    :param backend: a registered sandbox backend: ``"docker"`` (isolated), ``"local-unsafe"`` (NOT
        isolated; warns loudly), or one a plugin registers (``wmrl_register_sandboxes``).
    :param limits: limits of every sandbox.
    :param max_parallel: concurrent runs; default ``cpu_count // cpus`` (and no more than the GPU groups).
    :param warm: sandboxes kept started ahead of need (backends with warm starts); 0 disables warm mode.
    :param preimport: warm containers start the pre-importing runner (numpy, pandas, scikit-learn); not
        when ``limits.memory_mb`` is below :data:`~.runner.PREIMPORT_MIN_MEMORY_MB`.
    :param image: sandbox image name (default: the backend's registered image).
    :param client: a client of the backend's engine to reuse (docker: a ``DockerClient``); made otherwise.
    :param gpus: ``"auto"`` (detect NVIDIA GPUs), ``"none"``, or a list of device ids (backends that use GPUs).
    :param gpus_per_sandbox: devices given to each sandbox when GPUs are present.
    :param warm_lifetime_s: a warm container removes itself after this long, seconds.
    :param workdir: host directory for task files and slots (see :mod:`wmrl_autoresearch.sandbox.workspace`).
    :param handle_sigterm: turn SIGTERM into ``SystemExit`` so that cleanup runs (main thread only,
        only when SIGTERM still has its default handler).
    :param engine_wait_s: how long :meth:`run_many` waits for an engine that stopped answering before
        the backend gives up (Docker: :class:`~wmrl_autoresearch.sandbox.engine_outage.EngineLostError`), seconds.
    :param sandboxes: the registered backends (default: the installed plugins', :func:`~.registry.sandbox_table`).
    :raises UnknownSandboxError: ``backend`` is not registered (the message lists the known ones).
    """

    def __init__(
        self,
        backend: str = "docker",
        *,
        limits: SandboxLimits | None = None,
        max_parallel: int | None = None,
        warm: int = 0,
        preimport: bool = True,
        image: str | None = None,
        client=None,
        gpus: str | Sequence[str] = "auto",
        gpus_per_sandbox: int = 1,
        warm_lifetime_s: float = 1800.0,
        workdir: str | os.PathLike | None = None,
        handle_sigterm: bool = True,
        engine_wait_s: float = 300.0,
        sandboxes: SandboxTable | None = None,
    ):
        self.spec = (sandboxes if sandboxes is not None else sandbox_table()).get(backend)
        self.backend = backend
        self.limits = limits or SandboxLimits()
        self.image = image or self.spec.image
        self.warm_target = int(warm) if self.spec.warm_starts else 0
        self.preimport = bool(preimport)
        self._warm_preimports = self.preimport and self.limits.memory_mb >= PREIMPORT_MIN_MEMORY_MB
        self.warm_lifetime_s = float(warm_lifetime_s)
        self.engine_wait_s = float(engine_wait_s)
        self.provider = self.spec.make(ProviderSettings(image=self.image, client=client))
        if warm and not self.spec.warm_starts:
            log.warning("warm mode needs a backend with warm starts; ignored for %s", backend)
        device_ids = [] if not self.spec.uses_gpus else _device_ids(gpus)
        self.gpu_pool = GpuPool(device_ids, gpus_per_sandbox)
        default_parallel = max(1, int((os.cpu_count() or 1) // max(self.limits.cpus, 1e-9)))
        self.max_parallel = max(1, min(int(max_parallel or default_parallel), self.gpu_pool.capacity))
        self.workspace = Workspace(workdir)
        self._executor = ThreadPoolExecutor(self.max_parallel, thread_name_prefix="wmrl-sandbox")
        self._live: dict = {}  # live sandbox -> the GPUs it holds
        self._live_lock = threading.Lock()
        self._warm: queue.Queue = queue.Queue()
        self._closed = threading.Event()
        self._refill = threading.Event()
        self._start_threads(handle_sigterm)

    def _start_threads(self, handle_sigterm: bool) -> None:
        """The reaper, the warmer (warm mode), cleanup at exit and on SIGTERM."""
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

    def _new_sandbox(
        self,
        lifetime_s: float,
        gpu_wait_s: float | None = None,
        limits: SandboxLimits | None = None,
        preimport: bool = False,
    ):
        """Create and start one sandbox (holding its GPUs). Raises SandboxStartError/TimeoutError."""
        limits = limits or self.limits
        slot = self.workspace.new_slot()
        try:
            gpu_ids = self.gpu_pool.acquire(gpu_wait_s)
        except TimeoutError:
            slot.remove()
            raise
        try:
            sandbox = self.provider.sandbox(limits, slot, lifetime_s=lifetime_s, gpu_ids=gpu_ids, preimport=preimport)
        except BaseException:
            self.gpu_pool.release(gpu_ids)
            slot.remove()
            raise
        with self._live_lock:
            self._live[sandbox] = gpu_ids
        try:
            sandbox.start()
        except BaseException:
            self._discard(sandbox)
            raise
        return sandbox

    def _discard(self, sandbox) -> None:
        """Remove a sandbox and give its GPUs back; idempotent."""
        with self._live_lock:
            gpu_ids = self._live.pop(sandbox, None)
        try:
            sandbox.remove()
        finally:
            if gpu_ids is not None:
                self.gpu_pool.release(gpu_ids)

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
                    sandbox = self._new_sandbox(self.warm_lifetime_s, gpu_wait_s=1.0, preimport=self._warm_preimports)
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
        deadline_margin = limits.wall_limit_s + LIFETIME_GRACE_S
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
                # lifetime: the run's wall limit, plus the longest pre-import wait and the grace period
                lifetime_s = limits.wall_limit_s + PREIMPORT_WAIT_S + 2 * LIFETIME_GRACE_S
                return self._new_sandbox(lifetime_s, gpu_wait_s=wait, limits=limits), False
            except TimeoutError:
                continue

    # ---------------------------------------------------------------- running

    def task_dir(self, task: AutoResearchTask) -> Path:
        return self.workspace.task_dir(task)

    def run(self, request: RunRequest) -> Execution:
        """Run one script in a fresh sandbox (twice if the first was starved or its sandbox failed before
        the script started); never raises for a bad script."""
        if self._closed.is_set():
            raise RuntimeError("SandboxPool is closed; create a new one")
        limits = request.limits or self.limits
        refusal = limits.script_error(request.script)
        if refusal is not None:
            return Execution(backend=self.backend, rejected=refusal)
        execution = self._run_once(request, limits)
        failed_before_start = execution.sandbox_error is not None and not execution.script_started
        if execution.starved or (failed_before_start and not self._closed.is_set()):
            first = execution
            if first.starved:
                log.warning("sandbox run starved (%s); retrying once in a new sandbox", first.notes[-1:])
            else:
                log.warning("sandbox failed before the script started (%s); retrying once", first.sandbox_error)
                first.notes.append(f"sandbox failed before the script started: {first.sandbox_error}")
            execution = self._run_once(request, limits)
            execution.attempts = 2
            execution.notes[:0] = [f"first attempt: {note}" for note in first.notes]
            first_cpu_s = first.resources.get("cpu_s") if first.script_started else 0.0
            execution.resources["cpu_s_attempts"] = [first_cpu_s, execution.resources.get("cpu_s")]
            if execution.starved and first.starved:
                execution.sandbox_error = (
                    "the script was starved twice: killed at the wall-clock safety net of "
                    f"{limits.wall_limit_s:g} s while still computing, short of its {limits.timeout_s:g} CPU-s limit; "
                    "the host is overloaded (run fewer sandboxes at once, or raise limits={'wall_timeout_s': N})"
                )
        return execution

    def _run_once(self, request: RunRequest, limits: SandboxLimits) -> Execution:
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
            execution = sandbox.run(task_dir, request.script, limits.timeout_s)
        except BaseException:
            self._discard(sandbox)
            raise
        with self._reaped:
            self._unreaped += 1
        self._to_reap.put(sandbox)  # the container is dead to us: removed in the background
        execution.warm = warm
        execution.startup_s = startup_s
        execution.resources.setdefault("timeout_s", limits.timeout_s)
        return execution

    def run_many(self, requests: Sequence[RunRequest]) -> list[Execution]:
        """Run all requests, ``max_parallel`` at a time; executions in request order.

        On an interrupt (``KeyboardInterrupt``, ``SystemExit``) every live sandbox is removed
        before the exception propagates. A Docker engine that stops answering is waited for
        before and after the batch (see :mod:`~wmrl_autoresearch.sandbox.engine_outage`).
        """
        self._check_engine(after_errors=False)
        futures = [self._executor.submit(self.run, r) for r in requests]
        try:
            pending = set(futures)
            while pending:
                # wait in short slices: the kernel may deliver SIGINT/SIGTERM to one of the pool's
                # threads, and a main thread blocked without a timeout would never run the handler
                _, pending = concurrent.futures.wait(pending, timeout=0.2)
            executions = [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            self.close()
            raise
        self._check_engine(after_errors=any(ex.sandbox_error for ex in executions))
        return executions

    def _check_engine(self, after_errors: bool) -> None:
        """Wait (bounded) for an engine that does not answer; after an outage or sandbox errors,
        remove the sandboxes that died with it (the provider's ``answers`` and ``recover``)."""
        if self.provider.answers() and not after_errors:
            return
        while True:  # warm containers do not survive an outage
            try:
                sandbox = self._warm.get_nowait()
            except queue.Empty:
                break
            try:
                self._discard(sandbox)
            except Exception as exc:
                log.warning("could not remove sandbox %s: %s", sandbox.name, exc)

        def running() -> set[str]:
            with self._live_lock:
                return {s.name for s in self._live}

        self.provider.recover(self.engine_wait_s, keep=running)

    def wait_reaped(self, timeout_s: float = 30.0) -> bool:
        """Block until every used sandbox has been removed; False on timeout."""
        with self._reaped:
            return self._reaped.wait_for(lambda: self._unreaped == 0, timeout_s)

    @property
    def warm_count(self) -> int:
        """Started containers waiting for work."""
        return self._warm.qsize()

    @property
    def warm_ready_count(self) -> int:
        """Warm containers whose pre-importing runner has finished its imports (all of them without one)."""
        with self._warm.mutex:
            return sum(1 for sandbox in self._warm.queue if getattr(sandbox, "ready", True))

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
        self.provider.close()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _device_ids(gpus: str | Sequence[str]) -> list[str]:
    """The NVIDIA devices ``gpus`` names: ``"auto"`` detects them, ``"none"`` is none."""
    return detect_nvidia_gpus() if gpus == "auto" else ([] if gpus == "none" else list(gpus))

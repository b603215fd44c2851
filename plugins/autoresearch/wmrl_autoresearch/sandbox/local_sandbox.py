"""LocalProcessSandbox: runs a solution as a plain child process. NOT ISOLATED.

For machines without Docker only, and only when asked for by name (``sandbox="local-unsafe"``
or ``--sandbox local-unsafe``); it is never chosen silently. It keeps the CPU-time limit
(``RLIMIT_CPU`` of the script's process; its CPU time is measured by ``wait4``, children it
does not wait for are not counted), the idle window (CPU of every process of the script's
session, read from ``/proc``), the wall-clock safety net (the whole process group is
killed), the stdout/stderr size cap, the predictions size cap and best-effort rlimits (data
segment, file size, core dumps), but the script runs with *your*
user, can read your files, can use the network and can escape the process group. Never run
untrusted solutions with it.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

from wmrl_autoresearch.sandbox.backend import ProcessProvider, ProviderSettings
from wmrl_autoresearch.sandbox.cpu_meter import CpuWatch
from wmrl_autoresearch.sandbox.docker_sandbox import SANDBOX_ENV
from wmrl_autoresearch.sandbox.limits import SandboxLimits, thread_env
from wmrl_autoresearch.sandbox.result import PREDICTIONS_FILENAME, SOLUTION_FILENAME, CappedBuffer, Execution
from wmrl_autoresearch.sandbox.workspace import Slot

__all__ = ["LocalProcessSandbox", "LocalProvider", "UNSAFE_WARNING"]

log = logging.getLogger(__name__)

_IDLE_POLL_S = 0.5
"""How often the session's CPU time is read for the idle window, seconds."""


def session_cpu_s(session_id: int) -> float | None:
    """CPU seconds (user + system, and of the children they reaped) of every live process in
    session ``session_id``, from ``/proc/PID/stat``; ``None`` where ``/proc`` cannot be read."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        # after the command name: state ppid pgrp session ... utime(12) stime(13) cutime(14) cstime(15)
        if int(fields[3]) == session_id:
            total += sum(int(x) for x in fields[11:15])
    return total / ticks


def _start_pump(pipe, buf: CappedBuffer) -> threading.Thread:
    """A started daemon thread copying ``pipe`` into ``buf`` until it closes."""

    def pump() -> None:
        while chunk := pipe.read1(65536):
            buf.write(chunk)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


UNSAFE_WARNING = (
    "wmrl-autoresearch: LocalProcessSandbox is NOT ISOLATED. Solutions run as your user, with your network and "
    "your files; only timeouts and output caps are enforced. Use it only for trusted scripts on machines without "
    "Docker; start a Docker engine and use sandbox='docker' for anything else."
)

_warned = False


def warn_unsafe(stacklevel: int = 3) -> None:
    """Warn loudly (warnings + log) that the local fallback gives no isolation.

    :param stacklevel: as ``warnings.warn``'s, counted from this function's caller's caller.
    """
    global _warned
    warnings.warn(UNSAFE_WARNING, UserWarning, stacklevel=stacklevel)
    if not _warned:
        log.warning("!" * 20 + " " + UNSAFE_WARNING + " " + "!" * 20)
        print(f"\n!!! {UNSAFE_WARNING} !!!\n", file=sys.stderr)
        _warned = True


class LocalProvider(ProcessProvider):
    """The ``local-unsafe`` backend (:class:`~.backend.SandboxProvider`): warns loudly when a pool opens it."""

    def __init__(self, settings: ProviderSettings):
        warn_unsafe(stacklevel=5)  # at the code that opened the pool, as SandboxPool(...) is reached from it

    def sandbox(
        self, limits: SandboxLimits, slot: Slot, *, lifetime_s: float, gpu_ids: tuple[str, ...], preimport: bool
    ) -> LocalProcessSandbox:
        return LocalProcessSandbox(limits, slot)


class LocalProcessSandbox:
    """A child process in its own session, with rlimits, killed as a group at the timeout.

    A :class:`~.backend.Sandbox`; it never ends by itself, takes no GPUs and has no pre-importing runner.

    :param python: interpreter running the scripts (needs numpy/pandas/scikit-learn for real tasks).
    """

    backend = "local-unsafe"

    def __init__(self, limits: SandboxLimits, slot: Slot, python: str = sys.executable):
        self.limits = limits
        self.slot = slot
        self.python = python
        self.output = slot.path / "output"
        self.tmp = slot.path / "tmp"
        self.startup_s = 0.0
        self.used = False
        self.name = f"local-{slot.path.name}"

    def start(self) -> None:
        t0 = time.perf_counter()
        self.output.mkdir(exist_ok=True)
        self.tmp.mkdir(exist_ok=True)
        self.startup_s = time.perf_counter() - t0

    def remaining_lifetime_s(self) -> float:
        return float("inf")

    def remove(self) -> None:
        self.slot.remove()

    def _limit_resources(self, cpu_limit_s: float) -> None:  # runs in the child, before exec
        mem = int(self.limits.memory_mb) << 20
        cpu = int(math.ceil(cpu_limit_s))  # SIGXCPU at the limit (whole seconds), SIGKILL one second later
        for name, soft, hard in (
            ("RLIMIT_DATA", mem, mem),
            ("RLIMIT_FSIZE", int(self.limits.output_mb) << 20, int(self.limits.output_mb) << 20),
            ("RLIMIT_CORE", 0, 0),
            ("RLIMIT_CPU", cpu, cpu + 1),
        ):
            try:
                resource.setrlimit(getattr(resource, name), (soft, hard))
            except (ValueError, OSError):
                pass

    def run(self, task_dir: Path, script: str, timeout_s: float | None = None) -> Execution:
        if self.used:
            raise RuntimeError(f"sandbox {self.name} already ran a solution")
        self.used = True
        limits = self.limits.with_overrides(timeout_s=timeout_s)
        cpu_limit, wall_limit = float(limits.timeout_s), limits.wall_limit_s
        result = Execution(backend=self.backend, startup_s=self.startup_s)
        result.resources.update(cpu_limit_s=cpu_limit, wall_limit_s=wall_limit)
        result.notes.append("not isolated: local-process fallback")
        self.slot.stage(task_dir, script)
        env = self._env()
        stdout, stderr = CappedBuffer(self.limits.log_bytes), CappedBuffer(self.limits.log_bytes)
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                [self.python, str(self.slot.code / SOLUTION_FILENAME)],
                cwd=self.tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=lambda: self._limit_resources(cpu_limit),
            )
        except OSError as exc:
            result.sandbox_error = f"could not start {self.python}: {exc}"
            return result
        result.script_started = True
        pumps = [_start_pump(proc.stdout, stdout), _start_pump(proc.stderr, stderr)]
        watch = CpuWatch(cpu_limit, wall_limit, start_cpu_s=0.0, idle_window_s=limits.idle_window_s)
        status, usage, idle, at_wall_limit = self._wait(proc, t0, wall_limit, watch)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        for p in pumps:
            p.join(2.0)
        result.runtime_s = time.perf_counter() - t0
        result.capture_logs(stdout, stderr)
        result.exit_code = proc.returncode
        cpu_s = usage.ru_utime + usage.ru_stime
        result.resources["cpu_s"] = round(cpu_s, 3)
        if cpu_s > cpu_limit or proc.returncode == -signal.SIGXCPU:
            result.timed_out = True
            result.timeout_reason = (
                f"used its CPU-time limit of {cpu_limit:g} CPU-s ({cpu_s:.2f} CPU-s); "
                "raise it with limits={'timeout_s': N}"
            )
        elif idle:
            result.timed_out, result.exit_code = True, -9
            result.timeout_reason = watch.reason("idle")
        elif at_wall_limit:
            result.timed_out, result.exit_code = True, -9
            result.timeout_reason = f"killed at the {wall_limit:g} s wall-clock limit after {cpu_s:.2f} CPU-s"
        if not result.timed_out and result.exit_code != 0 and "MemoryError" in result.stderr[-4000:]:
            result.oom_killed = True
        if result.exit_code == 0 and not result.timed_out:
            self._read_predictions(result)
        return result

    def _env(self) -> dict[str, str]:
        """The script's environment: ours, the sandbox's settings and the slot's paths."""
        return {
            **os.environ,
            **SANDBOX_ENV,
            **thread_env(self.limits.cpus),
            "DATA_DIR": str(self.slot.data),
            "OUTPUT_DIR": str(self.output),
            "TASK_FILE": str(self.slot.data / "task.json"),
            "HOME": str(self.tmp),
            "TMPDIR": str(self.tmp),
            "MPLCONFIGDIR": str(self.tmp),
        }

    def _wait(
        self, proc: subprocess.Popen, t0: float, wall_limit: float, watch: CpuWatch
    ) -> tuple[int, resource.struct_rusage, bool, bool]:
        """Reap the script when it ends, goes idle or hits the wall-clock limit: ``(status, rusage, idle, at_wall_limit)``."""
        status = usage = None
        idle = False
        next_read = t0 + _IDLE_POLL_S
        try:
            while status is None and time.perf_counter() - t0 < wall_limit:
                pid, status_, usage_ = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    status, usage = status_, usage_
                    break
                time.sleep(0.02)
                now = time.perf_counter()
                if watch.early_idle_window_s is not None and now >= next_read:
                    next_read = now + _IDLE_POLL_S
                    cpu = session_cpu_s(proc.pid)  # start_new_session: the script's pid is its session id
                    if cpu is not None and watch.observe(now - t0, cpu) == "idle":
                        idle = True
                        break
        finally:
            at_wall_limit = status is None
            self._kill_group(proc.pid)  # also kills children left running by a finished script
            if status is None:
                _, status, usage = os.wait4(proc.pid, 0)
        return status, usage, idle, at_wall_limit

    def _read_predictions(self, result: Execution) -> None:
        """Copy the predictions file, if any, into ``result`` (cut at the predictions size cap)."""
        path = self.output / PREDICTIONS_FILENAME
        if path.is_file():
            with open(path, "rb") as f:
                data = f.read(self.limits.predictions_bytes + 1)
            result.predictions = data[: self.limits.predictions_bytes]
            result.predictions_truncated = len(data) > self.limits.predictions_bytes

    @staticmethod
    def _kill_group(pgid: int) -> None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

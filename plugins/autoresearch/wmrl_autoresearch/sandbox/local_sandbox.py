"""LocalProcessSandbox: runs a solution as a plain child process. NOT ISOLATED.

For machines without Docker only, and only when asked for by name (``sandbox="local-unsafe"``
or ``--sandbox local-unsafe``); it is never chosen silently. It keeps the wall-clock timeout
(the whole process group is killed), the stdout/stderr size cap, the predictions size cap and
best-effort rlimits (data segment, file size, core dumps), but the script runs with *your*
user, can read your files, can use the network and can escape the process group. Never run
untrusted solutions with it.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

from wmrl_autoresearch.sandbox.docker_sandbox import SANDBOX_ENV
from wmrl_autoresearch.sandbox.limits import SandboxLimits, thread_env
from wmrl_autoresearch.sandbox.result import PREDICTIONS_FILENAME, SOLUTION_FILENAME, CappedBuffer, Execution
from wmrl_autoresearch.sandbox.workspace import Slot

__all__ = ["LocalProcessSandbox", "UNSAFE_WARNING"]

log = logging.getLogger(__name__)

UNSAFE_WARNING = (
    "wmrl-autoresearch: LocalProcessSandbox is NOT ISOLATED. Solutions run as your user, with your network and "
    "your files; only timeouts and output caps are enforced. Use it only for trusted scripts on machines without "
    "Docker; start a Docker engine and use sandbox='docker' for anything else."
)

_warned = False


def warn_unsafe() -> None:
    """Warn loudly (warnings + log) that the local fallback gives no isolation."""
    global _warned
    warnings.warn(UNSAFE_WARNING, UserWarning, stacklevel=3)
    if not _warned:
        log.warning("!" * 20 + " " + UNSAFE_WARNING + " " + "!" * 20)
        print(f"\n!!! {UNSAFE_WARNING} !!!\n", file=sys.stderr)
        _warned = True


class LocalProcessSandbox:
    """A child process in its own session, with rlimits, killed as a group at the timeout.

    Same interface as :class:`~wmrl_autoresearch.sandbox.DockerSandbox`: ``start``, ``run``, ``remove``.

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

    def _limit_resources(self) -> None:  # runs in the child, before exec
        mem = int(self.limits.memory_mb) << 20
        for name, value in (("RLIMIT_DATA", mem), ("RLIMIT_FSIZE", int(self.limits.output_mb) << 20),
                            ("RLIMIT_CORE", 0)):
            try:
                resource.setrlimit(getattr(resource, name), (value, value))
            except (ValueError, OSError):
                pass

    def run(self, task_dir: Path, script: str, timeout_s: float | None = None) -> Execution:
        if self.used:
            raise RuntimeError(f"sandbox {self.name} already ran a solution")
        self.used = True
        timeout_s = float(timeout_s if timeout_s is not None else self.limits.timeout_s)
        result = Execution(backend=self.backend, startup_s=self.startup_s)
        result.notes.append("not isolated: local-process fallback")
        self.slot.stage(task_dir, script)
        env = {**os.environ, **SANDBOX_ENV, **thread_env(self.limits.cpus), "DATA_DIR": str(self.slot.data),
               "OUTPUT_DIR": str(self.output), "TASK_FILE": str(self.slot.data / "task.json"),
               "HOME": str(self.tmp), "TMPDIR": str(self.tmp), "MPLCONFIGDIR": str(self.tmp)}
        stdout, stderr = CappedBuffer(self.limits.log_bytes), CappedBuffer(self.limits.log_bytes)
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen([self.python, str(self.slot.code / SOLUTION_FILENAME)], cwd=self.tmp, env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, preexec_fn=self._limit_resources)
        except OSError as exc:
            result.sandbox_error = f"could not start {self.python}: {exc}"
            return result

        def pump(pipe, buf: CappedBuffer) -> None:
            while chunk := pipe.read1(65536):
                buf.write(chunk)

        pumps = [threading.Thread(target=pump, args=(proc.stdout, stdout), daemon=True),
                 threading.Thread(target=pump, args=(proc.stderr, stderr), daemon=True)]
        for p in pumps:
            p.start()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            result.timed_out = True
        finally:
            self._kill_group(proc.pid)  # also reaps children left running by a finished script
            proc.wait()
        for p in pumps:
            p.join(2.0)
        result.runtime_s = time.perf_counter() - t0
        result.capture_logs(stdout, stderr)
        result.exit_code = -9 if result.timed_out else proc.returncode
        if not result.timed_out and result.exit_code != 0 and "MemoryError" in result.stderr[-4000:]:
            result.oom_killed = True
        if result.exit_code == 0 and not result.timed_out:
            path = self.output / PREDICTIONS_FILENAME
            if path.is_file():
                with open(path, "rb") as f:
                    data = f.read(self.limits.predictions_bytes + 1)
                result.predictions = data[: self.limits.predictions_bytes]
                result.predictions_truncated = len(data) > self.limits.predictions_bytes
        return result

    @staticmethod
    def _kill_group(pgid: int) -> None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

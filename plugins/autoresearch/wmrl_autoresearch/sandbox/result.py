"""What a sandbox returns after running one script (before grading), and capped log capture."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Execution", "CappedBuffer", "SOLUTION_FILENAME", "PREDICTIONS_FILENAME"]

SOLUTION_FILENAME = "solution.py"
PREDICTIONS_FILENAME = "predictions.csv"


class CappedBuffer:
    """Keeps the first and the last ``cap // 2`` bytes of a stream and counts the rest.

    :param cap: bytes kept in total (head + tail).
    """

    def __init__(self, cap: int):
        self.cap = int(cap)
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def write(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.total += len(chunk)
        half = self.cap // 2
        room = half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk[-(self.cap - half) :]
            excess = len(self._tail) - (self.cap - half)
            if excess > 0:
                del self._tail[:excess]

    @property
    def truncated(self) -> bool:
        return self.total > len(self._head) + len(self._tail)

    def text(self) -> str:
        """Decoded text (undecodable bytes replaced), with a marker where bytes were dropped."""
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if self.truncated:
            dropped = self.total - len(self._head) - len(self._tail)
            return f"{head}\n...[{dropped} bytes omitted]...\n{tail}"
        return head + tail


@dataclass
class Execution:
    """One script run in one sandbox, as observed from outside it.

    :param backend: ``"docker"`` or ``"local-unsafe"``.
    :param exit_code: the script's exit status (negative: killed by that signal); ``None`` if unknown.
    :param timed_out: the script's own timeout: it used its CPU-time limit, or it stopped using CPU
        (sleeping, deadlocked) until the wall-clock safety net killed it; ``timeout_reason`` says which.
    :param starved: killed at the wall-clock safety net while it was still using CPU but had not used its
        CPU-time limit: the host did not give it CPU, an infrastructure failure, not the script's.
    :param oom_killed: killed by the memory limit.
    :param stdout: captured standard output (capped, see ``SandboxLimits.log_bytes``).
    :param stderr: captured standard error (capped).
    :param stdout_bytes: bytes written to stdout in total.
    :param stderr_bytes: bytes written to stderr in total.
    :param runtime_s: wall time of the script, seconds.
    :param startup_s: time to get a ready sandbox for this run (container create+start; ~0 when warm), seconds.
    :param warm: whether the sandbox was started ahead of need.
    :param predictions: bytes of ``predictions.csv`` (at most ``predictions_bytes + 1``); ``None`` when absent.
    :param predictions_truncated: the file was larger than the cap.
    :param resources: measured use: ``cpu_s`` (CPU seconds of the script, see :mod:`.cpu_meter`; what is
        charged), ``container_cpu_s`` (everything the container used, pre-import included), ``cpu_limit_s``,
        ``wall_limit_s``, ``memory_peak_bytes`` (when the backend can tell).
    :param logs_truncated: stdout or stderr exceeded the cap and was cut in the middle.
    :param sandbox_error: set when the sandbox itself failed (not the script's fault).
    :param rejected: why the script was refused without running (too large); ``invalid_solution``.
    :param attempts: runs made (2 when the first was starved, or its sandbox failed before the
        script started, and it was retried).
    :param script_started: the script's process was started; a sandbox that failed before that
        (container start, the pre-importing runner, the engine refusing the exec) cost the script
        nothing, so the pool retries it.
    :param preimported: the script ran in the pre-importing runner (:mod:`.runner`).
    """

    backend: str
    exit_code: int | None = None
    timed_out: bool = False
    timeout_reason: str | None = None
    starved: bool = False
    oom_killed: bool = False
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    runtime_s: float = 0.0
    startup_s: float = 0.0
    warm: bool = False
    predictions: bytes | None = None
    predictions_truncated: bool = False
    resources: dict[str, Any] = field(default_factory=dict)
    sandbox_error: str | None = None
    logs_truncated: bool = False
    notes: list[str] = field(default_factory=list)
    rejected: str | None = None
    attempts: int = 1
    script_started: bool = False
    preimported: bool = False

    def capture_logs(self, stdout: CappedBuffer, stderr: CappedBuffer) -> None:
        """Copy captured streams into this record."""
        self.stdout, self.stderr = stdout.text(), stderr.text()
        self.stdout_bytes, self.stderr_bytes = stdout.total, stderr.total
        self.logs_truncated = stdout.truncated or stderr.truncated

"""Resource limits of one sandbox run (container or local process)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

__all__ = ["SandboxLimits", "thread_env"]


@dataclass(frozen=True)
class SandboxLimits:
    """Limits applied to every solution run; hashable, so warm containers can be keyed by them.

    :param timeout_s: time limit of the script in **CPU seconds** (all its processes and threads, measured
        by the container's cgroup): the script is killed when it has used them, status ``timeout``. CPU
        time does not grow while a script waits for a CPU, so the limit holds the same on a loaded host.
    :param wall_timeout_s: wall-clock safety net, seconds; ``None`` means :attr:`wall_limit_s`'s default
        ``max(60, 10 * timeout_s / min(cpus, 1))``. A script killed by it is ``timeout`` when it had stopped
        using CPU (sleeping, deadlocked) and an infrastructure failure otherwise (see the sandbox pool).
    :param idle_window_s: wall seconds a script may use under ``IDLE_WINDOW_CPU_FRACTION`` (1 %) of a core
        before it is stopped as ``timeout`` (idle: sleeping, deadlocked, waiting for input that never
        comes), long before the wall-clock safety net, so that hanging scripts do not hold their
        sandboxes; ``None`` or 0 waits for the safety net. Needs the container's CPU counter.
    :param memory_mb: memory limit, MiB (swap disabled; tmpfs pages count towards it).
    :param cpus: CPU quota, in cores (may be fractional).
    :param pids: maximum number of processes/threads in the sandbox.
    :param tmp_mb: size of the writable ``/tmp`` tmpfs, MiB.
    :param output_mb: size of the writable ``/output`` tmpfs, MiB.
    :param shm_mb: size of ``/dev/shm``, MiB.
    :param log_bytes: bytes kept of stdout and of stderr each (half from the start, half from the end).
    :param predictions_bytes: largest predictions file read back, bytes; bigger is ``invalid_solution``.
    :param script_bytes: largest solution script accepted, bytes of UTF-8; bigger is ``invalid_solution``
        without running it.
    """

    timeout_s: float = 60.0
    memory_mb: int = 1024
    cpus: float = 1.0
    pids: int = 256
    tmp_mb: int = 256
    output_mb: int = 64
    shm_mb: int = 64
    log_bytes: int = 64 * 1024
    predictions_bytes: int = 16 * 1024 * 1024
    script_bytes: int = 1024 * 1024
    wall_timeout_s: float | None = None
    idle_window_s: float | None = 30.0

    def __post_init__(self) -> None:
        for name in (
            "timeout_s",
            "memory_mb",
            "cpus",
            "pids",
            "tmp_mb",
            "output_mb",
            "shm_mb",
            "log_bytes",
            "predictions_bytes",
            "script_bytes",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0, got {getattr(self, name)!r}")
        if self.memory_mb < 32:
            raise ValueError(f"SandboxLimits.memory_mb={self.memory_mb} is below 32 MiB; Python alone needs ~20 MiB")
        if self.wall_timeout_s is not None and not self.wall_timeout_s > 0:
            raise ValueError(f"SandboxLimits.wall_timeout_s must be > 0 or None, got {self.wall_timeout_s!r}")
        if self.idle_window_s is not None and not self.idle_window_s >= 0:
            raise ValueError(
                f"SandboxLimits.idle_window_s must be >= 0 seconds (0 or None: no idle window), got {self.idle_window_s!r}"
            )

    @property
    def wall_limit_s(self) -> float:
        """The wall-clock safety net, seconds: ``wall_timeout_s``, else ``max(60, 10 * timeout_s / min(cpus, 1))``.

        A script with a quota below one core accrues CPU time at most ``cpus`` times as fast as the wall
        clock; the factor 10 lets it finish when ten other busy processes share its core.
        """
        if self.wall_timeout_s is not None:
            return float(self.wall_timeout_s)
        return max(60.0, 10.0 * float(self.timeout_s) / min(float(self.cpus), 1.0))

    def script_error(self, script: str) -> str | None:
        """Why ``script`` is refused before it runs (too large), or ``None``."""
        size = len(script.encode("utf-8", errors="surrogatepass"))
        if size > self.script_bytes:
            return (
                f"the solution script is {size} bytes, above the limit of {self.script_bytes} bytes "
                "(SandboxLimits.script_bytes; raise it with the environment's limits={'script_bytes': N} "
                "or SandboxLimits(script_bytes=N))"
            )
        return None

    def with_overrides(self, **changes: Any) -> SandboxLimits:
        """A copy with some fields replaced (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def container_settings(self) -> dict[str, Any]:
        """The Docker SDK ``containers.create`` keyword arguments that enforce these limits."""
        memory = f"{int(self.memory_mb)}m"
        return {
            "mem_limit": memory,
            "memswap_limit": memory,  # equal to mem_limit: no swap
            "pids_limit": int(self.pids),
            "nano_cpus": int(self.cpus * 1e9),
            "shm_size": f"{int(self.shm_mb)}m",
        }


def thread_env(cpus: float) -> dict[str, str]:
    """Thread counts of the numeric libraries matched to the CPU quota (at least one thread)."""
    n = str(max(1, int(round(cpus))))
    return {"OMP_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n, "MKL_NUM_THREADS": n}

"""Exclusive NVIDIA GPUs for sandboxes: detection and a blocking allocation pool.

On a host with NVIDIA GPUs (and the NVIDIA container toolkit in Docker) every sandbox gets
``gpus_per_sandbox`` whole devices through ``device_requests``, held from container creation
to removal, so parallel sandboxes never share a GPU. On a CPU-only host the pool is empty
and sandboxes get no device requests: the same code runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

__all__ = ["detect_nvidia_gpus", "GpuPool"]


def detect_nvidia_gpus() -> list[str]:
    """Device indices of the host's NVIDIA GPUs (``nvidia-smi``), honouring
    ``WMRL_AUTORESEARCH_GPUS`` (comma-separated ids, or ``none``); empty on CPU-only hosts."""
    override = os.environ.get("WMRL_AUTORESEARCH_GPUS")
    if override is not None:
        return [] if override.strip().lower() in {"", "none"} else [g.strip() for g in override.split(",") if g.strip()]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


class GpuPool:
    """Hands out disjoint groups of GPU ids; ``acquire`` blocks until enough are free.

    :param device_ids: the GPUs to share out (empty: every acquire returns ``()`` at once).
    :param per_sandbox: devices per sandbox.
    """

    def __init__(self, device_ids: list[str] | tuple[str, ...], per_sandbox: int = 1):
        if per_sandbox < 1:
            raise ValueError(f"gpus per sandbox must be >= 1, got {per_sandbox}")
        if device_ids and len(device_ids) < per_sandbox:
            raise ValueError(f"{per_sandbox} GPUs per sandbox requested but the host has {len(device_ids)}")
        self.device_ids = tuple(device_ids)
        self.per_sandbox = per_sandbox
        self._free = list(self.device_ids)
        self._cond = threading.Condition()

    @property
    def enabled(self) -> bool:
        return bool(self.device_ids)

    @property
    def capacity(self) -> int:
        """How many sandboxes can hold GPUs at once (unbounded: a large number when disabled)."""
        return len(self.device_ids) // self.per_sandbox if self.enabled else 1 << 30

    def acquire(self, timeout_s: float | None = None) -> tuple[str, ...]:
        """Take ``per_sandbox`` free devices; ``()`` when the pool is disabled.

        :raises TimeoutError: if none became free within ``timeout_s`` seconds.
        """
        if not self.enabled:
            return ()
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._free) >= self.per_sandbox, timeout_s):
                raise TimeoutError(f"no free GPU within {timeout_s} s; all {len(self.device_ids)} are in use")
            taken, self._free = tuple(self._free[: self.per_sandbox]), self._free[self.per_sandbox :]
            return taken

    def release(self, ids: tuple[str, ...]) -> None:
        if not ids:
            return
        with self._cond:
            for gpu in ids:
                if gpu in self._free or gpu not in self.device_ids:
                    raise ValueError(f"GPU {gpu} released twice or not from this pool")
                self._free.append(gpu)
            self._cond.notify_all()

    @property
    def free(self) -> tuple[str, ...]:
        with self._cond:
            return tuple(self._free)

"""One training at a time per run directory: ``run_dir/.lock``, held with ``flock`` while it trains.

Two trainings writing one ``run_dir`` interleave their metrics and anchor pairs and overwrite each
other's checkpoints, and both exit 0. The lock file holds the pid of the process that trains
there; the kernel drops a ``flock`` when its process ends, however it ends, so a lock left by a
killed process is stale by construction and is taken over (with a notice).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from wmrl_core.errors import WMRLError

__all__ = ["LOCK_FILE", "RunDirBusyError", "run_dir_lock"]

LOCK_FILE = ".lock"


class RunDirBusyError(WMRLError, RuntimeError):
    """Another process is training in the run directory."""


def _holder(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 64).decode(errors="replace").strip()


@contextlib.contextmanager
def run_dir_lock(run_dir: Path, notice: Callable[[str], None] = lambda message: None) -> Iterator[Path]:
    """Hold ``run_dir/.lock`` (it holds this process's pid) while the block runs; released and
    removed on leaving it, also on an exception.

    :param notice: called with one line when a stale lock (its process ended) is taken over.
    :raises RunDirBusyError: at once, naming the holder's pid, when another process holds it.
    """
    path = Path(run_dir) / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd) or "?"
            os.close(fd)
            raise RunDirBusyError(
                f"{run_dir} is in use: process {holder} is training there (it holds {path}). Wait for it to end, "
                f"stop it, or give this run another run_dir"
            ) from None
        try:
            same_file = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:  # the holder removed it between our open and our lock
            same_file = False
        if same_file:
            break
        os.close(fd)
    try:
        stale = _holder(fd)
        if stale:
            notice(
                f"{path} was left by process {stale}, which ended without releasing it; taking the run directory over"
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # before the unlock, so that a waiting process opens a fresh file
        os.close(fd)

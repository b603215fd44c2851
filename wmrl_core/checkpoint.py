"""Checkpoints: everything needed to continue a run exactly where it stopped.

Every checkpoint is written twice, atomically (temporary file, ``fsync``, rename): as
``step_XXXXXX.pt``, kept, and as ``last.pt``. Loading tries ``last.pt`` and then the step files
from the newest down, so a truncated or corrupt file is named in a warning and the previous
readable checkpoint is used.
"""

from __future__ import annotations

import random
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wmrl_core.errors import WMRLError
from wmrl_core.faults import atomic_torch_save

__all__ = ["save_checkpoint", "load_checkpoint", "has_checkpoint", "CheckpointError", "rng_state", "set_rng_state"]

_STEP_FILE = re.compile(r"step_(\d+)\.pt")


class CheckpointError(WMRLError, RuntimeError):
    """No checkpoint of a run can be read."""


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def save_checkpoint(directory: Path, step: int, state: dict[str, Any]) -> Path:
    """Write ``step_XXXXXX.pt`` and ``last.pt``, each atomically; returns the step file.

    :raises DiskFullError: when the disk is full; the checkpoints written before stay intact.
    """
    directory.mkdir(parents=True, exist_ok=True)
    payload = {"step": step, **state}
    path = atomic_torch_save(payload, directory / f"step_{step:06d}.pt")
    atomic_torch_save(payload, directory / "last.pt")
    return path


def _candidates(directory: Path) -> list[Path]:
    """``last.pt``, then the step files from the newest step down."""
    numbered = [(int(m.group(1)), p) for p in directory.glob("step_*.pt") if (m := _STEP_FILE.fullmatch(p.name))]
    steps = [p for _, p in sorted(numbered, reverse=True)]
    last = directory / "last.pt"
    return ([last] if last.exists() else []) + steps


def has_checkpoint(directory: Path) -> bool:
    return Path(directory).is_dir() and bool(_candidates(Path(directory)))


def load_checkpoint(directory: Path) -> dict[str, Any]:
    """The newest readable checkpoint in ``directory``; warns naming every unreadable one skipped.

    :raises FileNotFoundError: when there is no checkpoint at all.
    :raises CheckpointError: when there are checkpoints but none can be read.
    """
    directory = Path(directory)
    candidates = _candidates(directory) if directory.is_dir() else []
    if not candidates:
        raise FileNotFoundError(
            f"no checkpoint in {directory}; run without resume=true first, or point run_dir at a run that has one"
        )
    unreadable = []
    for path in candidates:
        try:
            state = torch.load(path, weights_only=False)
            if not isinstance(state, dict) or not isinstance(state.get("step"), int):
                raise ValueError("not a WMRL checkpoint (no integer `step`)")
        except Exception as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            unreadable.append(f"{path.name} ({type(exc).__name__}: {reason})")
            warnings.warn(
                f"checkpoint {path} is truncated or corrupt ({type(exc).__name__}: {reason}); trying the previous one",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        if unreadable:
            warnings.warn(
                f"resuming from {path} (step {state['step']}); skipped unreadable: {', '.join(unreadable)}",
                RuntimeWarning,
                stacklevel=2,
            )
        return state
    raise CheckpointError(
        f"every checkpoint in {directory} is unreadable: {', '.join(unreadable)}. "
        "Restore one from a backup, or start the run again without resume=true"
    )

"""Checkpoints: everything needed to continue a run exactly where it stopped."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["save_checkpoint", "load_checkpoint", "rng_state", "set_rng_state"]


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def save_checkpoint(directory: Path, step: int, state: dict[str, Any]) -> Path:
    """Write ``step_XXXXXX.pt`` atomically and point ``last.pt`` at it (a crash mid-write
    never leaves a torn ``last.pt``)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"step_{step:06d}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, **state}, tmp)
    os.replace(tmp, path)
    last_tmp = directory / "last.pt.tmp"
    torch.save({"step": step, **state}, last_tmp)
    os.replace(last_tmp, directory / "last.pt")
    return path


def load_checkpoint(directory: Path) -> dict[str, Any]:
    path = directory / "last.pt"
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}; run without resume=true first, or point run_dir at a run that has one")
    return torch.load(path, weights_only=False)

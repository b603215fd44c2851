"""Checkpoints: everything needed to continue a run exactly where it stopped.

Every checkpoint is written twice, atomically (temporary file, ``fsync``, rename): as
``step_XXXXXX.pt``, kept, and as ``last.pt``. Loading tries ``last.pt`` and then the step files
from the newest down, so a truncated or corrupt file is named in a warning and the previous
readable checkpoint is used.

Every checkpoint records the run that wrote it (:func:`run_record`: a run id, the config and
its hash). A fresh run into a ``run_dir`` that holds an earlier run moves that run's files aside
together (:func:`move_run_aside`), so ``resume=true`` never continues another run; :func:`check_resume`
refuses a resume that would change what an exact continuation depends on.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wmrl_core.config import LEGACY_FUSION_KEYS, TrainConfig, flatten, unread_settings
from wmrl_core.errors import ConfigError, WMRLError
from wmrl_core.faults import atomic_torch_save

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "has_checkpoint",
    "CheckpointError",
    "LEGACY_KEYS",
    "current_keys",
    "rng_state",
    "set_rng_state",
    "RESUMABLE_CHANGES",
    "IDENTITY_KEYS",
    "run_record",
    "config_hash",
    "check_resume",
    "RUN_FILES",
    "move_run_aside",
]

RESUMABLE_CHANGES = (
    "steps",
    "resume",
    "resume_allow_changes",
    "run_dir",
    "logging",
    "checkpoint",
    "eval",
    "distributed",
    "world_model_timeout_s",
    "heartbeat_s",
    "environment.cache",
    "environment.execute_timeout_s",
)
"""Settings (a key or a whole section) that ``resume=true`` may change: where and how the run
is logged, checkpointed, evaluated and spread over workers, and how long it runs. Any other
change (seed, learning rate, components, batch...) breaks an exact continuation."""


IDENTITY_KEYS = ("environment.name", "policy.name", "world_model.name", "reward.name")
"""The components: a checkpoint whose run had others belongs to another configuration, and
``resume=true`` refuses it before the steps or any other setting are compared (unless
``resume_allow_changes`` names them)."""


def _matches(key: str, prefixes: list[str] | tuple[str, ...]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def config_hash(flat: dict[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of the settings an exact continuation depends on: every
    key of the flattened config except :data:`RESUMABLE_CHANGES`."""
    kept = {k: v for k, v in sorted(flat.items()) if not _matches(k, RESUMABLE_CHANGES)}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_record(cfg: TrainConfig, run_id: str | None = None) -> dict[str, Any]:
    """``{"id", "config_hash", "config"}`` of a run; a fresh run gets a new random id."""
    flat = flatten(cfg)
    return {"id": run_id or uuid.uuid4().hex[:12], "config_hash": config_hash(flat), "config": flat}


def _respell_legacy_fusion_keys(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``old``, a checkpoint's flat config from before each fusion method had its own settings,
    spelled as ``new`` is: ``fusion.KEY`` (:data:`~wmrl_core.config.LEGACY_FUSION_KEYS`) becomes
    ``fusion.kwargs.KEY`` where the method reads it (``new`` has it, written out in full by
    validation) and is dropped where it does not (the method ignored it)."""
    flat = [f"fusion.{key}" for key in LEGACY_FUSION_KEYS]
    if not any(key in old for key in flat):
        return old
    out = {k: v for k, v in old.items() if k not in flat}
    for key in LEGACY_FUSION_KEYS:
        if f"fusion.{key}" in old and f"fusion.kwargs.{key}" in new:
            out[f"fusion.kwargs.{key}"] = old[f"fusion.{key}"]
    if new.get("fusion.kwargs") == {} and not any(k.startswith("fusion.kwargs.") for k in out):
        out["fusion.kwargs"] = {}  # a method without settings
    return out


def _changed(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The settings whose value differs between the checkpoint's config ``old`` and ``new``.

    A setting added to :class:`TrainConfig` after the checkpoint was written is absent from ``old``;
    at its default it is not a change, since a new setting's default keeps the behaviour it had before.
    """
    old = _respell_legacy_fusion_keys(old, new)
    defaults = flatten(TrainConfig())
    missing = object()
    keys = sorted(set(old) | set(new))
    return {
        k: (old.get(k), new.get(k))
        for k in keys
        if old.get(k, missing) != new.get(k, missing)
        and not (k not in old and k in defaults and new.get(k) == defaults[k])
        and not _matches(k, ("resume", "resume_allow_changes"))
    }


def check_resume(cfg: TrainConfig, saved: dict[str, Any], directory: Path, current_run_id: str | None) -> list[str]:
    """Whether the checkpoint ``saved`` (from ``directory``) may be continued by ``cfg``.

    :param current_run_id: the id of the run that last started fresh in the run directory
        (``run.json``), if known.
    :return: one line per setting that changed in a way :data:`RESUMABLE_CHANGES` allows.
    :raises ConfigError: when the checkpoint belongs to another run or to another configuration
        (a component of :data:`IDENTITY_KEYS` changed), ``cfg.steps`` is below its step, or a
        setting outside :data:`RESUMABLE_CHANGES` and ``cfg.resume_allow_changes`` changed.
    """
    step = saved["step"]
    record = saved.get("run") or {}
    if current_run_id is not None and record.get("id") not in (None, current_run_id):
        raise ConfigError(
            f"the checkpoint in {directory} (step {step}) was written by run {record.get('id')}, but run "
            f"{current_run_id} started fresh in this run_dir since; resume would continue another run. Start "
            f"fresh (resume=false) or move {directory} where that run's files are"
        )
    old = record.get("config")
    changed = {} if old is None else _changed(old, flatten(cfg))
    changed = {k: v for k, v in changed.items() if not _matches(k, unread_settings(cfg))}
    other = {k: v for k, v in changed.items() if k in IDENTITY_KEYS and not _matches(k, cfg.resume_allow_changes)}
    if other:
        listing = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in other.items())
        rest = [k for k in changed if k not in other]
        also = f"; also {', '.join(rest[:4])}{' ...' if len(rest) > 4 else ''}" if rest else ""
        raise ConfigError(
            f"resume=true refused: {directory.parent} holds the run of another configuration ({listing}{also}), and "
            f"a checkpoint continues only the run that wrote it. Use another run_dir for this run, or start fresh "
            f"here with resume=false (the old run is moved aside)"
        )
    if cfg.steps < step:
        raise ConfigError(
            f"the run in {directory.parent} is already past steps={cfg.steps}: its checkpoint is at step {step}. "
            f"Set steps above {step} to continue it, or use another run_dir for a shorter run"
        )
    if old is None:
        return [f"the checkpoint in {directory} does not record its config; the settings cannot be compared"]
    allowed = list(cfg.resume_allow_changes)
    refused = {k: v for k, v in changed.items() if not _matches(k, RESUMABLE_CHANGES) and not _matches(k, allowed)}
    if refused:
        listing = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in refused.items())
        raise ConfigError(
            f"resume=true would change settings that an exact continuation of the checkpoint in {directory} "
            f"(step {step}) depends on: {listing}. Put them back, start a new run_dir, or continue anyway with "
            f"resume_allow_changes=[{','.join(refused)}]"
        )
    return [f"{k}: {a!r} -> {b!r}" for k, (a, b) in changed.items()]


RUN_FILES = (
    "metrics.jsonl",
    "summary.json",
    "config.yaml",
    "run.json",
    "anchor_pairs.jsonl",
    "plots",
    "checkpoints",
    "tensorboard",
    "wandb",
)
"""What ``wmrl train`` writes into a run directory: together, one run (:func:`move_run_aside`)."""


def move_run_aside(run_dir: Path) -> tuple[Path, list[str]] | None:
    """Move the run files (:data:`RUN_FILES`) of an earlier run in ``run_dir`` together into
    ``run_dir/previous-YYYYmmdd-HHMMSS`` (a suffix keeps names unique), so that a fresh run
    neither mixes with nor overwrites it and ``resume=true`` never continues it; anything else
    in ``run_dir`` stays. Returns (the folder, the names moved), or ``None`` when there was none."""
    found = [name for name in RUN_FILES if (run_dir / name).exists()]
    if not found:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = run_dir / f"previous-{stamp}"
    n = 1
    while target.exists():
        n += 1
        target = run_dir / f"previous-{stamp}-{n}"
    target.mkdir()
    for name in found:
        (run_dir / name).rename(target / name)
    return target, found


_STEP_FILE = re.compile(r"step_(\d+)\.pt")


class CheckpointError(WMRLError, RuntimeError):
    """No checkpoint of a run can be read."""


LEGACY_KEYS = {"rectified": "fuser", "debiaser": "calibrator"}
"""Checkpoint entries under their earlier names (``rectified``: wmrl 0.1's fuser; ``debiaser``:
the calibrator before it was named so) and the names they are read as."""


def current_keys(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` (a copy) with each entry of :data:`LEGACY_KEYS` under its current name, unless
    that name is already there."""
    state = dict(state)
    for old, new in LEGACY_KEYS.items():
        if old in state and new not in state:
            state[new] = state.pop(old)
    return state


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

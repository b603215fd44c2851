"""Physics-state features shared by the dynamics ensemble and the scorer, and episode loading.

A *state* is ``proprio`` (16) followed by LIBERO's ``object_state`` zero-padded to
``object_dim`` (its length depends on the task, e.g. 112 for LIBERO-10 task 0, 56 for task 6);
the task is a one-hot of its index. Images are not used (CPU default).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["PROPRIO_DIM", "Episode", "state_vector", "split_state", "load_episodes", "split_by_init_state"]

PROPRIO_DIM = 16


@dataclass
class Episode:
    """One recorded episode.

    :param states: (L, D) state vectors; ``L = T + 1`` when the state after the last action
        was recorded, else ``T``.
    :param actions: (T, 7) executed actions.
    :param object_len: the task's true object-state length (before padding).
    """

    task_index: int
    init_state: int
    success: bool
    states: np.ndarray
    actions: np.ndarray
    object_len: int
    rollout: int = 0
    source: str = ""


def state_vector(proprio: np.ndarray, object_state: np.ndarray, object_dim: int) -> np.ndarray:
    """``[proprio, object_state, 0...]`` of width ``16 + object_dim`` (batched over leading axes)."""
    proprio = np.asarray(proprio, dtype=np.float32)
    obj = np.asarray(object_state, dtype=np.float32)
    if obj.shape[-1] > object_dim:
        raise ValueError(
            f"object state of length {obj.shape[-1]} exceeds object_dim={object_dim}; "
            "train the world model with a larger --object-dim"
        )
    pad = np.zeros(obj.shape[:-1] + (object_dim - obj.shape[-1],), dtype=np.float32)
    return np.concatenate([proprio, obj, pad], axis=-1)


def split_state(state: np.ndarray, object_len: int) -> dict[str, np.ndarray]:
    """The observation dict a controller sees, from a state vector."""
    return {"proprio": state[..., :PROPRIO_DIM], "object_state": state[..., PROPRIO_DIM : PROPRIO_DIM + object_len]}


def _executed_key(group) -> str:
    return "executed_actions" if "executed_actions" in group else "actions"


def load_episodes(paths: Iterable[str | Path], object_dim: int = 128) -> list[Episode]:
    """Every episode of LIBERO-layout HDF5 files (this plugin's demos, DAgger data, perturbed
    rollouts); failures included when the file holds them (``success`` attribute).

    Actions are the *executed* ones: demonstrations with execution noise and DAgger rollouts
    store the expert's labels in ``actions`` and what ran in ``executed_actions``, and the
    dynamics must learn from what moved the robot."""
    import h5py

    out = []
    for path in paths:
        with h5py.File(path, "r") as f:
            for g in f["data"].values():
                o = g["obs"]
                states = state_vector(o["proprio"][()], o["object_state"][()], object_dim)
                if "final_proprio" in o:
                    final = state_vector(o["final_proprio"][()], o["final_object_state"][()], object_dim)
                    states = np.concatenate([states, final[None]], 0)
                success = bool(g.attrs["success"]) if "success" in g.attrs else bool(g["rewards"][-1] > 0)
                out.append(
                    Episode(
                        int(g.attrs["task_index"]),
                        int(g.attrs["init_state"]),
                        success,
                        states,
                        np.asarray(g[_executed_key(g)][()], dtype=np.float32),
                        int(o["object_state"].shape[1]),
                        int(g.attrs.get("rollout", 0)),
                        str(path),
                    )
                )
    if not out:
        raise ValueError("no episodes found; pass HDF5 files written by record-demos, dagger or record-wm-data")
    return out


def split_by_init_state(episodes: Sequence[Episode], heldout: Iterable[int]) -> tuple[list[Episode], list[Episode]]:
    """(train, held-out): held-out are the episodes from the given init states (40-49)."""
    heldout = set(heldout)
    return [e for e in episodes if e.init_state not in heldout], [e for e in episodes if e.init_state in heldout]

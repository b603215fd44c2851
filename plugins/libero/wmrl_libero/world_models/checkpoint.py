"""One checkpoint for both world models: dynamics ensemble, state scorer, initial states."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wmrl_libero.world_models.dynamics import DynamicsEnsemble
from wmrl_libero.world_models.scorer import StateScorer

__all__ = ["WorldModelBundle", "save_bundle", "load_bundle"]


@dataclass
class WorldModelBundle:
    """What ``train-wm`` produces.

    :param initial_states: ``(task_index, init_state) -> state vector`` after LIBERO's settling
        steps, read from the recorded episodes, so imagination starts without MuJoCo.
    :param object_len: ``task_index -> `` true object-state length (controllers see that much).
    """

    dynamics: DynamicsEnsemble | None
    scorer: StateScorer
    object_dim: int
    suite: str = "libero_10"
    initial_states: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    object_len: dict[int, int] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


def save_bundle(bundle: WorldModelBundle, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "dynamics": None
            if bundle.dynamics is None
            else {"config": bundle.dynamics.config, "state_dict": bundle.dynamics.state_dict()},
            "scorer": {"config": bundle.scorer.config, "state_dict": bundle.scorer.state_dict()},
            "object_dim": bundle.object_dim,
            "suite": bundle.suite,
            "initial_states": {f"{t}/{s}": v for (t, s), v in bundle.initial_states.items()},
            "object_len": bundle.object_len,
            "meta": bundle.meta,
        },
        path,
    )
    return path


def load_bundle(path: str | Path) -> WorldModelBundle:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"world-model checkpoint {path} not found; train one with `wmrl-libero train-wm`")
    ck = torch.load(path, map_location="cpu", weights_only=False)
    dynamics = None
    if ck["dynamics"] is not None:
        dynamics = DynamicsEnsemble(**ck["dynamics"]["config"])
        dynamics.load_state_dict(ck["dynamics"]["state_dict"])
        dynamics.eval()
    scorer = StateScorer(**ck["scorer"]["config"])
    scorer.load_state_dict(ck["scorer"]["state_dict"])
    scorer.eval()
    initial = {tuple(int(x) for x in k.split("/")): np.asarray(v) for k, v in ck["initial_states"].items()}
    return WorldModelBundle(
        dynamics,
        scorer,
        int(ck["object_dim"]),
        ck["suite"],
        initial,
        {int(k): int(v) for k, v in ck["object_len"].items()},
        ck["meta"],
    )

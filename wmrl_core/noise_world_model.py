"""The ``noise`` world model: i.i.d. uniform scores that carry no information.

It is the control of every learning claim: train with ``world_model.name=noise`` (in
``world_model`` mode nothing else reaches the policy) and whatever the policy "learns" is
what the optimiser does to it on pure noise, such as collapsing onto one arbitrary answer.
A method's improvement counts only beyond this control's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from wmrl_core import hookimpl
from wmrl_core.types import Task

__all__ = ["NoiseWorldModel"]


class NoiseWorldModel:
    """Predicts :math:`s_i \\sim U(\\text{low}, \\text{high})` i.i.d., whatever the solution.

    Call *k* draws from ``numpy.random.default_rng([seed, k])``, so a run is reproducible and a
    resumed run continues the same sequence (the call count is in the state dict).

    :param env: unused (factory contract).
    :param low: lower bound of the scores, in the domain's score units (what the reward
        extractor reads from ``Outcome.score``).
    :param high: upper bound (> ``low``).
    :param seed: seed of the noise; ``None`` takes the run's seed (the trainer seeds torch with
        ``seed`` before it makes components), so training seeds also vary the noise.
    """

    def __init__(self, env: Any = None, *, low: float = 0.0, high: float = 1.0, seed: int | None = None):
        if not (np.isfinite(low) and np.isfinite(high) and high > low):
            raise ValueError(f"noise world model needs finite low < high, got low={low}, high={high}")
        self.low, self.high = float(low), float(high)
        self.seed = int(torch.initial_seed() if seed is None else seed)
        self.calls = 0

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[float]:
        if len(tasks) != len(solutions):
            raise ValueError(f"got {len(tasks)} tasks for {len(solutions)} solutions; pass one task per solution")
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        return rng.uniform(self.low, self.high, size=len(solutions)).tolist()

    def state_dict(self) -> dict[str, int]:
        return {"seed": self.seed, "calls": self.calls}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.seed, self.calls = int(state["seed"]), int(state["calls"])


@hookimpl
def wmrl_register_world_models(table):
    table.add(
        "noise",
        "wmrl_core.noise_world_model:NoiseWorldModel",
        description="control: i.i.d. uniform scores, independent of the solution (pure-noise rewards)",
    )

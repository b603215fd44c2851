r"""The noise controls: rewards that carry no information, for any domain.

They are the control of every learning claim. Train with them and whatever the policy "learns"
is what the optimiser does to it on pure noise (a drift, a collapse onto one arbitrary answer);
a method's improvement counts only beyond this control's.

* :class:`UniformNoise`: the one noise stream, :math:`u \sim U(\text{low}, \text{high})` i.i.d.,
  call :math:`k` drawn from ``numpy.random.default_rng([seed, k])``, so a run is reproducible and
  a resumed run continues the same sequence (the call count is in its state dict). A domain's
  own world model offers it as an option where it must still compute something per rollout
  (LIBERO's imagination world model with ``noise_scores=true``: a rollout needs the states it
  visited for its log-probs, which a world model that visits nothing cannot give).
* ``noise`` world model (:class:`NoiseWorldModel`): every prediction is a draw; in
  ``world_model`` mode nothing else reaches the policy.
* ``noise-reward`` reward extractor (:class:`NoiseReward`): every rewarded outcome, real or
  predicted, gets a draw, so the update sees exactly a run's mask of rollouts (the engine drops
  ``sandbox_error`` and ``no_prediction`` before asking) with the information removed; the
  control of a ``wmrl`` or ``real`` run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from wmrl_core import hookimpl
from wmrl_core.types import Task

__all__ = ["UniformNoise", "NoiseWorldModel", "NoiseReward"]


def _run_seed(seed: int | None) -> int:
    """``seed``, or the run's seed when ``None`` (the trainer seeds torch with ``seed`` before it
    makes components), so training seeds also vary the noise."""
    if seed is not None:
        return int(seed)
    import torch  # here, not at import: this module is a built-in plugin, loaded by every command

    return int(torch.initial_seed())


class UniformNoise:
    """A reproducible, resumable stream of i.i.d. :math:`U(\\text{low}, \\text{high})` draws.

    :param low: lower bound, in the units of what the draws replace (a score, a reward).
    :param high: upper bound (> ``low``).
    :param seed: seed of the stream; ``None`` takes the run's seed.
    :raises ValueError: unless ``low < high``, both finite.
    """

    def __init__(self, *, low: float = 0.0, high: float = 1.0, seed: int | None = None):
        if not (np.isfinite(low) and np.isfinite(high) and high > low):
            raise ValueError(f"noise needs finite low < high, got low={low}, high={high}")
        self.low, self.high = float(low), float(high)
        self.seed = _run_seed(seed)
        self.calls = 0

    def draw(self, n: int) -> np.ndarray:
        """The next call's ``n`` draws (call :math:`k`: ``default_rng([seed, k])``)."""
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        return rng.uniform(self.low, self.high, size=n)

    def state_dict(self) -> dict[str, int]:
        return {"seed": self.seed, "calls": self.calls}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.seed, self.calls = int(state["seed"]), int(state["calls"])


class NoiseWorldModel:
    """Predicts :math:`s_i \\sim U(\\text{low}, \\text{high})` i.i.d., whatever the solution (one
    :class:`UniformNoise` call per ``predict``).

    :param env: unused (factory contract).
    :param low: lower bound of the scores, in the domain's score units (what the reward
        extractor reads from ``Outcome.score``).
    :param high: upper bound (> ``low``).
    :param seed: seed of the noise; ``None`` takes the run's seed.
    """

    def __init__(self, env: Any = None, *, low: float = 0.0, high: float = 1.0, seed: int | None = None):
        self.noise = UniformNoise(low=low, high=high, seed=seed)

    @property
    def low(self) -> float:
        return self.noise.low

    @property
    def high(self) -> float:
        return self.noise.high

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[float]:
        if len(tasks) != len(solutions):
            raise ValueError(f"got {len(tasks)} tasks for {len(solutions)} solutions; pass one task per solution")
        return self.noise.draw(len(solutions)).tolist()

    def state_dict(self) -> dict[str, int]:
        return self.noise.state_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.noise.load_state_dict(state)


class NoiseReward:
    """Reward :math:`r \\sim U(\\text{low}, \\text{high})` i.i.d., whatever the outcome.

    Draws come one per call from ``numpy.random.default_rng([seed, 104729])``: the stream is
    reproducible, but a resumed run starts it over (reward extractors are not checkpointed).

    :param env: unused (factory contract).
    :param low: lower bound of the rewards.
    :param high: upper bound (> ``low``).
    :param seed: seed of the draws; ``None`` takes the run's seed.
    :raises ValueError: unless ``low < high``, both finite.
    """

    def __init__(self, env: Any = None, *, low: float = 0.0, high: float = 1.0, seed: int | None = None):
        if not (np.isfinite(low) and np.isfinite(high) and high > low):
            raise ValueError(f"noise reward needs finite low < high, got low={low}, high={high}")
        self.rng = np.random.default_rng([_run_seed(seed), 104_729])
        self.low, self.high = float(low), float(high)

    def __call__(self, task: Any, outcome: Any) -> float:
        return float(self.rng.uniform(self.low, self.high))


@hookimpl
def wmrl_register_world_models(table):
    table.add(
        "noise",
        "wmrl_core.experiments.noise:NoiseWorldModel",
        description="control: i.i.d. uniform scores, independent of the solution (pure-noise rewards)",
    )


@hookimpl
def wmrl_register_reward_extractors(table):
    table.add(
        "noise-reward",
        "wmrl_core.experiments.noise:NoiseReward",
        description="control: i.i.d. uniform reward for every rewarded outcome, whatever it was",
    )

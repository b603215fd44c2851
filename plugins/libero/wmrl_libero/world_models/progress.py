"""The progress scorer of *executed* rollouts (the paper's LIBERO world model, from states).

The paper's world model for LIBERO read 8 frames of each real rollout with a learned
progress predictor and scored it ``mean(last 3) - mean(first 3)``; the core fused that dense
score with the simulator's sparse success. Here the frames are physics states (CPU default)
and the predictor is :class:`~.scorer.StateScorer`'s progress head.

It needs the executed trajectory, which ``predict(tasks, solutions)`` does not receive, so it
implements the core's optional ``predict_from_outcomes(tasks, solutions, outcomes)``
(``wmrl_core.contracts.ScoresExecutions``): the trainer executes every group (charged to
``execution``; this arm densifies the reward, it saves no execution), then this model scores
each rollout from ``outcome.info["trajectory"]`` = ``{"proprio": (n, 16), "object_state": (n, O)}``
(recorded by :class:`~wmrl_libero.environment.LiberoEnvironment`), and the core calibrates and
fuses the score against the sparse success of the anchor groups. ``predict`` alone reads a
trajectory from the solution when it carries one (``solution.trajectory``, same dict) and
otherwise answers ``no_prediction`` (no reward, never 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from wmrl_core.types import CostModel, Outcome, Task
from wmrl_libero.world_models.checkpoint import load_bundle
from wmrl_libero.world_models.features import state_vector
from wmrl_libero.world_models.scorer import (
    StateScorer,
    potential_progress,
    subsample_indices,
)

__all__ = ["TrajectoryProgressWorldModel", "trajectory_progress", "prefix_steps", "prefix_states", "prefix_progress"]


@torch.no_grad()
def trajectory_progress(
    scorer: StateScorer, states: np.ndarray, task_index: int, *, frames: int = 8, k: int = 3
) -> tuple[float, np.ndarray]:
    """(potential-style score, per-frame progress) of one trajectory of state vectors (T, D)."""
    idx = subsample_indices(len(states), frames)
    s = torch.as_tensor(np.asarray(states, dtype=np.float32)[idx])
    p = scorer.progress(s, torch.full((len(idx),), int(task_index))).numpy()
    return potential_progress(p, k), p


def prefix_steps(length: int, fraction: float, horizon: int = 520) -> int:
    """Control steps simulated when only the first ``fraction`` of the episode limit ``horizon`` is
    run: ``min(T, ceil(f H))`` (an episode that ends sooner, by success, costs its own length)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return min(int(length), math.ceil(fraction * horizon))


def prefix_states(states: np.ndarray, steps: int) -> np.ndarray:
    """The states observed while simulating the first ``steps`` actions: the reset state and one
    after each action (``states[: steps + 1]``)."""
    return np.asarray(states)[: int(steps) + 1]


def prefix_progress(
    scorer: StateScorer,
    states: np.ndarray,
    task_index: int,
    fraction: float,
    horizon: int,
    *,
    kept: int = 16,
    frames: int = 8,
    k: int = 3,
) -> float:
    """The progress score of the first ``ceil(f H)`` simulated steps of one episode whose every
    state is in ``states`` (T + 1, D), read as the environment keeps an executed trajectory
    (``kept`` evenly spaced states), then :func:`trajectory_progress` (``frames``, ``k``).
    ``fraction=1``: the whole episode."""
    n = len(states) - 1 if fraction >= 1 else prefix_steps(len(states) - 1, fraction, horizon)
    part = prefix_states(states, n)
    idx = np.unique(np.round(np.linspace(0, len(part) - 1, min(kept, len(part)))).astype(int))
    return trajectory_progress(scorer, part[idx], task_index, frames=frames, k=k)[0]


class TrajectoryProgressWorldModel:
    """WMRL world model ``libero-progress`` (see the module docstring).

    :param checkpoint: a ``wmrl-libero train-wm`` checkpoint (only its scorer is used).
    :param frames: states subsampled from each trajectory (the paper: 8 frames).
    :param k: states averaged at each end (the paper: 3).
    """

    def __init__(self, env=None, *, checkpoint: str, frames: int = 8, k: int = 3):
        self.env = env
        self.bundle = load_bundle(checkpoint)
        self.frames, self.k = frames, k
        self.cost = CostModel(per_call_s=0.01, per_item_s=0.0005)

    def _score(self, task: Task, trajectory: dict[str, np.ndarray] | None) -> Outcome:
        if not trajectory or len(trajectory.get("proprio", ())) == 0:
            return Outcome(
                status="no_prediction",
                score=None,
                info={
                    "error": "no executed trajectory to score; this world model reads "
                    "outcome.info['trajectory'] (predict_from_outcomes; LiberoEnvironment(trajectory_states=0) records none)"
                },
            )
        states = state_vector(trajectory["proprio"], trajectory["object_state"], self.bundle.object_dim)
        score, p = trajectory_progress(
            self.bundle.scorer, states, int(task.data["task_index"]), frames=self.frames, k=self.k
        )
        return Outcome(status="ok", score=score, info={"progress": p.tolist()})

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        return [self._score(t, getattr(s, "trajectory", None)) for t, s in zip(tasks, solutions)]

    def predict_from_outcomes(
        self, tasks: Sequence[Task], solutions: Sequence[Any], outcomes: Sequence[Outcome]
    ) -> list[Outcome]:
        if not len(tasks) == len(solutions) == len(outcomes):
            raise ValueError(f"{len(tasks)} tasks, {len(solutions)} solutions, {len(outcomes)} outcomes")
        return [self._score(t, o.info.get("trajectory")) for t, o in zip(tasks, outcomes)]

"""Progress of the first part of each executed rollout: the simulation-saving LIBERO world model.

A progress scorer that reads only the first part of each episode can rank a group's rollouts
nearly as well as one reading whole episodes, for less simulation (the repository's group-ranking
study measures how well and how much less). As a WMRL world model (``libero-partial-progress``)
this is:

* the anchor groups are executed in full by the trainer (their reward is the sparse success);
* every other rollout is executed by :meth:`execute_for_scoring` only for its first
  ``ceil(fraction * H)`` control steps (``H`` the environment's episode limit; an episode that
  succeeds sooner stops sooner), through the run's own :class:`~wmrl_libero.environment.LiberoEnvironment`;
  the trainer charges that execution to ``execution`` with its measured simulator CPU seconds;
* :meth:`predict_from_outcomes` scores every rollout, anchors included, on the same prefix of its
  trajectory (:func:`~wmrl_libero.world_models.progress.prefix_progress`, as ``group_ranking`` scores
  it), so that the anchors' calibration pairs compare like with like.

The environment must keep every state of an episode (``environment.kwargs.trajectory_states`` above
the episode limit), or an anchor's prefix could not be read from its full execution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wmrl_core.types import Outcome, Task
from wmrl_libero.world_models.features import state_vector
from wmrl_libero.world_models.progress import TrajectoryProgressWorldModel, prefix_progress, prefix_steps

__all__ = ["PartialProgressWorldModel"]


class PartialProgressWorldModel(TrajectoryProgressWorldModel):
    """WMRL world model ``libero-partial-progress`` (see the module docstring).

    :param env: the run's ``LiberoEnvironment`` (it executes the partial rollouts).
    :param checkpoint: a ``wmrl-libero train-wm`` checkpoint (only its scorer is used).
    :param fraction: share of the episode limit simulated for a non-anchor rollout, in (0, 1].
    :param kept: states of the prefix read (evenly spaced), as the environment keeps an executed trajectory.
    :param frames: states subsampled for the score (the paper: 8); ``k``: states averaged at each end (3).
    :raises ValueError: without an environment, for a fraction outside (0, 1], or when the
        environment keeps fewer states than an episode has.
    """

    def __init__(
        self, env=None, *, checkpoint: str, fraction: float = 0.5, kept: int = 16, frames: int = 8, k: int = 3
    ):
        super().__init__(env, checkpoint=checkpoint, frames=frames, k=k)
        if env is None or not callable(getattr(env, "execute", None)):
            raise ValueError("libero-partial-progress executes the partial rollouts itself: it needs the environment")
        self.horizon = int(env.max_episode_steps)
        if getattr(env, "trajectory_states", 0) <= self.horizon:
            raise ValueError(
                f"libero-partial-progress reads each anchor's prefix from its full execution, so the environment "
                f"must keep every state: set environment.kwargs.trajectory_states={self.horizon + 1} "
                f"(it keeps {getattr(env, 'trajectory_states', 0)})"
            )
        self.fraction, self.kept = float(fraction), int(kept)
        self.max_steps = prefix_steps(self.horizon, self.fraction, self.horizon)  # raises outside (0, 1]

    def execute_for_scoring(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        """Each solution executed for its first ``ceil(fraction * H)`` control steps."""
        return self.env.execute(tasks, solutions, max_steps=self.max_steps)

    def _score(self, task: Task, trajectory: dict[str, Any] | None) -> Outcome:
        if not trajectory or len(trajectory.get("proprio", ())) == 0:
            return super()._score(task, trajectory)  # no_prediction, with the reason
        states = state_vector(trajectory["proprio"], trajectory["object_state"], self.bundle.object_dim)
        score = prefix_progress(
            self.bundle.scorer,
            states,
            int(task.data["task_index"]),
            self.fraction,
            self.horizon,
            kept=self.kept,
            frames=self.frames,
            k=self.k,
        )
        return Outcome(status="ok", score=score, info={"simulated_steps": len(states) - 1})

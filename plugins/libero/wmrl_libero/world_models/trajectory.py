"""A second import path of :mod:`wmrl_libero.world_models.progress` (``libero-progress``), kept so
that code importing ``wmrl_libero.world_models.trajectory`` keeps working."""

from wmrl_libero.world_models.progress import TrajectoryProgressWorldModel, trajectory_progress

__all__ = ["TrajectoryProgressWorldModel", "trajectory_progress"]

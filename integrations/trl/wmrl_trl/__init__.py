"""WMRL inside TRL: a ``GRPOTrainer`` whose advantages come from WMRL's engine.

The world model scores every completion, real execution scores the anchor groups, and WMRL's
calibration and fusion turn both into one advantage per completion, which TRL's own clipped
loss then trains on. See :class:`wmrl_trl.trainer.WMRLGRPOTrainer`.
"""

from wmrl_trl.trainer import WMRLGRPOTrainer, make_wmrl_components, task_dataset

__all__ = ["WMRLGRPOTrainer", "make_wmrl_components", "task_dataset"]

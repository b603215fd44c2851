"""WMRL inside TRL: a ``GRPOTrainer`` whose advantages come from WMRL's engine.

``WMRLGRPOTrainer(model, reward_funcs=[expensive], world_model=cheap, ...)``: the world model (a
TRL reward function or reward model) scores every completion, the real reward functions score
the anchor groups only, and WMRL's calibration and fusion turn both into one advantage per
completion, which TRL's own clipped loss then trains on. WMRL's plugins (environment, world
model, reward extractor) plug in the same way. See :class:`wmrl_trl.trainer.WMRLGRPOTrainer`.
"""

from wmrl_trl.trainer import WMRLGRPOTrainer, make_wmrl_components, task_dataset

__all__ = ["WMRLGRPOTrainer", "make_wmrl_components", "task_dataset"]

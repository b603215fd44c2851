"""Small settings for running the TRL path on a tiny model (tests, ``benchmarks/gpu_check.py``)."""

from __future__ import annotations

from typing import Any

__all__ = ["tiny_grpo_config"]


def tiny_grpo_config(output_dir: str, **overrides: Any) -> Any:
    """A ``GRPOConfig`` for a few on-policy steps of a tiny model: groups of 4, two groups per
    device, 12-token completions, ``loss_type="grpo"``, no KL, no reporting, no checkpoints
    unless ``save_strategy`` says so; ``overrides`` replace any field."""
    from trl import GRPOConfig

    settings: dict[str, Any] = {
        "output_dir": output_dir,
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 12,
        "max_steps": 3,
        "learning_rate": 5e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "seed": 0,
        "data_seed": 0,
        "beta": 0.0,
        "loss_type": "grpo",
        "dataloader_num_workers": 0,
        **overrides,
    }
    return GRPOConfig(**settings)

"""WMRL inside TRL in one file: a tiny Qwen2 (built here, no download) learns the vowels domain
with a miscalibrated world model on every completion and real execution on half the groups.

    pip install -e integrations/trl
    python integrations/trl/examples/vowels.py [output_dir]

Swap in your own: ``vowels_config()`` for ``load_config("your/wmrl.yaml")`` (any registered
environment, world model and reward extractor), the tiny model for a hub id, and a real
``GRPOConfig`` (``use_vllm=True``, more steps) for ``tiny_grpo_config``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from wmrl_trl import WMRLGRPOTrainer
from wmrl_trl.testing import tiny_grpo_config

from wmrl_core.vowels import make_tiny_qwen2, vowels_config


def main(out: str) -> None:
    model = make_tiny_qwen2(Path(out) / "tiny-qwen2")
    trainer = WMRLGRPOTrainer.from_config(
        vowels_config(**{"anchors.fraction": 0.5}),  # two groups a step: one executed, one predicted
        model=str(model),
        args=tiny_grpo_config(str(Path(out) / "run"), max_steps=6, save_strategy="steps", save_steps=3),
        render=lambda task: task.description,
    )
    trainer.train()
    record = trainer.last_wmrl["record"]
    print(
        f"{trainer.wmrl_step} WMRL steps; executed {trainer.environment.executed} completions of "
        f"{trainer.wmrl_step * 8}; world-model weight {record['fusion/w_world_model']:.2f}; "
        f"checkpoints in {Path(out) / 'run'}"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="wmrl-trl-"))

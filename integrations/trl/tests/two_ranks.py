"""Run by ``accelerate launch --cpu --num_processes 2``: a few WMRL steps in TRL on two ranks;
each rank writes what it saw (anchors, rewards, advantages, the engine's record and state) so the
test can check that the ranks agree without having communicated any of it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, float) and obj != obj:
        return "nan"
    return obj


def main(model_dir: str, out_dir: str) -> None:
    from trl import GRPOConfig
    from wmrl_trl import WMRLGRPOTrainer, make_wmrl_components, task_dataset

    from wmrl_core.vowels import vowels_config

    cfg = vowels_config()
    env, world_model, reward = make_wmrl_components(cfg)
    tasks = env.tasks("train")
    args = GRPOConfig(
        output_dir=out_dir,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=12,
        max_steps=8,
        learning_rate=5e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
        beta=0.0,
        loss_type="grpo",
    )
    trainer = WMRLGRPOTrainer(
        model=model_dir,
        args=args,
        train_dataset=task_dataset(tasks, render=lambda t: t.description),
        wmrl=cfg,
        environment=env,
        world_model=world_model,
        reward=reward,
        tasks=tasks,
    )
    steps = []
    original = trainer._generate_and_score_completions

    def spy(inputs):
        out = original(inputs)
        steps.append({**trainer.last_wmrl, "engine_state": trainer.wmrl_state_dict()})
        return out

    trainer._generate_and_score_completions = spy
    trainer.train()
    rank = trainer.accelerator.process_index
    record = {"rank": rank, "executed_here": env.executed, "steps": steps}
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(_plain(record), default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

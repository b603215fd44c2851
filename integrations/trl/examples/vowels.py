"""WMRL inside TRL, written as TRL users write it: a tiny Qwen2 (built here, no download) learns
to write vowels. The real reward, a TRL reward function standing in for an expensive one (unit
tests, a judge, a simulator), runs on half the groups only; a cheap, miscalibrated world model
scores every completion; WMRL calibrates the one on the other and fuses them. Held-out prompts
are evaluated with the real reward alone.

    pip install -e integrations/trl
    python integrations/trl/examples/vowels.py [output_dir]

Swap in your own: any TRL reward functions for ``real_vowel_share`` (several, with
``reward_weights``; ``async def`` too), a reward function or a reward model for
``cheap_guess``, a hub id for the tiny model, and a real ``GRPOConfig`` (``use_vllm=True``,
more steps) for ``tiny_grpo_config``.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

from datasets import Dataset
from wmrl_trl import WMRLGRPOTrainer
from wmrl_trl.testing import tiny_grpo_config

from wmrl_core.vowels import make_tiny_qwen2, vowel_share


def real_vowel_share(prompts, completions, **kwargs):
    """The real reward: the share of letters that are vowels; ``None`` (no reward, never 0) without letters."""
    return [vowel_share(c) for c in completions]


def cheap_guess(prompts, completions, **kwargs):
    """The world model: monotone in the real reward, but miscalibrated and noisy."""
    guesses = []
    for c in completions:
        share = vowel_share(c)
        noise = int(hashlib.sha256(c.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF * 0.1 - 0.05
        guesses.append(None if share is None else 0.2 + 0.6 * share**2 + noise)
    return guesses


def main(out: str) -> None:
    model = make_tiny_qwen2(Path(out) / "tiny-qwen2")
    train = Dataset.from_list([{"prompt": f"Write some words, number {i}."} for i in range(8)])
    held_out = Dataset.from_list([{"prompt": "Name a fruit."}, {"prompt": "Describe the sea."}])
    trainer = WMRLGRPOTrainer(
        str(model),
        reward_funcs=[real_vowel_share],
        world_model=cheap_guess,
        wmrl={"anchors.fraction": 0.5},  # two groups a step: one gets the real reward, both the world model's
        args=tiny_grpo_config(
            str(Path(out) / "run"),
            max_steps=6,
            save_strategy="steps",
            save_steps=3,
            eval_strategy="steps",
            eval_steps=3,
            num_generations_eval=2,
            per_device_eval_batch_size=4,
        ),
        train_dataset=train,
        eval_dataset=held_out,
    )
    trainer.train()
    history = trainer.state.log_history
    logged = [e for e in history if "reward" in e]
    real_runs = sum(e["wmrl/anchors/executed_rollouts"] for e in logged)
    same = all(abs(e["reward"] - e["wmrl/reward/train_mean"]) < 1e-9 for e in logged)
    evaluated = [e["eval_reward"] for e in history if "eval_reward" in e]
    print(
        f"{trainer.wmrl_step} WMRL steps; real reward run on {real_runs:.0f} completions of "
        f"{trainer.wmrl_step * 8}; logged reward {'=' if same else '!='} WMRL's fused reward at every step "
        f"(last {logged[-1]['reward']:.3f}); eval_reward {evaluated[-1]:.3f} on {len(held_out)} held-out "
        f"prompts; checkpoints in {Path(out) / 'run'}"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="wmrl-trl-"))

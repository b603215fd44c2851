"""Two steps of verl's ``fit()`` with WMRL's reward manager, estimator and trainer, on a tiny Qwen2
and the vowels domain, then a validation executed for real. Needs one NVIDIA GPU and the GPU
environment of docs/integrations.md (``verl[vllm]==0.9.1`` with its own pins); it has not run on
this project's CPU machines. ``tests/test_verl_launch.py`` validates :func:`recipe` with
verl's ``validate_config``.

    .venv-verl-gpu/bin/python integrations/verl/gpu_fit.py /tmp/wmrl-verl-fit
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def write_tasks(path: Path, split: str) -> None:
    import pandas as pd

    from wmrl_core.vowels import VowelsEnvironment

    rows = [
        {
            "data_source": "wmrl-vowels",
            "prompt": [{"role": "user", "content": t.description}],
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {"task_id": t.id, "split": split},
        }
        for t in VowelsEnvironment().tasks(split)
    ]
    pd.DataFrame(rows).to_parquet(path)


def recipe(root: Path, model: Path) -> list[str]:
    """The verl overrides of the run: data and WMRL config under ``root``, the model at ``model``."""
    return [
        "algorithm.adv_estimator=wmrl",
        "trainer.v1.trainer_mode=wmrl",
        "reward.reward_manager.name=wmrl",
        "reward.num_workers=2",
        f"+wmrl.config={root / 'wmrl.yaml'}",
        f"data.train_files={root / 'train.parquet'}",
        f"data.val_files={root / 'val.parquet'}",
        "data.train_batch_size=4",
        "data.max_prompt_length=64",
        "data.max_response_length=16",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.ppo_epochs=1",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "actor_rollout_ref.actor.use_kl_loss=false",
        "algorithm.use_kl_in_reward=false",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        "trainer.total_training_steps=2",
        "trainer.test_freq=2",
        "trainer.val_before_train=false",
        "trainer.logger=[console]",
        f"trainer.default_local_dir={root / 'checkpoints'}",
    ]


def main(out: str) -> int:
    from wmrl_core.vowels import make_tiny_qwen2

    root = Path(out)
    model = make_tiny_qwen2(root / "qwen2")
    write_tasks(root / "train.parquet", "train")
    write_tasks(root / "val.parquet", "heldout")
    (root / "wmrl.yaml").write_text(
        "environment: {name: vowels}\npolicy: {name: verl-actor}\nworld_model: {name: vowels-biased}\n"
        "anchors: {fraction: 0.5, min_groups: 1}\n"
    )
    return subprocess.call([sys.executable, "-m", "wmrl_verl.main", *recipe(root, model)])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""Two steps of verl's ``fit()`` with WMRL's reward manager, estimator and trainer, on a tiny Qwen2
and the vowels domain: the GPU check of ``benchmarks/gpu_check.py`` (``verl_fit``), run with the
verl environment's Python. Needs one NVIDIA GPU; it has not run on this project's CPU machines.

    .venv-verl/bin/python integrations/verl/gpu_fit.py /tmp/wmrl-verl-fit
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
            "extra_info": {"task_id": t.id},
        }
        for t in VowelsEnvironment().tasks(split)
    ]
    pd.DataFrame(rows).to_parquet(path)


def main(out: str) -> int:
    from wmrl_core.vowels import make_tiny_qwen2

    root = Path(out)
    model = make_tiny_qwen2(root / "qwen2")
    write_tasks(root / "train.parquet", "train")
    write_tasks(root / "val.parquet", "heldout")
    wmrl_yaml = root / "wmrl.yaml"
    wmrl_yaml.write_text(
        "environment: {name: vowels}\npolicy: {name: verl-actor}\nworld_model: {name: vowels-biased}\n"
        "anchors: {fraction: 0.5}\n"
    )
    overrides = [
        "algorithm.adv_estimator=wmrl",
        "trainer.v1.trainer_mode=wmrl",
        "reward.reward_manager.name=wmrl",
        f"+wmrl.config={wmrl_yaml}",
        f"data.train_files={root / 'train.parquet'}",
        f"data.val_files={root / 'val.parquet'}",
        "data.train_batch_size=4",
        "data.max_prompt_length=64",
        "data.max_response_length=16",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.2",
        "actor_rollout_ref.actor.ppo_epochs=1",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "actor_rollout_ref.actor.use_kl_loss=false",
        "algorithm.use_kl_in_reward=false",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        "trainer.total_training_steps=2",
        "trainer.logger=[console]",
        f"trainer.default_local_dir={root / 'checkpoints'}",
        "trainer.val_before_train=false",
    ]
    return subprocess.call([sys.executable, "-m", "wmrl_verl.main", *overrides])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""``WMRLPPOTrainer``: verl's v1 ``sync`` PPO trainer with WMRL's anchors, world model and fusion.

A training step:

1. ``_next_train_batch``: the step's prompts are its groups. :class:`~wmrl_core.anchors.AnchorSampler`
   marks ``max(anchors.min_groups, round(anchors.fraction * B))`` of the ``B`` groups, drawn from
   ``(seed, step)`` as ``wmrl train`` draws them, in the per-prompt column
   :data:`~wmrl_verl.settings.EXECUTE`.
2. verl generates; its reward loop runs the ``wmrl`` reward manager on each trajectory as it
   finishes, which executes the marked ones (:mod:`wmrl_verl.reward_manager`).
3. ``_compute_advantage``: reads the step's trajectories from TransferQueue as verl reads them
   (:func:`read_rollouts`), asks the world model for the whole batch in one call on the actor that
   holds it (:mod:`wmrl_verl.world_model`), runs :class:`~wmrl_verl.estimator.WMRLAdvantageEstimator`
   and writes ``advantages``, ``returns`` and ``rm_scores`` back (``rm_scores``: the reward verl
   logs, real on anchors and the world model's elsewhere).

``_validate`` marks every validation prompt, so validation rollouts are executed for real and the
world model never scores them. The estimator's state is saved beside verl's checkpoint
(``global_step_N/wmrl_state.pt``) and restored on resume.

Select it with ``trainer.v1.trainer_mode=wmrl`` and ``algorithm.adv_estimator=wmrl``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.protocol import DataProto
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils import tensordict_utils as tu
from verl.workers.utils.padding import response_to_nested

from wmrl_core.anchors import AnchorSampler
from wmrl_verl.estimator import WMRLAdvantageEstimator
from wmrl_verl.reward_manager import REWARD_FIELDS
from wmrl_verl.settings import EXECUTE, wmrl_config_from_verl
from wmrl_verl.tasks import TaskRef, task_ref
from wmrl_verl.world_model import start_world_model_worker

__all__ = ["WMRLPPOTrainer", "STATE_FILE", "Rollouts", "read_rollouts"]

STATE_FILE = "wmrl_state.pt"
ROLLOUT_FIELDS = ["uid", "responses", "response_mask", "extra_info", "extra_fields"]


@dataclass
class Rollouts:
    """A batch's trajectories as the estimator needs them, one entry per TransferQueue key."""

    uids: list[str]
    texts: list[str]
    tasks: list[TaskRef]
    real_rewards: np.ndarray
    anchors: np.ndarray
    response_mask: torch.Tensor
    """Nested ``(N, response length)``, as TransferQueue holds it."""


def read_rollouts(keys: list[str], partition_id: str, tokenizer: Any) -> Rollouts:
    """The trajectories under ``keys`` in TransferQueue; non-tensor fields are read with
    ``.tolist()``, as verl's own trainer reads them (a ``NonTensorStack`` iterates as
    ``NonTensorData``, not as the stored dicts)."""
    data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=ROLLOUT_FIELDS)
    infos = [
        (field.get("reward_extra_info") or {}) if isinstance(field, dict) else {}
        for field in data.pop("extra_fields").tolist()
    ]
    missing = [k for k in REWARD_FIELDS if any(k not in info for info in infos)]
    if missing:
        raise KeyError(f"reward_extra_info lacks {missing}: set reward.reward_manager.name=wmrl")
    return Rollouts(
        uids=[str(u) for u in data.pop("uid").tolist()],
        texts=[tokenizer.decode(ids, skip_special_tokens=True) for ids in data["responses"].unbind()],
        tasks=[task_ref(info) for info in data.pop("extra_info").tolist()],
        real_rewards=np.array([info["wmrl_real_reward"] for info in infos], dtype=np.float64),
        anchors=np.array([bool(info["wmrl_anchor"]) for info in infos]),
        response_mask=data["response_mask"],
    )


class _Marked:
    """Iterates ``loader``'s batches with ``column`` set to ``True`` on every row."""

    def __init__(self, loader: Any, column: str) -> None:
        self.loader, self.column = loader, column

    def __iter__(self) -> Iterator[dict]:
        for batch in self.loader:
            yield {**batch, self.column: np.ones(len(batch["raw_prompt"]), dtype=bool)}


@register_trainer("wmrl")
class WMRLPPOTrainer(PPOTrainerSync):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        wmrl = wmrl_config_from_verl(self.config)
        loss_agg_mode = self.config.actor_rollout_ref.actor.get("loss_agg_mode", "token-mean")
        self.wmrl_estimator = WMRLAdvantageEstimator(wmrl, loss_agg_mode=loss_agg_mode)
        self.anchor_sampler = AnchorSampler(
            fraction=wmrl.anchors.fraction, min_groups=wmrl.anchors.min_groups, seed=wmrl.seed
        )
        self.world_model: Any = None

    def _build_replay_buffer(self) -> Any:
        # verl keys its sync behaviour (replay buffer, prompt refill, TransferQueue checkpoints) on
        # trainer_mode == "sync", and this is the sync trainer under its own name
        self.trainer_mode = "sync"
        return super()._build_replay_buffer()

    def init(self) -> None:
        super().init()
        self.world_model = start_world_model_worker(self.config)

    def _next_train_batch(self, num_prompts: int | None = None) -> TensorDict:
        batch = super()._next_train_batch(num_prompts)
        anchors = self.anchor_sampler.sample(len(batch), step=self.global_steps)
        tu.assign_non_tensor_stack(batch, EXECUTE, anchors.tolist())
        return batch

    def _validate(self) -> dict[str, float]:
        loader = self.val_dataloader
        self.val_dataloader = _Marked(loader, EXECUTE)
        try:
            return super()._validate()
        finally:
            self.val_dataloader = loader

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        if self.config.algorithm.adv_estimator != "wmrl":
            return super()._compute_advantage(batch, metrics)
        rollouts = read_rollouts(batch.keys, batch.partition_id, self.tokenizer)
        world_model_rewards, faults = ray.get(self.world_model.rewards.remote(rollouts.tasks, rollouts.texts))
        wm = np.asarray(world_model_rewards, dtype=np.float64)
        mask = rollouts.response_mask.to_padded_tensor(0)
        proto = DataProto.from_dict(
            tensors={"response_mask": mask},
            non_tensors={
                "uid": np.array(rollouts.uids, dtype=object),
                "wmrl_world_model_reward": wm,
                "wmrl_real_reward": rollouts.real_rewards,
                "wmrl_anchor": rollouts.anchors,
            },
        )
        proto = self.wmrl_estimator.compute(proto)
        record = {**proto.meta_info["wmrl"], **faults}
        metrics.update({f"wmrl/{k}": v for k, v in record.items() if isinstance(v, int | float)})
        # the reward verl logs as critic/score: real on anchors, the world model's raw reward elsewhere
        shown = torch.as_tensor(
            np.nan_to_num(np.where(rollouts.anchors, rollouts.real_rewards, wm)), dtype=torch.float32
        )
        lengths = rollouts.response_mask.offsets().diff()
        rm_scores = torch.zeros(mask.shape, dtype=torch.float32)
        rm_scores[torch.arange(len(shown)), lengths - 1] = shown
        padded = {"advantages": proto.batch["advantages"], "returns": proto.batch["returns"], "rm_scores": rm_scores}
        output = TensorDict(
            {k: response_to_nested(v, rollouts.response_mask) for k, v in padded.items()}, batch_size=len(batch)
        )
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=output)

    def _save_checkpoint(self) -> None:
        super()._save_checkpoint()
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        torch.save(self.wmrl_estimator.state_dict(), os.path.join(folder, STATE_FILE))

    def _load_checkpoint(self) -> Any:
        result = super()._load_checkpoint()
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        path = os.path.join(folder, STATE_FILE)
        if self.global_steps and not os.path.exists(path):
            raise FileNotFoundError(f"{path} is missing: this checkpoint was not written by WMRLPPOTrainer")
        if self.global_steps:
            self.wmrl_estimator.load_state_dict(torch.load(path, weights_only=False))
        return result

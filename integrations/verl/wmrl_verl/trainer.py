"""``WMRLPPOTrainer``: verl's v1 PPO trainer with the ``wmrl`` advantage estimator on the driver.

verl hands a registered advantage estimator only tensors (rewards, mask, ``uid``); WMRL needs
each trajectory's two raw rewards, which the ``wmrl`` reward manager leaves in its
``reward_extra_info``. This subclass reads them from the batch's ``extra_fields``, runs
:class:`~wmrl_verl.estimator.WMRLAdvantageEstimator` and writes ``advantages``/``returns`` back as
the base class does; the estimator's state is saved beside verl's checkpoint
(``global_step_N/wmrl_state.pt``) and restored on resume.

Select it with ``trainer.v1.trainer_mode=wmrl`` (verl's trainer registry; it extends the
``sync`` trainer) and ``algorithm.adv_estimator=wmrl``. This path needs verl's Ray workers and GPUs: it has not run on
the CPU-only machines of this project (docs/integrations.md gives the recipe).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from wmrl_verl.estimator import FIELDS, WMRLAdvantageEstimator
from wmrl_verl.reward_manager import wmrl_config_from_verl

__all__ = ["WMRLPPOTrainer", "STATE_FILE", "wmrl_fields"]

STATE_FILE = "wmrl_state.pt"


def wmrl_fields(extra_fields: Any) -> dict[str, np.ndarray]:
    """The reward manager's per-trajectory fields out of verl's per-row ``extra_fields`` dicts."""
    infos = [(row or {}).get("reward_extra_info", {}) if isinstance(row, dict) else {} for row in extra_fields]
    missing = [k for k in FIELDS if any(k not in info for info in infos)]
    if missing:
        raise KeyError(f"reward_extra_info lacks {missing}: set reward.reward_manager.name=wmrl")
    return {k: np.asarray([info[k] for info in infos], dtype=object) for k in FIELDS}


@register_trainer("wmrl")
class WMRLPPOTrainer(PPOTrainerSync):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        loss_agg_mode = self.config.actor_rollout_ref.actor.get("loss_agg_mode", "token-mean")
        self.wmrl_estimator = WMRLAdvantageEstimator(wmrl_config_from_verl(self.config), loss_agg_mode=loss_agg_mode)

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        if self.config.algorithm.adv_estimator != "wmrl":
            return super()._compute_advantage(batch, metrics)
        import transfer_queue as tq
        from tensordict import TensorDict
        from verl.protocol import DataProto
        from verl.workers.utils.padding import response_to_nested

        fields = ["uid", "response_mask", "extra_fields"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        response_mask = data["response_mask"]
        extra_fields = data.pop("extra_fields")
        proto = DataProto(batch=data.to_padded_tensor())
        proto.non_tensor_batch["uid"] = np.array(proto.batch.pop("uid").tolist(), dtype=object)
        proto.non_tensor_batch.update(wmrl_fields(extra_fields))
        proto = self.wmrl_estimator.compute(proto)
        metrics.update({f"wmrl/{k}": v for k, v in proto.meta_info["wmrl"].items() if isinstance(v, int | float)})
        output = TensorDict(
            {f: response_to_nested(proto.batch[f], response_mask) for f in ("advantages", "returns")},
            batch_size=len(batch),
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

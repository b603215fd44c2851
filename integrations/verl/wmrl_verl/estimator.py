"""The ``wmrl`` advantage estimator for verl: WMRL's calibration and fusion in the trainer.

:class:`~wmrl_verl.trainer.WMRLPPOTrainer` puts three per-trajectory fields in the batch's
``non_tensor_batch``: the raw world-model reward (from the world-model worker), the real reward
(NaN off the anchors) and the anchor flag (both from the reward manager).
:class:`WMRLAdvantageEstimator` reads them with verl's ``uid`` (the group)
and the response mask (the token counts), runs :func:`wmrl_core.fusion.fuse_step` (the function
``wmrl train`` and the TRL integration run too) and writes the effective advantages, broadcast
over each response's tokens, as verl's ``advantages`` and ``returns``. It holds the calibrator
and fuser between steps, in the trainer's process, and checkpoints them (:meth:`state_dict`).

On-policy (one PPO epoch over the batch, ``ppo_epochs=1`` with a single mini-batch) verl's clipped
loss on these advantages has the gradient of WMRL's fused loss; verl's ``loss_agg_mode``
``seq-mean-token-mean`` matches WMRL's ``sequence_mean`` and ``token-mean`` its ``token_mean``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from wmrl_core.calibration import RewardCalibrator
from wmrl_core.config import TrainConfig
from wmrl_core.errors import ConfigError
from wmrl_core.fusion import FusionSettings, build_fuser, fuse_step
from wmrl_core.fusion.gradients import refuse_gradient_fusers
from wmrl_core.step import fusion_method

__all__ = ["WMRLAdvantageEstimator", "FIELDS", "LOSS_AGGREGATION"]

FIELDS = ("wmrl_world_model_reward", "wmrl_real_reward", "wmrl_anchor")
"""The ``non_tensor_batch`` keys the estimator reads."""

LOSS_AGGREGATION = {"token-mean": "token_mean", "seq-mean-token-mean": "sequence_mean"}
"""verl ``actor.loss_agg_mode`` -> the WMRL aggregation whose effective advantages reproduce it."""


def group_index(uids: np.ndarray) -> np.ndarray:
    """Group ids ``0..B-1`` in order of first appearance of each ``uid``."""
    _, first, inverse = np.unique(np.asarray(uids, dtype=object).astype(str), return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # rank of each unique uid by first appearance
    return order[inverse]


class WMRLAdvantageEstimator:
    """Holds the calibrator and the fuser across steps; :meth:`compute` fills one batch's advantages.

    :param cfg: the WMRL config (its ``calibration``, ``fusion`` and ``grpo.scale_advantages``).
    :param loss_agg_mode: verl's ``actor_rollout_ref.actor.loss_agg_mode``.
    """

    def __init__(self, cfg: TrainConfig, *, loss_agg_mode: str = "token-mean") -> None:
        if loss_agg_mode not in LOSS_AGGREGATION:
            raise ConfigError(
                f"loss_agg_mode={loss_agg_mode!r} has no exact WMRL counterpart; set "
                f"actor_rollout_ref.actor.loss_agg_mode to one of {', '.join(LOSS_AGGREGATION)}"
            )
        cfg.grpo.loss_aggregation = LOSS_AGGREGATION[loss_agg_mode]
        self.cfg = cfg
        self.calibrator = RewardCalibrator.from_config(cfg.calibration)
        self.fuser = build_fuser(fusion_method(cfg), cfg.fusion)
        refuse_gradient_fusers(self.fuser, "the verl integration")
        self.settings = FusionSettings.from_config(cfg)
        self.step = 0
        self.last_record: dict[str, Any] = {}

    def compute(self, data: Any) -> Any:
        """Write ``advantages`` and ``returns`` (``(N, T)``, zero off the response mask) into the
        ``DataProto`` ``data`` and return it; ``data.meta_info["wmrl"]`` gets the step's metrics."""
        missing = [k for k in (*FIELDS, "uid") if k not in data.non_tensor_batch]
        if missing:
            raise ConfigError(
                f"the batch lacks {missing}: the wmrl advantage estimator needs the wmrl trainer and reward manager "
                "(trainer.v1.trainer_mode=wmrl, reward.reward_manager.name=wmrl) and verl's uid per group"
            )
        nt = data.non_tensor_batch
        mask = data.batch["response_mask"]
        group_ids = group_index(nt["uid"])
        anchor_rows = np.asarray(nt["wmrl_anchor"], dtype=bool)
        n_groups = int(group_ids.max()) + 1 if group_ids.size else 0
        anchor_groups = np.zeros(n_groups, dtype=bool)
        anchor_groups[group_ids[anchor_rows]] = True
        if np.any(anchor_rows != anchor_groups[group_ids]):
            raise ValueError("a group is partly anchored: the anchor decision must be per uid (per prompt)")
        self.step += 1
        fused = fuse_step(
            world_model_rewards=np.asarray(nt["wmrl_world_model_reward"], dtype=np.float64),
            real_rewards=np.asarray(nt["wmrl_real_reward"], dtype=np.float64),
            group_ids=group_ids,
            anchor_groups=anchor_groups,
            token_counts=mask.sum(-1).cpu().numpy().astype(np.float64),
            calibrator=self.calibrator,
            fuser=self.fuser,
            settings=self.settings,
            step=self.step,
        )
        self.calibrator, self.fuser = fused.calibrator, fused.fuser
        adv = torch.as_tensor(fused.advantages, dtype=torch.float32, device=mask.device).unsqueeze(-1) * mask
        data.batch["advantages"] = adv
        data.batch["returns"] = adv.clone()
        self.last_record = fused.record
        data.meta_info["wmrl"] = fused.record
        return data

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "calibrator": self.calibrator.state_dict(), "fuser": self.fuser.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.calibrator.load_state_dict(state["calibrator"])
        self.fuser.load_state_dict(state["fuser"])

"""``algorithm.adv_estimator=wmrl`` in verl's registry.

verl calls a registered estimator with tensors only; the fusion needs the reward manager's
per-trajectory fields, so the estimator proper runs in :class:`wmrl_verl.trainer.WMRLPPOTrainer`.
The registered function serves callers that do pass ``non_tensor_batch`` (verl does for some
estimators) and otherwise says what to use.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import register_adv_est

from wmrl_core.errors import ConfigError

__all__ = ["wmrl_advantage", "ESTIMATOR"]

ESTIMATOR: dict[str, Any] = {}
"""``{"estimator": WMRLAdvantageEstimator}`` of the driver process, set by whoever owns it."""


@register_adv_est("wmrl")
def wmrl_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    non_tensor_batch: dict[str, np.ndarray] | None = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Effective advantages ``(N, T)`` (and the same as returns) of WMRL's fusion."""
    from verl import DataProto

    if non_tensor_batch is None or "estimator" not in ESTIMATOR:
        raise ConfigError(
            "adv_estimator=wmrl needs each trajectory's world-model and real rewards, which verl's generic "
            "estimator call does not pass: run with trainer.v1.trainer_mode=wmrl (wmrl_verl.trainer.WMRLPPOTrainer)"
        )
    data = DataProto.from_single_dict({"response_mask": response_mask})
    data.non_tensor_batch.update(non_tensor_batch)
    if index is not None:
        data.non_tensor_batch["uid"] = index
    data = ESTIMATOR["estimator"].compute(data)
    return data.batch["advantages"], data.batch["returns"]

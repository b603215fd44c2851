"""WMRL's names in verl's registries, in every process that resolves them.

verl resolves ``trainer.v1.trainer_mode``, ``algorithm.adv_estimator`` and
``reward.reward_manager.name`` from module-level registries, filled when a module is imported, and
it resolves them inside Ray actors (the task runner, the reward loop workers), not in the process
that parsed the command line. :func:`register` imports the three WMRL modules;
:func:`with_worker_registration` makes it the Ray job's ``worker_process_setup_hook``, so Ray runs
it in every worker process of the job before that worker runs anything (``python -m
wmrl_verl.main`` does this; docs/integrations.md).

``algorithm.adv_estimator=wmrl`` itself: verl calls a registered estimator with tensors only; the
fusion needs each trajectory's two raw rewards, so the estimator proper runs in
:class:`wmrl_verl.trainer.WMRLPPOTrainer`. The registered function serves callers that do pass
``non_tensor_batch`` and otherwise says what to use.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, open_dict
from verl.trainer.ppo.core_algos import register_adv_est

from wmrl_core.errors import ConfigError

__all__ = ["wmrl_advantage", "ESTIMATOR", "register", "with_worker_registration", "SETUP_HOOK"]

SETUP_HOOK = "wmrl_verl.registration.register"
"""This module's :func:`register`, as Ray's ``runtime_env.worker_process_setup_hook`` names it."""


def register() -> None:
    """Register ``wmrl`` as verl's trainer, advantage estimator and reward manager in this process
    (importing the modules that do; a second call does nothing)."""
    import wmrl_verl.reward_manager  # noqa: F401
    import wmrl_verl.trainer  # noqa: F401


def with_worker_registration(config: DictConfig) -> DictConfig:
    """``config`` with :data:`SETUP_HOOK` as ``ray_kwargs.ray_init.runtime_env.worker_process_setup_hook``,
    which verl's ``run_ppo`` passes to ``ray.init``: every Ray worker of the job registers WMRL."""
    runtime_env = config.ray_kwargs.ray_init.runtime_env
    existing = runtime_env.get("worker_process_setup_hook")
    if existing not in (None, SETUP_HOOK):
        raise ConfigError(
            f"ray_kwargs.ray_init.runtime_env.worker_process_setup_hook is {existing!r}; WMRL needs {SETUP_HOOK!r} "
            "there to register with verl in every Ray worker: remove yours, or launch verl's own "
            "verl.trainer.main_ppo with a hook of yours that calls wmrl_verl.registration.register()"
        )
    with open_dict(config):
        runtime_env.worker_process_setup_hook = SETUP_HOOK
    return config


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

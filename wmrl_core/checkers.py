"""Contract checks for plugin components (gymnasium's ``env_checker`` pattern).

A broken contract raises :class:`~wmrl_core.errors.ContractError` naming the component and
the missing piece; doubtful but legal behaviour only warns.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from wmrl_core.contracts import Environment, Policy, WorldModel, required_methods
from wmrl_core.errors import ContractError
from wmrl_core.types import CostModel, Rollouts

__all__ = ["check_environment", "check_policy", "check_world_model", "check_reward_extractor", "check_rollouts"]


def _require_methods(kind: str, obj: Any, protocol: type) -> None:
    missing = [n for n in required_methods(protocol) if not callable(getattr(obj, n, None))]
    if missing:
        raise ContractError(
            f"{kind} {type(obj).__name__} lacks {', '.join(missing)}; see wmrl_core.contracts.{protocol.__name__}"
        )


def _check_cost(kind: str, obj: Any) -> None:
    cost = getattr(obj, "cost", None)
    if cost is not None and not isinstance(cost, CostModel):
        raise ContractError(
            f"{kind} {type(obj).__name__}.cost must be a wmrl_core.types.CostModel or None, got {type(cost).__name__}"
        )


def check_environment(env: Any) -> None:
    _require_methods("environment", env, Environment)
    _check_cost("environment", env)


def check_policy(policy: Any) -> None:
    _require_methods("policy", policy, Policy)
    _check_cost("policy", policy)
    if not any(p.requires_grad for p in policy.parameters()):
        raise ContractError(f"policy {type(policy).__name__} has no trainable parameters; GRPO has nothing to update")


def check_world_model(world_model: Any) -> None:
    _require_methods("world model", world_model, WorldModel)
    _check_cost("world model", world_model)


def check_reward_extractor(extractor: Any) -> None:
    if not callable(extractor):
        raise ContractError(f"reward extractor {type(extractor).__name__} must be callable as extractor(task, outcome)")


def check_rollouts(rollouts: Any, n_tasks: int, group_size: int) -> None:
    """What the trainer relies on in a policy's ``generate`` output."""
    if not isinstance(rollouts, Rollouts):
        raise ContractError(f"policy.generate must return wmrl_core.types.Rollouts, got {type(rollouts).__name__}")
    n = n_tasks * group_size
    if len(rollouts.solutions) != n or len(rollouts.tasks) != n or len(rollouts.group_ids) != n:
        raise ContractError(
            f"policy.generate returned {len(rollouts.solutions)} rollouts for {n_tasks} tasks x {group_size}; expected {n}"
        )
    lp, mask = rollouts.old_log_probs, rollouts.mask
    if (
        not (isinstance(lp, torch.Tensor) and isinstance(mask, torch.Tensor))
        or lp.shape != mask.shape
        or lp.shape[0] != n
    ):
        raise ContractError(
            f"old_log_probs and mask must be tensors of shape ({n}, T); got {getattr(lp, 'shape', None)} and {getattr(mask, 'shape', None)}"
        )
    if lp.requires_grad:
        warnings.warn("old_log_probs requires grad; generate should run under torch.no_grad()", stacklevel=2)

"""The TRL options ``WMRLGRPOTrainer`` honours, those it refuses by name, and WMRL's own settings."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from trl import GRPOConfig

from wmrl_core.config import TrainConfig
from wmrl_core.errors import ConfigError

__all__ = ["LOSS_AGGREGATION", "is_off_policy", "check_trl_args", "wmrl_settings"]

LOSS_AGGREGATION = {"grpo": "sequence_mean", "dapo": "token_mean"}
"""TRL ``loss_type`` -> the WMRL aggregation whose effective advantages reproduce it across ranks.
``grpo`` averages per-sequence means; ``dapo`` divides by the global token count. ``bnpo``
divides by each rank's own tokens and ``dr_grpo`` by a constant, for which WMRL's fused loss has
no per-stream normaliser; the rest (``cispo``, ``sapo``, ``vespo``, ``luspo``) are not linear in
the advantage."""


def is_off_policy(args: GRPOConfig) -> bool:
    """Whether some optimisation passes see a policy that has moved since generation (probability
    ratio != 1): several passes per batch, or a generation batch spread over more optimizer
    steps than one accumulation."""
    spread = args.steps_per_generation is not None and args.steps_per_generation > args.gradient_accumulation_steps
    return args.num_iterations > 1 or spread


def check_trl_args(
    args: GRPOConfig, *, n_reward_funcs: int | None = None, trainer_kwargs: Mapping[str, Any] | None = None
) -> str:
    """The WMRL loss aggregation for ``args``, or a :class:`ConfigError` naming each TRL option
    the trainer cannot honour and what to set instead.

    :param n_reward_funcs: how many ``reward_funcs`` the real reward sums; ``None`` for the plugin
        route (one real reward, the environment's).
    :param trainer_kwargs: the other ``GRPOTrainer`` arguments (``environment_factory`` ...)."""
    trainer_kwargs = trainer_kwargs or {}
    problems = []
    if args.loss_type not in LOSS_AGGREGATION:
        problems.append(
            f"loss_type={args.loss_type!r}: use 'grpo' (per-sequence mean) or 'dapo' (global token mean); "
            "the others have no exact WMRL fused-loss counterpart"
        )
    if is_off_policy(args) and args.beta != 0.0:
        problems.append(
            f"beta={args.beta} with off-policy passes (num_iterations={args.num_iterations}): the exact multi-term "
            "loss would add TRL's KL term once per loss term; set beta=0.0 or num_iterations=1"
        )
    if args.scale_rewards == "batch":
        problems.append("scale_rewards='batch': WMRL normalises within groups; use 'group' or 'none'")
    if args.multi_objective_aggregation != "sum_then_normalize":
        problems.append(
            f"multi_objective_aggregation={args.multi_objective_aggregation!r}: WMRL calibrates and fuses one real "
            "reward per completion, the reward_weights-weighted sum of the reward functions; use 'sum_then_normalize'"
        )
    if n_reward_funcs is None and args.reward_weights is not None:
        problems.append(
            f"reward_weights={args.reward_weights}: the plugin route has one real reward, the environment's; "
            "weigh inside the reward extractor, or pass TRL reward_funcs instead of environment= and reward="
        )
    if n_reward_funcs is not None and args.reward_weights is not None and len(args.reward_weights) != n_reward_funcs:
        problems.append(
            f"reward_weights has {len(args.reward_weights)} weights for {n_reward_funcs} reward_funcs: give one "
            "weight per reward function (the world model takes none)"
        )
    if trainer_kwargs.get("environment_factory") is not None:
        problems.append(
            "environment_factory: WMRL runs the real reward on the anchor rows only and cannot hand it their "
            "per-rollout environments; score the completions with reward_funcs (and world_model) instead"
        )
    if n_reward_funcs is None and trainer_kwargs.get("reward_processing_classes") is not None:
        problems.append("reward_processing_classes: the plugin route has no reward models; drop it or use reward_funcs")
    if problems:
        raise ConfigError("WMRLGRPOTrainer cannot honour: " + "; ".join(problems))
    return LOSS_AGGREGATION[args.loss_type]


def wmrl_settings(wmrl: TrainConfig | Mapping[str, Any] | None, *, seed: int) -> TrainConfig:
    """The WMRL configuration the trainer uses: a copy of ``wmrl``, or WMRL's defaults with the
    dotted overrides ``wmrl`` maps (e.g. ``{"anchors.fraction": 0.25}``) and, unless they set it,
    ``seed`` (TRL's ``args.seed``) for the anchor draw."""
    if isinstance(wmrl, TrainConfig):
        return copy.deepcopy(wmrl)  # the caller's config stays as it was
    from wmrl_core.config import load_config

    dotted = {  # placeholders: with TRL, the policy is TRL's model and the components are passed in
        "environment.name": "trl",
        "policy.name": "trl-model",
        "world_model.name": "trl-world-model",
        "seed": seed,
        **(wmrl or {}),
    }
    return load_config(None, [f"{key}={value}" for key, value in dotted.items()])

"""Making the four components of a run from its config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pluggy

from wmrl_core import checkers
from wmrl_core.config import TrainConfig
from wmrl_core.registry import Registry

__all__ = ["Components", "make_components"]


@dataclass
class Components:
    environment: Any
    policy: Any
    world_model: Any | None
    reward: Any
    reward_name: str

    def close(self) -> None:
        """Release what the components hold (containers, worker processes, engines)."""
        for obj in (self.world_model, self.policy, self.environment):
            close = getattr(obj, "close", None)
            if callable(close):
                close()


def make_components(cfg: TrainConfig, registry: Registry, pm: pluggy.PluginManager) -> Components:
    env = registry.environments.make(cfg.environment.name, **cfg.environment.kwargs)
    checkers.check_environment(env)
    policy = registry.policies.make(cfg.policy.name, env=env, **cfg.policy.kwargs)
    checkers.check_policy(policy)
    world_model = None
    if cfg.mode != "real" and cfg.world_model is not None:
        world_model = registry.world_models.make(cfg.world_model.name, env=env, **cfg.world_model.kwargs)
        checkers.check_world_model(world_model)
    reward_name = cfg.reward.name or pm.hook.wmrl_default_reward_extractor(environment_name=cfg.environment.name) or "score"
    reward = registry.reward_extractors.make(reward_name, env=env, **cfg.reward.kwargs)
    checkers.check_reward_extractor(reward)
    if cfg.distributed.backend == "ray":  # execution on Ray workers; the others keep the local instance
        from wmrl_core.distributed import RayExecutionPool

        d = cfg.distributed
        env = RayExecutionPool(cfg.environment.name, cfg.environment.kwargs, num_workers=d.num_workers,
                               address=d.address, worker_cpus=d.worker_cpus, local_env=env)
    return Components(env, policy, world_model, reward, reward_name)

"""Making the four components of a run from its config.

Every factory but the environment's is called with ``env=<the environment>``; a world-model
factory that has a parameter named ``policy`` also receives the run's policy (a world model
that shares the policy's model or inference engine). A factory that cannot take ``env``
fails with an error that names the component and the fix, before it is called.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import pluggy

from wmrl_core import checkers
from wmrl_core.config import TrainConfig
from wmrl_core.errors import ContractError
from wmrl_core.registry import ComponentTable, Registry

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


def _named_parameters(factory: Any) -> tuple[set[str], bool] | None:
    """(names of the factory's parameters, whether it also takes ``**kwargs``); ``None`` when
    its signature cannot be read (some builtins and C extensions)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    return (
        {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD},
        any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params),
    )


def make_with_env(table: ComponentTable, name: str, env: Any, kwargs: dict[str, Any], **injected: Any) -> Any:
    """``table.make(name, env=env, **kwargs)``, plus each ``injected`` argument that the factory
    declares by name. A factory that cannot take ``env`` is a contract error naming the fix."""
    spec = table.get(name)
    factory = spec.load()
    signature = _named_parameters(factory)
    names, takes_any = signature if signature is not None else (set(), True)
    if "env" not in names and not takes_any:
        where = (
            spec.entry_point if isinstance(spec.entry_point, str) else getattr(factory, "__qualname__", repr(factory))
        )
        raise ContractError(
            f"{table.kind} `{name}` (plugin {spec.plugin}): its factory {where} has no `env` parameter, but every "
            f"factory except the environment's is called as factory(env=<the environment>, **kwargs); add "
            f"`env=None` to its signature (README: The plugin API)"
        )
    # injected only where declared by name: a factory taking **kwargs is not assumed to want them
    extra = {k: v for k, v in injected.items() if k in names and k not in kwargs}
    return spec.make(env=env, **extra, **kwargs)


def make_components(cfg: TrainConfig, registry: Registry, pm: pluggy.PluginManager) -> Components:
    env = registry.environments.make(cfg.environment.name, **cfg.environment.kwargs)
    checkers.check_environment(env)
    policy = make_with_env(registry.policies, cfg.policy.name, env, cfg.policy.kwargs)
    checkers.check_policy(policy)
    world_model = None
    if cfg.mode != "real" and cfg.world_model is not None:
        world_model = make_with_env(
            registry.world_models, cfg.world_model.name, env, cfg.world_model.kwargs, policy=policy
        )
        checkers.check_world_model(world_model)
    reward_name = (
        cfg.reward.name or pm.hook.wmrl_default_reward_extractor(environment_name=cfg.environment.name) or "score"
    )
    reward = make_with_env(registry.reward_extractors, reward_name, env, cfg.reward.kwargs)
    checkers.check_reward_extractor(reward)
    if cfg.distributed.backend == "ray":  # execution on Ray workers; the others keep the local instance
        from wmrl_core.distributed import RayExecutionPool

        d = cfg.distributed
        env = RayExecutionPool(
            cfg.environment.name,
            cfg.environment.kwargs,
            num_workers=d.num_workers,
            address=d.address,
            worker_cpus=d.worker_cpus,
            local_env=env,
        )
    if cfg.environment.cache:  # outermost, so that only misses reach the workers
        from wmrl_core.execution_cache import CachedEnvironment, cache_namespace

        namespace = cache_namespace(cfg.environment.name, cfg.environment.kwargs)
        env = CachedEnvironment(env, cfg.environment.cache, namespace=namespace)
    return Components(env, policy, world_model, reward, reward_name)

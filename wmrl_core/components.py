"""Making the four components of a run from its config.

Every factory but the environment's is called with ``env=<the environment>``; a world-model
factory that has a parameter named ``policy`` also receives the run's policy (a world model
that shares the policy's model or inference engine). A factory that cannot take ``env``
fails with an error that names the component and the fix, before it is called; so does a
``kwargs`` key the factory has no parameter for (with its parameters and the closest name). A
factory that raises is named with its config section.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import pluggy

from wmrl_core import checkers
from wmrl_core.config import TrainConfig
from wmrl_core.errors import ComponentError, ConfigError, ContractError, WMRLError, close_match_hint
from wmrl_core.registry import ComponentTable, Registry

__all__ = ["Components", "make_components", "make_scoring_components"]


@dataclass
class Components:
    environment: Any
    policy: Any  # None where a trainer brings its own (make_scoring_components)
    world_model: Any | None
    reward: Any
    reward_name: str
    names: dict[str, str] = field(default_factory=dict)
    """Config section (``environment``, ``policy``, ``world_model``) -> registered name."""
    execute_timeout_s: float | None = None
    """``environment.execute_timeout_s``: seconds one ``execute`` call may take (``None``: the
    environment's own ``timeout_s(n)``, else the default of :mod:`wmrl_core.waits`)."""
    heartbeat_s: float = 0.0
    """``heartbeat_s``: seconds between progress lines while a call runs (0: none)."""

    def who(self, section: str) -> str:
        """How messages name a component: ``"environment `synthetic-bandit`"``."""
        name = self.names.get(section)
        return f"{section.replace('_', ' ')} `{name}`" if name else section.replace("_", " ")

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


def _check_kwargs(table: ComponentTable, name: str, names: set[str], kwargs: dict[str, Any], section: str) -> None:
    """Every key of ``kwargs`` is a parameter of the factory (which takes no ``**kwargs``)."""
    accepted = sorted(names - {"env", "self"})
    for key in kwargs:
        if key not in names:
            raise ConfigError(
                f"{table.kind} `{name}` has no parameter `{key}` (set as {section}.kwargs.{key}).{close_match_hint(key, accepted)} "
                f"Its parameters: {', '.join(accepted) or 'none'}. Fix or remove {section}.kwargs.{key}"
            )


def _call_factory(table: ComponentTable, name: str, section: str, call: Any) -> Any:
    """``call()``; an exception from the factory becomes an error naming the component and its config."""
    try:
        return call()
    except WMRLError:
        raise
    except Exception as exc:
        raise ComponentError(
            f"{table.kind} `{name}` (plugin {table.get(name).plugin}) failed to start: {type(exc).__name__}: {exc}. "
            f"Check {section}.kwargs (`wmrl plugins` lists the components)"
        ) from exc


def make_component(table: ComponentTable, name: str, kwargs: dict[str, Any], section: str) -> Any:
    """A component whose factory takes no ``env`` (the environment): checked kwargs, named errors."""
    factory = table.get(name).load()
    signature = _named_parameters(factory)
    if signature is not None and not signature[1]:
        _check_kwargs(table, name, signature[0], kwargs, section)
    return _call_factory(table, name, section, lambda: table.make(name, **kwargs))


def make_with_env(
    table: ComponentTable, name: str, env: Any, kwargs: dict[str, Any], *, section: str | None = None, **injected: Any
) -> Any:
    """``table.make(name, env=env, **kwargs)``, plus each ``injected`` argument that the factory
    declares by name. A factory that cannot take ``env``, or has no parameter for a key of
    ``kwargs``, is an error naming the fix; ``section`` is the config key that names it."""
    section = section or table.kind
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
            f"`env=None` to its signature (docs/plugins.md: how factories are called)"
        )
    if not takes_any:
        _check_kwargs(table, name, names, kwargs, section)
    # injected only where declared by name: a factory taking **kwargs is not assumed to want them
    extra = {k: v for k, v in injected.items() if k in names and k not in kwargs}
    return _call_factory(table, name, section, lambda: spec.make(env=env, **extra, **kwargs))


def make_components(
    cfg: TrainConfig, registry: Registry, pm: pluggy.PluginManager, *, with_policy: bool = True
) -> Components:
    """The run's components; what was made before one fails to start is closed again.

    :param with_policy: ``False`` for a trainer that brings its own policy (TRL, verl): the
        policy is not made (``Components.policy`` is ``None``) and no world model receives one.
    """
    made: list[Any] = []
    try:
        return _make_components(cfg, registry, pm, made, with_policy)
    except BaseException:
        for obj in reversed(made):
            close = getattr(obj, "close", None)
            if callable(close):
                close()
        raise


def _make_components(
    cfg: TrainConfig, registry: Registry, pm: pluggy.PluginManager, made: list[Any], with_policy: bool
) -> Components:
    env = make_component(registry.environments, cfg.environment.name, cfg.environment.kwargs, "environment")
    made.append(env)
    checkers.check_environment(env)
    policy = None
    if with_policy:
        policy = make_with_env(registry.policies, cfg.policy.name, env, cfg.policy.kwargs, section="policy")
        made.append(policy)
        checkers.check_policy(policy)
    world_model = None
    if cfg.mode != "real" and cfg.world_model is not None:
        if not with_policy and (cfg.world_model.kwargs or {}).get("share_policy"):
            raise ConfigError(
                f"world_model.kwargs.share_policy=true: world model {cfg.world_model.name!r} would answer on the "
                "policy's engine, but here the trainer (TRL, verl) owns the policy and WMRL has none to share. "
                "Give the world model its own model (world_model.kwargs.model=...) and drop share_policy"
            )
        world_model = make_with_env(
            registry.world_models,
            cfg.world_model.name,
            env,
            cfg.world_model.kwargs,
            section="world_model",
            policy=policy,
        )
        made.append(world_model)
        checkers.check_world_model(world_model)
    reward_name = (
        cfg.reward.name or pm.hook.wmrl_default_reward_extractor(environment_name=cfg.environment.name) or "score"
    )
    reward = make_with_env(registry.reward_extractors, reward_name, env, cfg.reward.kwargs, section="reward")
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
    names = {"environment": cfg.environment.name, "policy": cfg.policy.name, "reward": reward_name}
    if world_model is not None and cfg.world_model is not None:
        names["world_model"] = cfg.world_model.name
    return Components(
        env, policy, world_model, reward, reward_name, names, cfg.environment.execute_timeout_s, cfg.heartbeat_s
    )


def make_scoring_components(cfg: TrainConfig, plugin_manager: pluggy.PluginManager | None = None) -> Components:
    """What a trainer with its own policy needs of ``cfg``: the environment (behind Ray workers
    and the execution cache as configured), the world model and the reward extractor, made from
    the registered plugins as ``wmrl train`` makes them; ``policy`` is ``None``."""
    from wmrl_core.plugins import build_registry, get_plugin_manager

    pm = plugin_manager or get_plugin_manager()
    return make_components(cfg, build_registry(pm), pm, with_policy=False)

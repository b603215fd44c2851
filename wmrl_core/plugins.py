"""Building the plugin manager and the registry (tox's factory order, never at import time).

Order: hook specs -> blocked plugins -> entry-point group ``wmrl`` -> WMRL's built-in
plugins -> ``check_pending()``. Built-ins are registered through the same hooks as any
installed plugin.
"""

from __future__ import annotations

import importlib
import os
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata

import pluggy

from wmrl_core import hookspecs
from wmrl_core.contracts import COMPONENT_KINDS
from wmrl_core.errors import ContractError, WMRLError, close_match_hint
from wmrl_core.registry import Registry

__all__ = ["ENTRY_POINT_GROUP", "BUILTIN_PLUGINS", "PluginInfo", "get_plugin_manager", "build_registry"]

ENTRY_POINT_GROUP = "wmrl"
BUILTIN_PLUGINS = (
    "wmrl_core.builtin_rewards",
    "wmrl_core.experiments.noise",
    "wmrl_core.fusion.plugin",
    "wmrl_core.synthetic.plugin",
    "wmrl_core.vowels",
)

_REGISTRATION_HOOKS = {k.hook: k.table for k in COMPONENT_KINDS} | {
    "wmrl_register_experiments": "experiments",
    "wmrl_register_fusers": "fusers",
    "wmrl_register_gpu_checks": "gpu_checks",
    "wmrl_register_compute_suites": "compute_suites",
}


def get_plugin_manager(
    *, blocked: Iterable[str] = (), entry_points: bool = True, extra_plugins: Iterable[object] = ()
) -> pluggy.PluginManager:
    """A fresh plugin manager.

    :param blocked: plugin names (entry-point names or built-in module names) not to load.
    :param entry_points: load installed plugins from the ``wmrl`` entry-point group.
    :param extra_plugins: plugin objects to register as well (tests, notebooks).
    """
    pm = pluggy.PluginManager("wmrl")
    pm.add_hookspecs(hookspecs)
    env_blocked = [n.strip() for n in os.environ.get("WMRL_DISABLE_PLUGINS", "").split(",") if n.strip()]
    for name in [*blocked, *env_blocked]:
        pm.set_blocked(name)
    if entry_points:
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        except Exception as exc:
            raise WMRLError(_broken_plugin_message(pm, exc)) from exc
    for module_name in BUILTIN_PLUGINS:
        if not pm.is_blocked(module_name) and pm.get_plugin(module_name) is None:
            pm.register(importlib.import_module(module_name), name=module_name)
    for plugin in extra_plugins:
        if pm.is_registered(plugin):  # an installed plugin's module given again: it is loaded already
            continue
        name = getattr(plugin, "__name__", None) or type(plugin).__name__  # how messages name it
        if pm.get_plugin(name) is not None and not isinstance(plugin, types.ModuleType):
            name = f"{name}-{id(plugin):x}"  # a second object of one plugin class
        try:
            pm.register(plugin, name=name)
        except ValueError as exc:  # pluggy: the name is taken by another plugin object
            raise WMRLError(
                f"extra plugin `{name}` cannot be registered: {_first_line(exc)}. A plugin installed under the "
                f"same name is loaded already: leave it out of extra_plugins, or pass entry_points=False"
            ) from None
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise ContractError(_unknown_hook_message(pm, exc)) from None
    return pm


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).strip()
    return (text.splitlines() or [""])[0][:limit]


def _unknown_hook_message(pm: pluggy.PluginManager, exc: pluggy.PluginValidationError) -> str:
    """One line for a plugin that implements a hook WMRL does not have (a misspelt name): the
    plugin, the hook, the closest WMRL hook and how to run without the plugin."""
    known = [name for name in vars(pm.hook) if not name.startswith("_") and getattr(pm.hook, name).has_spec()]
    unknown = [
        name
        for name in vars(pm.hook)
        if not name.startswith("_")
        and not getattr(pm.hook, name).has_spec()
        and any(impl.plugin is exc.plugin for impl in getattr(pm.hook, name).get_hookimpls())
    ]
    name = pm.get_name(exc.plugin) or ""
    blockable = {pm.get_name(p) for p, _ in pm.list_plugin_distinfo()} | set(BUILTIN_PLUGINS)
    if name in blockable:  # installed (entry point) or built in: the environment variable skips it
        where, skip = f"plugin `{name}`", f"run without the plugin: WMRL_DISABLE_PLUGINS={name}"
    else:  # an object given to get_plugin_manager(extra_plugins=...)
        where = f"plugin `{getattr(exc.plugin, '__name__', type(exc.plugin).__name__)}` (given in extra_plugins)"
        skip = "leave it out of extra_plugins"
    hook = unknown[0] if unknown else "?"
    return (
        f"{where} implements `{hook}`, which is not a WMRL hook (wmrl_core.hookspecs lists them)."
        f"{close_match_hint(hook, known)} Rename it in the plugin, or {skip}"
    )


def _broken_plugin_message(pm: pluggy.PluginManager, exc: Exception) -> str:
    loaded = {pm.get_name(p) for p in pm.get_plugins()}
    candidates = [
        ep
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
        if ep.name not in loaded and not pm.is_blocked(ep.name)
    ]
    culprit = candidates[0] if candidates else None
    where = (
        f"plugin `{culprit.name}` ({culprit.value}, from {culprit.dist.name if culprit.dist else '?'})"
        if culprit
        else "a plugin"
    )
    name = culprit.name if culprit else "NAME"
    return (
        f"{where} failed to load: {type(exc).__name__}: {exc}. Fix or reinstall it, or skip it with "
        f"WMRL_DISABLE_PLUGINS={name}"
    )


def build_registry(pm: pluggy.PluginManager | None = None) -> Registry:
    """Call every registration hook, recording which plugin registered each component."""
    pm = pm or get_plugin_manager()
    registry = Registry()
    for hook_name, table_name in _REGISTRATION_HOOKS.items():
        table = getattr(registry, table_name)
        # pluggy calls the last registered first; keep registration order stable instead
        for impl in reversed(getattr(pm.hook, hook_name).get_hookimpls()):
            registry._set_plugin(impl.plugin_name)
            impl.function(**{arg: table for arg in impl.argnames})
    registry._set_plugin("?")
    return registry


@dataclass
class PluginInfo:
    name: str
    version: str
    module: str
    components: dict[str, list[str]] = field(default_factory=dict)


def describe_plugins(pm: pluggy.PluginManager, registry: Registry) -> list[PluginInfo]:
    """What is installed: each plugin with its version and the components it registered."""
    dists = {pm.get_name(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    try:
        own_version = metadata.version("wmrl")
    except metadata.PackageNotFoundError:
        own_version = "unknown"
    infos = []
    for plugin in pm.get_plugins():
        name = pm.get_name(plugin) or repr(plugin)  # registered plugins always have a name
        dist = dists.get(name)
        version = dist.version if dist is not None else own_version
        info = PluginInfo(name=name, version=version, module=getattr(plugin, "__name__", repr(plugin)))
        for kind, table in registry.listed_tables().items():
            names = [spec.name for spec in table if spec.plugin == name]
            if names:
                info.components[kind] = names
        infos.append(info)
    return sorted(infos, key=lambda i: i.name)

"""Named components, created from specs (gymnasium's ``register``/``make`` pattern).

Plugins fill a :class:`Registry` through the registration hooks; the engine makes
components by name. Unknown names fail with the list of known ones and the plugin that
provides each.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from wmrl_core.contracts import COMPONENT_KINDS
from wmrl_core.errors import UnknownComponentError, WMRLError

__all__ = ["ComponentSpec", "ComponentTable", "Registry", "KINDS"]

KINDS = tuple(k.kind for k in COMPONENT_KINDS)


@dataclass
class ComponentSpec:
    """How to build one named component.

    :param name: the name users write in configs.
    :param entry_point: ``"module:Attr"`` imported lazily, or a callable.
    :param kwargs: default keyword arguments, overridden by the config's ``kwargs``.
    :param plugin: the plugin that registered it (filled by the registry).
    :param description: one line shown by ``wmrl plugins``.
    """

    kind: str
    name: str
    entry_point: str | Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    plugin: str = "?"
    description: str = ""

    def load(self) -> Callable[..., Any]:
        if callable(self.entry_point):
            return self.entry_point
        module_name, _, attr = self.entry_point.partition(":")
        if not attr:
            raise WMRLError(
                f"{self.kind} `{self.name}` has entry point {self.entry_point!r}; "
                "write it as 'package.module:Attribute'"
            )
        module = importlib.import_module(module_name)
        try:
            return getattr(module, attr)
        except AttributeError as exc:
            raise WMRLError(
                f"{self.kind} `{self.name}`: module {module_name!r} has no attribute {attr!r} "
                f"(plugin {self.plugin}); fix the plugin's registration"
            ) from exc

    def make(self, **overrides: Any) -> Any:
        kwargs = copy.deepcopy(self.kwargs)
        kwargs.update(overrides)
        return self.load()(**kwargs)


class ComponentTable:
    """The specs of one kind of component; what the registration hooks receive."""

    def __init__(self, kind: str):
        self.kind = kind
        self._specs: dict[str, ComponentSpec] = {}
        self._current_plugin = "?"

    def add(
        self,
        name: str,
        entry_point: str | Callable[..., Any],
        *,
        description: str = "",
        **kwargs: Any,
    ) -> ComponentSpec:
        """Register ``name``. Registering a name twice is an error: two plugins would fight."""
        if not name or not isinstance(name, str):
            raise WMRLError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if name in self._specs:
            other = self._specs[name].plugin
            raise WMRLError(
                f"{self.kind} `{name}` is registered twice (by {other} and {self._current_plugin}); "
                "rename one of them or uninstall one plugin"
            )
        spec = ComponentSpec(self.kind, name, entry_point, dict(kwargs), self._current_plugin, description)
        self._specs[name] = spec
        return spec

    def get(self, name: str) -> ComponentSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownComponentError(self.kind, name, {n: s.plugin for n, s in self._specs.items()}) from None

    def make(self, name: str, **overrides: Any) -> Any:
        return self.get(name).make(**overrides)

    def for_environment(self, environment: str) -> list[ComponentSpec]:
        """Task sets declared for ``environment`` (their spec kwarg ``environment``)."""
        return [s for s in self._specs.values() if s.kwargs.get("environment") == environment]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[ComponentSpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.name))

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        return sorted(self._specs)


class Registry:
    """All component tables, filled by the plugins' registration hooks."""

    environments: ComponentTable
    tasks: ComponentTable
    policies: ComponentTable
    world_models: ComponentTable
    reward_extractors: ComponentTable
    experiments: ComponentTable
    """What ``wmrl experiment NAME`` runs; not a component of a run, so not in :meth:`tables`."""

    def __init__(self) -> None:
        for k in COMPONENT_KINDS:  # one table per kind, named as wmrl_core.contracts says
            setattr(self, k.table, ComponentTable(k.kind))
        self.experiments = ComponentTable("experiment")

    def tables(self) -> dict[str, ComponentTable]:
        """Kind name -> its table, in the order of ``COMPONENT_KINDS``."""
        return {k.kind: getattr(self, k.table) for k in COMPONENT_KINDS}

    def _set_plugin(self, plugin_name: str) -> None:
        for table in (*self.tables().values(), self.experiments):
            table._current_plugin = plugin_name

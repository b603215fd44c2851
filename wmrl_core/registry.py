"""Named components, created from specs (gymnasium's ``register``/``make`` pattern).

Plugins fill a :class:`Registry` through the registration hooks; the engine makes
components by name. Unknown names fail with the list of known ones and the plugin that
provides each. Fusion methods (:class:`FuserTable`) are registered the same way, each with its
settings dataclass, which ``fusion.kwargs`` fills.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from wmrl_core.contracts import COMPONENT_KINDS
from wmrl_core.errors import UnknownComponentError, WMRLError

__all__ = ["ComponentSpec", "ComponentTable", "FuserSpec", "FuserTable", "NoSettings", "Registry", "KINDS"]

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
        return _load(self.entry_point, f"{self.kind} `{self.name}`", self.plugin)

    def make(self, **overrides: Any) -> Any:
        kwargs = copy.deepcopy(self.kwargs)
        kwargs.update(overrides)
        return self.load()(**kwargs)


def _load(entry_point: Any, what: str, plugin: str) -> Any:
    """``entry_point`` itself, or the attribute that ``"module:Attr"`` names, imported now."""
    if not isinstance(entry_point, str):
        return entry_point
    module_name, _, attr = entry_point.partition(":")
    if not attr:
        raise WMRLError(f"{what} has entry point {entry_point!r}; write it as 'package.module:Attribute'")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise WMRLError(
            f"{what}: module {module_name!r} has no attribute {attr!r} (plugin {plugin}); fix the plugin's registration"
        ) from exc


Spec = TypeVar("Spec", "ComponentSpec", "FuserSpec")


class _SpecTable(Generic[Spec]):
    """Named specs of one kind, each registered once; unknown names fail with the known ones."""

    def __init__(self, kind: str):
        self.kind = kind
        self._specs: dict[str, Spec] = {}
        self._current_plugin = "?"

    def _register(self, name: str, make: Callable[[], Spec]) -> Spec:
        """Register ``name``. Registering a name twice is an error: two plugins would fight."""
        if not name or not isinstance(name, str):
            raise WMRLError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if name in self._specs:
            other = self._specs[name].plugin
            raise WMRLError(
                f"{self.kind} `{name}` is registered twice (by {other} and {self._current_plugin}); "
                "rename one of them or uninstall one plugin"
            )
        self._specs[name] = spec = make()
        return spec

    def get(self, name: str) -> Spec:
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownComponentError(self.kind, name, {n: s.plugin for n, s in self._specs.items()}) from None

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[Spec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.name))

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        return sorted(self._specs)


class ComponentTable(_SpecTable[ComponentSpec]):
    """The specs of one kind of component; what the registration hooks receive."""

    def add(
        self,
        name: str,
        entry_point: str | Callable[..., Any],
        *,
        description: str = "",
        **kwargs: Any,
    ) -> ComponentSpec:
        """Register ``name`` (once: a second registration is an error naming both plugins)."""
        return self._register(
            name, lambda: ComponentSpec(self.kind, name, entry_point, dict(kwargs), self._current_plugin, description)
        )

    def make(self, name: str, **overrides: Any) -> Any:
        return self.get(name).make(**overrides)

    def for_environment(self, environment: str) -> list[ComponentSpec]:
        """Task sets declared for ``environment`` (their spec kwarg ``environment``)."""
        return [s for s in self._specs.values() if s.kwargs.get("environment") == environment]


@dataclass
class NoSettings:
    """The settings of a fusion method that has none: its ``fusion.kwargs`` must be empty."""


@dataclass
class FuserSpec:
    """How to build one fusion method (``fusion.method``).

    :param name: the name users write as ``fusion.method``.
    :param entry_point: ``"module:Factory"`` imported lazily, or a callable; called with one
        positional argument, the method's settings (an instance of ``settings``), it returns a
        fresh :class:`~wmrl_core.fusion.base.Fuser`.
    :param settings: the dataclass of the method's settings (``"module:Attr"`` or the class), built
        from ``fusion.kwargs``; its fields carry their help as ``metadata["help"]`` (and their
        vocabulary as ``metadata["choices"]``), and its ``__post_init__`` raises ``ValueError``
        for values out of range.
    :param description: one line for ``wmrl train --help``, ``wmrl plugins`` and the docs.
    :param needs_anchors_every_step: the estimator is undefined on a step without anchor groups.
    :param plugin: the plugin that registered it (filled by the registry).
    """

    name: str
    entry_point: str | Callable[[Any], Any]
    settings: str | type = NoSettings
    description: str = ""
    needs_anchors_every_step: bool = False
    plugin: str = "?"
    kind = "fusion method"

    def load(self) -> Callable[[Any], Any]:
        return _load(self.entry_point, f"{self.kind} `{self.name}`", self.plugin)

    def settings_class(self) -> type:
        """The settings dataclass, imported now if it was registered as ``"module:Attr"``."""
        cls = _load(self.settings, f"{self.kind} `{self.name}`'s settings", self.plugin)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise WMRLError(
                f"{self.kind} `{self.name}` registered settings={cls!r}, which is not a dataclass (plugin "
                f"{self.plugin}); register its settings as a @dataclass (NoSettings when it has none)"
            )
        return cls

    def make(self, settings: Any) -> Any:
        """A fresh fuser configured by ``settings`` (an instance of :meth:`settings_class`)."""
        return self.load()(settings)


class FuserTable(_SpecTable[FuserSpec]):
    """The fusion methods; what ``wmrl_register_fusers`` receives."""

    def __init__(self) -> None:
        super().__init__(FuserSpec.kind)

    def add(
        self,
        name: str,
        entry_point: str | Callable[[Any], Any],
        *,
        settings: str | type = NoSettings,
        description: str = "",
        needs_anchors_every_step: bool = False,
    ) -> FuserSpec:
        """Register the fusion method ``name`` (once: a second registration is an error naming both plugins)."""
        return self._register(
            name,
            lambda: FuserSpec(name, entry_point, settings, description, needs_anchors_every_step, self._current_plugin),
        )


class Registry:
    """All component tables, filled by the plugins' registration hooks."""

    environments: ComponentTable
    tasks: ComponentTable
    policies: ComponentTable
    world_models: ComponentTable
    reward_extractors: ComponentTable
    experiments: ComponentTable
    """What ``wmrl experiment NAME`` runs; not a component of a run, so not in :meth:`tables`."""
    gpu_checks: ComponentTable
    """The checks ``benchmarks/gpu_check.py`` runs on a machine with a GPU (``"module:function"``)."""
    compute_suites: ComponentTable
    """The domains of the compute-to-target benchmark (``"module:SUITE"``, a dict)."""
    fusers: FuserTable
    """The fusion methods (``fusion.method``): built by the engine, not by the components' factories,
    so not in :meth:`tables` either."""

    def __init__(self) -> None:
        for k in COMPONENT_KINDS:  # one table per kind, named as wmrl_core.contracts says
            setattr(self, k.table, ComponentTable(k.kind))
        self.experiments = ComponentTable("experiment")
        self.gpu_checks = ComponentTable("GPU check")
        self.compute_suites = ComponentTable("compute-to-target suite")
        self.fusers = FuserTable()

    def tables(self) -> dict[str, ComponentTable]:
        """Kind name -> its table, in the order of ``COMPONENT_KINDS``."""
        return {k.kind: getattr(self, k.table) for k in COMPONENT_KINDS}

    def listed_tables(self) -> dict[str, ComponentTable | FuserTable]:
        """Kind name -> its table, for ``wmrl plugins``: the components', the experiments' and the
        fusion methods'."""
        return {
            **self.tables(),
            "experiment": self.experiments,
            FuserSpec.kind: self.fusers,
            "GPU check": self.gpu_checks,
            "compute-to-target suite": self.compute_suites,
        }

    def _set_plugin(self, plugin_name: str) -> None:
        for table in self.listed_tables().values():
            table._current_plugin = plugin_name

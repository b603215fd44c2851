"""The sandbox backends, by name: what ``sandbox=NAME`` (``--sandbox NAME``) may say.

Plugins register backends through the ``wmrl_register_sandboxes`` hook, as fusion methods are
registered through ``wmrl_register_fusers``: each calls ``table.add(name, "pkg.module:Factory",
isolated=..., ...)`` with what the backend can do; the pool, the environment and the command
line ask the registration, never the name. The AutoResearch plugin registers ``docker`` and
``local-unsafe`` (:mod:`wmrl_autoresearch.plugin`); a package of its own adds another (a
Kubernetes pod, a remote sandbox service) without editing this plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wmrl_autoresearch.sandbox.backend import ProviderSettings, SandboxProvider
from wmrl_core.errors import ContractError, WMRLError, close_match_hint
from wmrl_core.registry import _load, _SpecTable

if TYPE_CHECKING:
    import pluggy

__all__ = ["CHARGES", "SandboxSpec", "SandboxTable", "UnknownSandboxError", "sandbox_table"]

CHARGES = ("cpu_s", "wall_s")
"""What a backend's runs are charged: the script's measured CPU seconds, or its wall seconds."""


class UnknownSandboxError(WMRLError, ValueError):
    """``sandbox=NAME`` names no registered backend; the message lists the known ones."""


@dataclass
class SandboxSpec:
    """How to make one sandbox backend, and what it can do.

    :param name: what users write as ``sandbox=NAME``; recorded as each run's ``backend``.
    :param entry_point: ``"module:Factory"`` imported lazily, or a callable; called once per pool as
        ``factory(settings)`` with :class:`~.backend.ProviderSettings`, it returns a
        :class:`~.backend.SandboxProvider`.
    :param isolated: the script cannot reach the host's files, network or other processes; a backend
        that is not says so loudly in its own factory, and the listings mark it NOT isolated.
    :param description: one line for ``--help`` and the listings.
    :param image: the image its sandboxes start from by default; ``None``: it takes no image.
    :param uses_gpus: the pool shares the host's NVIDIA GPUs out among its sandboxes (``gpus=``).
    :param warm_starts: its sandboxes can be started ahead of need (``warm=N``); else ``warm`` is ignored.
    :param charges: ``"cpu_s"``: its runs report the script's CPU seconds (``resources["cpu_s"]``),
        which are charged; ``"wall_s"``: they cannot, and their wall seconds are charged.
    :param plugin: the plugin that registered it (filled by the table).
    """

    name: str
    entry_point: str | Callable[[ProviderSettings], Any]
    isolated: bool
    description: str = ""
    image: str | None = None
    uses_gpus: bool = False
    warm_starts: bool = False
    charges: str = "cpu_s"
    plugin: str = "?"
    kind = "sandbox backend"

    def make(self, settings: ProviderSettings) -> SandboxProvider:
        """A provider for one pool; raises :class:`ContractError` when it lacks a method of the protocol."""
        provider = _load(self.entry_point, f"{self.kind} `{self.name}`", self.plugin)(settings)
        if not isinstance(provider, SandboxProvider):
            missing = [
                m for m in ("sandbox", "answers", "recover", "close") if not callable(getattr(provider, m, None))
            ]
            raise ContractError(
                f"{self.kind} `{self.name}` (plugin {self.plugin}) made a {type(provider).__name__}, which lacks "
                f"{', '.join(missing)} of wmrl_autoresearch.sandbox.backend.SandboxProvider; implement them "
                "(ProcessProvider gives the ones a backend without an engine does not need)"
            )
        return provider

    def summary(self) -> str:
        """``name (from plugin; NOT isolated; charges wall_s): description`` for listings and errors."""
        traits = [f"from {self.plugin}"] + ([] if self.isolated else ["NOT isolated"])
        traits += [f"charges {self.charges}"] if self.charges != "cpu_s" else []
        return f"{self.name} ({'; '.join(traits)})" + (f": {self.description}" if self.description else "")


class SandboxTable(_SpecTable[SandboxSpec]):  # type: ignore[type-var]
    """The sandbox backends; what ``wmrl_register_sandboxes`` receives."""

    def __init__(self) -> None:
        super().__init__(SandboxSpec.kind)

    def add(
        self,
        name: str,
        entry_point: str | Callable[[ProviderSettings], Any],
        *,
        isolated: bool,
        description: str = "",
        image: str | None = None,
        uses_gpus: bool = False,
        warm_starts: bool = False,
        charges: str = "cpu_s",
    ) -> SandboxSpec:
        """Register the backend ``name`` (once: a second registration is an error naming both plugins)."""
        if not isinstance(isolated, bool):
            raise WMRLError(f"{self.kind} `{name}`: isolated must be True or False, got {isolated!r}")
        if charges not in CHARGES:
            raise WMRLError(f"{self.kind} `{name}`: charges={charges!r}; use one of {', '.join(CHARGES)}")
        return self._register(
            name,
            lambda: SandboxSpec(
                name, entry_point, isolated, description, image, uses_gpus, warm_starts, charges, self._current_plugin
            ),
        )

    def get(self, name: str) -> SandboxSpec:
        """The backend ``name``; an unknown name raises :class:`UnknownSandboxError` with the known ones."""
        if name in self._specs:
            return self._specs[name]
        known = "; ".join(spec.summary() for spec in self) or "none"
        raise UnknownSandboxError(
            f"sandbox={name!r} is unknown.{close_match_hint(str(name), self.names())} Known sandbox backends: "
            f"{known}. A plugin adds one through the wmrl_register_sandboxes hook"
        )


def sandbox_table(pm: pluggy.PluginManager | None = None) -> SandboxTable:
    """Every backend registered through ``wmrl_register_sandboxes``, in plugin registration order.

    :param pm: the plugin manager (default: ``wmrl_core.plugins.get_plugin_manager()``, the installed plugins).
    """
    if pm is None:
        from wmrl_core.plugins import get_plugin_manager

        pm = get_plugin_manager()
    table = SandboxTable()
    # pluggy calls the last registered first; keep registration order stable instead (as build_registry does)
    for impl in reversed(pm.hook.wmrl_register_sandboxes.get_hookimpls()):
        table._current_plugin = impl.plugin_name
        impl.function(**{arg: table for arg in impl.argnames})
    table._current_plugin = "?"
    return table

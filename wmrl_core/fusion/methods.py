"""Fusion methods by name, from the registry: config validation, the engine, the CLI and the docs
read the methods the plugins register (``wmrl_register_fusers``; WMRL's own in
:mod:`wmrl_core.fusion.plugin`), never a list kept here.

A new method is one module with a class that follows :class:`~wmrl_core.fusion.base.Fuser`, a
settings dataclass and a factory, and one ``table.add`` in a plugin's ``wmrl_register_fusers``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from wmrl_core.errors import ConfigError, close_match_hint

if TYPE_CHECKING:
    import pluggy

    from wmrl_core.fusion.base import Fuser
    from wmrl_core.registry import FuserSpec, FuserTable

__all__ = ["registered_fusers", "fusion_method_spec", "fuser_settings", "build_fuser"]

KWARGS_KEY = "fusion.kwargs"


def registered_fusers(plugin_manager: pluggy.PluginManager | None = None) -> FuserTable:
    """The fusion methods that the plugins of ``plugin_manager`` register (default: the installed
    plugins and WMRL's own), collected now: never when ``wmrl_core`` is imported."""
    from wmrl_core.plugins import build_registry, get_plugin_manager

    return build_registry(plugin_manager or get_plugin_manager()).fusers


def fusion_method_spec(method: str, fusers: FuserTable) -> FuserSpec:
    """The registration of ``fusion.method=method``.

    :raises ConfigError: naming the closest registered method and all of them.
    """
    if method in fusers:
        return fusers.get(method)
    close = difflib.get_close_matches(method, fusers.names(), n=1)
    raise ConfigError(
        f"fusion.method={method!r} is unknown{f' (did you mean {close[0]}?)' if close else ''}; use one of "
        f"{', '.join(fusers.names()) or 'none'} (the methods the installed plugins register: `wmrl plugins` "
        "lists them), or install the plugin that provides it"
    )


def fuser_settings(spec: FuserSpec, kwargs: Mapping[str, Any]) -> Any:
    """The settings of the fusion method ``spec`` from ``fusion.kwargs``: its settings dataclass
    with ``kwargs`` over the defaults, type-checked through OmegaConf as the rest of the config is.

    :raises ConfigError: for a key the method does not have (with the closest one and all of them),
        a value of the wrong type, or one its ``__post_init__`` refuses, naming ``fusion.kwargs.KEY``.
    """
    from wmrl_core.config import check_choices

    cls = spec.settings_class()
    known = [f.name for f in dataclasses.fields(cls)]
    for key in kwargs:
        if key not in known:
            raise ConfigError(
                f"{KWARGS_KEY}.{key} is not a setting of fusion.method={spec.name}."
                f"{close_match_hint(str(key), known)} Its settings: {', '.join(known) or 'none (leave fusion.kwargs empty)'}"
            )
    try:
        merged = OmegaConf.merge(OmegaConf.structured(cls), dict(kwargs))
        values = cast(dict[str, Any], OmegaConf.to_container(merged))
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        raise ConfigError(
            f"invalid {KWARGS_KEY}.{key} for fusion.method={spec.name}: {str(exc).splitlines()[0]}"
        ) from None
    try:
        settings = cls(**values)
    except ValueError as exc:
        # the settings' own checks name their field first: make it the key a user writes
        message = str(exc)
        if message.split(" ", 1)[0] in known:
            raise ConfigError(f"{KWARGS_KEY}.{message} (fusion.method={spec.name})") from None
        raise ConfigError(f"{KWARGS_KEY} of fusion.method={spec.name}: {message}") from None
    check_choices(settings, f"{KWARGS_KEY}.")
    return settings


def build_fuser(method: str, section: Any, fusers: FuserTable | None = None) -> Fuser:
    """A fresh fuser of ``method`` configured by the ``fusion`` section ``section``.

    ``section.kwargs`` are ``section.method``'s settings, so they configure ``method`` only when it is
    ``section.method``; another method (``pooled``, which modes ``real`` and ``world_model`` train
    with) gets its defaults.

    :param fusers: the registered methods (default: :func:`registered_fusers`).
    """
    spec = fusion_method_spec(method, fusers if fusers is not None else registered_fusers())
    kwargs = section.kwargs if method == section.method else {}
    return spec.make(fuser_settings(spec, kwargs))

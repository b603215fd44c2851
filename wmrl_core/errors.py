"""One small exception hierarchy; every message names the problem and the fix."""

from __future__ import annotations

import difflib


class WMRLError(Exception):
    """Base class of every error WMRL raises on purpose."""


class ConfigError(WMRLError, ValueError):
    """A configuration value is missing, unknown or of the wrong type."""


def plural(kind: str) -> str:
    """English plural of a component kind (``policy`` -> ``policies``, ``world_model`` -> ``world_models``)."""
    if kind.endswith("y") and kind[-2:-1] not in ("a", "e", "o", "u"):
        return kind[:-1] + "ies"
    return kind + "s"


def close_match_hint(name: str, candidates: list[str]) -> str:
    """`` Did you mean `X`?`` for the closest of ``candidates`` (difflib), else ``""``."""
    close = difflib.get_close_matches(name, candidates, n=1)
    return f" Did you mean `{close[0]}`?" if close else ""


class UnknownComponentError(WMRLError, KeyError):
    """A component name is not registered by any installed plugin."""

    def __init__(self, kind: str, name: str, known: dict[str, str]):
        self.kind, self.name, self.known = kind, name, known
        hint = close_match_hint(name, list(known))
        listing = ", ".join(f"{n} (from {p})" for n, p in sorted(known.items())) or "none"
        super().__init__(
            f"No {kind} named `{name}`.{hint} Known {plural(kind)}: {listing}. "
            f"Install the plugin that provides it (`wmrl plugins` lists what is installed)."
        )

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class ContractError(WMRLError, TypeError):
    """A plugin component does not honour the interface documented in `wmrl_core.hookspecs`."""


class DataError(WMRLError, ValueError):
    """Data a component reads (a competition's files, a solution's predictions) is missing or
    malformed; the message names the file or value and what to change."""


class ComponentError(WMRLError, RuntimeError):
    """A component raised, or returned something the engine cannot use; the message names the
    component, the method and what to change."""


class TrainedOnNothingError(WMRLError, RuntimeError):
    """A run ended without a single usable reward: nothing reached the policy."""

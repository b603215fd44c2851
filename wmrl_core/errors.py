"""One small exception hierarchy; every message names the problem and the fix."""

from __future__ import annotations

import difflib


class WMRLError(Exception):
    """Base class of every error WMRL raises on purpose."""


class ConfigError(WMRLError, ValueError):
    """A configuration value is missing, unknown or of the wrong type."""


class UnknownComponentError(WMRLError, KeyError):
    """A component name is not registered by any installed plugin."""

    def __init__(self, kind: str, name: str, known: dict[str, str]):
        self.kind, self.name, self.known = kind, name, known
        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f" Did you mean `{close[0]}`?" if close else ""
        listing = ", ".join(f"{n} (from {p})" for n, p in sorted(known.items())) or "none"
        super().__init__(
            f"No {kind} named `{name}`.{hint} Known {kind}s: {listing}. "
            f"Install the plugin that provides it (`wmrl plugins` lists what is installed)."
        )

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class ContractError(WMRLError, TypeError):
    """A plugin component does not honour the interface documented in `wmrl_core.hookspecs`."""

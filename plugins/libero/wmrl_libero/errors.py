"""Errors of the LIBERO plugin; every message names the problem and the fix."""

from __future__ import annotations

from wmrl_core.errors import WMRLError

__all__ = ["LiberoSetupError", "AssetVerificationError"]


class LiberoSetupError(WMRLError, RuntimeError):
    """LIBERO, its assets, its config or the GL stack is missing or broken."""


class AssetVerificationError(LiberoSetupError):
    """Scene assets are missing or differ from the shipped hash manifest."""

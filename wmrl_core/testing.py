"""Helpers for plugin test suites.

Tests that need a real resource (Docker engine, the LIBERO simulator) call
:func:`require`: on a developer machine without the resource they skip with the reason;
under CI (``CI=true``) they fail, because there the resource must be installed.
"""

from __future__ import annotations

import os


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(available: bool, reason: str) -> None:
    """Skip (locally) or fail (CI) when a needed resource is missing."""
    import pytest

    if available:
        return
    if running_in_ci():
        pytest.fail(f"{reason} (CI=true: this resource must be installed by .ci/run)")
    pytest.skip(reason)

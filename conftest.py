"""Test-suite rules shared by the core and the plugin tests.

``python3 -m pytest -m "not slow"`` is the fast loop (under a minute); CI runs everything.
Core tests carry ``@pytest.mark.slow`` by hand. In the plugin folders, where tests are added
often, a test is marked ``slow`` automatically when it needs a real resource: it uses a Docker
fixture (``docker_ready``, ``docker_client``, ``pool``) or it, or one of its fixtures, calls
``wmrl_core.testing.require`` (how every test that needs Docker, the LIBERO simulator or a
model library declares it). A test that still takes long unmarked is listed at the end of the
run, so the fast loop stays fast.
"""

from __future__ import annotations

import inspect
import re

import pytest

SLOW_FIXTURES = frozenset({"docker_ready", "docker_client", "pool"})
UNMARKED_SLOW_S = 5.0  # an unmarked test slower than this is reported
_REQUIRE_CALL = re.compile(r"\brequire\(")
_slow_unmarked: list[tuple[str, float]] = []


def _calls_require(func) -> bool:
    try:
        return bool(_REQUIRE_CALL.search(inspect.getsource(func)))
    except (OSError, TypeError):  # built-in or generated callables have no source
        return False


def needs_real_resource(item: pytest.Item) -> bool:
    """Whether ``item`` uses a Docker fixture or calls ``require`` itself or in one of its fixtures."""
    names = set(getattr(item, "fixturenames", ()))
    if names & SLOW_FIXTURES:
        return True
    funcs = [getattr(item, "function", None)]
    fixture_info = getattr(item, "_fixtureinfo", None)
    if fixture_info is not None:
        funcs += [d.func for defs in fixture_info.name2fixturedefs.values() for d in defs]
    return any(f is not None and _calls_require(f) for f in funcs)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        in_plugins = item.path.is_relative_to(config.rootpath / "plugins")
        if in_plugins and "slow" not in item.keywords and needs_real_resource(item):
            item.add_marker(pytest.mark.slow)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.duration > UNMARKED_SLOW_S and "slow" not in report.keywords:
        _slow_unmarked.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter) -> None:
    if _slow_unmarked:
        terminalreporter.section(f"tests over {UNMARKED_SLOW_S:.0f} s without @pytest.mark.slow")
        for nodeid, seconds in sorted(_slow_unmarked, key=lambda x: -x[1]):
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")

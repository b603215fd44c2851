"""Test-suite rules shared by the core and the plugin tests.

``python3 -m pytest -m "not slow"`` is the fast loop (under a minute); CI runs everything, the
``serial`` tests alone and then the rest on two pytest-xdist workers (``docs/contributing.md``).
Core tests carry ``@pytest.mark.slow`` by hand. In the plugin folders, where tests are added
often, a test is marked ``slow`` automatically when it needs a real resource: it uses a Docker
fixture (``docker_ready``, ``docker_client``, ``pool``), or it or one of its fixtures calls
``wmrl_core.testing.require`` (how a test that needs Docker or the LIBERO simulator declares
it) or ``pytest.importorskip`` of a model library (transformers, peft, vllm). A test that still
takes long unmarked is listed at the end of the run, so the fast loop stays fast.
"""

from __future__ import annotations

import inspect
import re

import pytest

SLOW_FIXTURES = frozenset({"docker_ready", "docker_client", "pool"})
UNMARKED_SLOW_S = 5.0  # an unmarked test slower than this is reported
_REQUIRE_CALL = re.compile(r"\brequire\(")
# loading a model library (and building even a tiny model with it) takes seconds on 2 shared cores
_MODEL_LIBRARY = re.compile(r"importorskip\(\s*[\"'](transformers|peft|vllm)")
_MODULE_LEVEL_MODEL_LIBRARY = re.compile(
    r"^(\w+ = )?pytest\.importorskip\(\s*[\"'](transformers|peft|vllm)", re.MULTILINE
)
_slow_unmarked: list[tuple[str, float]] = []


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):  # built-in or generated callables have no source
        return ""


def _needs_resource(source: str) -> bool:
    return bool(_REQUIRE_CALL.search(source) or _MODEL_LIBRARY.search(source))


def needs_real_resource(item: pytest.Item) -> bool:
    """Whether ``item`` uses a Docker fixture, or it or one of its fixtures calls ``require`` or
    ``pytest.importorskip`` of a model library (also at module level)."""
    names = set(getattr(item, "fixturenames", ()))
    if names & SLOW_FIXTURES:
        return True
    module = getattr(item, "module", None)
    if module is not None and _MODULE_LEVEL_MODEL_LIBRARY.search(_source(module)):
        return True
    funcs = [getattr(item, "function", None)]
    fixture_info = getattr(item, "_fixtureinfo", None)
    if fixture_info is not None:
        funcs += [d.func for defs in fixture_info.name2fixturedefs.values() for d in defs]
    return any(f is not None and _needs_resource(_source(f)) for f in funcs)


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

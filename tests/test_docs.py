"""The plugin API stays documented: every hook, with its exact signature, in hookspecs and README."""

import inspect
from pathlib import Path

from wmrl_core import hookspecs

ROOT = Path(__file__).resolve().parents[1]
HOOKS = [name for name in dir(hookspecs) if name.startswith("wmrl_")]


def test_every_hook_has_a_docstring_with_params():
    for name in HOOKS:
        doc = inspect.getdoc(getattr(hookspecs, name))
        assert doc and len(doc) > 40, name
        for param in inspect.signature(getattr(hookspecs, name)).parameters:
            assert f":param {param}:" in doc, (name, param)


def test_every_hook_is_in_the_readme_with_its_signature():
    readme = (ROOT / "README.md").read_text()
    for name in HOOKS:
        params = ", ".join(inspect.signature(getattr(hookspecs, name)).parameters)
        assert f"{name}({params})" in readme, f"README.md lacks `{name}({params})`"


def test_readme_transfer_table_is_the_reports_table():
    """The LIBERO-Long table in the README is spliced from the report between two markers; a stale
    copy (the report regenerated, the README not) fails here. Fix: copy the report's table rows."""
    readme = (ROOT / "README.md").read_text()
    begin, end = "<!-- transfer_full table: begin -->", "<!-- transfer_full table: end -->"
    assert begin in readme and end in readme, "README.md lost the transfer_full table markers"
    spliced = readme.split(begin, 1)[1].split(end, 1)[0].strip().splitlines()
    report = (ROOT / "docs/results/libero/transfer_full.md").read_text().splitlines()
    table = [line for line in report if line.startswith("|")]
    assert spliced == table, "README.md's transfer_full table differs from docs/results/libero/transfer_full.md"

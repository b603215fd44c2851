"""The docs stay true: every hook, with its exact signature, in hookspecs and docs/plugins.md; every outcome
status in its table; the LIBERO transfer table spliced from its report; the README's test command is CI's."""

import inspect
import re
from pathlib import Path

import pytest

from wmrl_core import hookspecs
from wmrl_core.contracts import STATUSES

ROOT = Path(__file__).resolve().parents[1]
HOOKS = [name for name in dir(hookspecs) if name.startswith("wmrl_")]


def test_every_hook_has_a_docstring_with_params():
    for name in HOOKS:
        doc = inspect.getdoc(getattr(hookspecs, name))
        assert doc and len(doc) > 40, name
        for param in inspect.signature(getattr(hookspecs, name)).parameters:
            assert f":param {param}:" in doc, (name, param)


def test_every_hook_is_in_the_plugin_docs_with_its_signature():
    docs = (ROOT / "docs/plugins.md").read_text()
    for name in HOOKS:
        params = ", ".join(inspect.signature(getattr(hookspecs, name)).parameters)
        assert f"{name}({params})" in docs, f"docs/plugins.md lacks `{name}({params})`"


def test_every_optional_capability_is_in_the_hook_docs_and_the_plugin_docs():
    """The component interface is written once, as the protocols of ``wmrl_core.contracts`` that the
    engine checks with ``isinstance``; the prose in ``hookspecs.py`` and docs/plugins.md is tested
    against them, so a capability the engine uses cannot go undocumented."""
    from wmrl_core import contracts

    prose = inspect.getdoc(hookspecs) or ""
    docs = (ROOT / "docs/plugins.md").read_text()
    optional = [
        getattr(contracts, name)
        for name in contracts.__all__
        if isinstance(getattr(contracts, name), type)
        and getattr(getattr(contracts, name), "_is_runtime_protocol", False)
    ]
    assert len(optional) >= 10
    for protocol in optional:
        for member in contracts.required_methods(protocol) or protocol.__annotations__:
            assert f"{member}" in prose, f"hookspecs.py's docstring does not describe `{member}` ({protocol.__name__})"
            assert f"`{member}" in docs, f"docs/plugins.md does not describe `{member}` ({protocol.__name__})"


def test_every_outcome_status_is_in_the_plugin_docs_table():
    docs = (ROOT / "docs/plugins.md").read_text()
    for name, spec in STATUSES.items():
        row = re.search(rf"^\| `{name}` \| (yes|no)\b", docs, re.MULTILINE)
        assert row, f"docs/plugins.md's status table lacks `{name}`"
        assert (row.group(1) == "yes") == spec.rewarded, f"docs/plugins.md says `{name}` is rewarded: {row.group(1)}"
    listed = re.findall(r"^\| `([a-z_]+)` \| (?:yes|no)\b", docs, re.MULTILINE)
    assert sorted(listed) == sorted(STATUSES), "docs/plugins.md's status table lists statuses the code does not have"


def test_the_readme_test_command_is_the_one_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci/run").read_text()
    first_40 = "\n".join(readme.splitlines()[:40])
    command = re.search(r"^(python3 -m pytest.*?)\s+# the tests, what CI runs$", first_40, re.MULTILINE)
    assert command, "README.md: the test command (`# the tests, what CI runs`) left its first 40 lines"
    assert command.group(1) in ci.splitlines(), f".ci/run no longer runs the README's `{command.group(1)}`"
    for command in ("wmrl train configs/synthetic/wmrl.yaml", "wmrl train configs/autoresearch/quickstart.yaml"):
        assert command in first_40, f"README.md: `{command}` left its first 40 lines"
    assert len(readme.splitlines()) <= 150, "README.md is over 150 lines: move detail into docs/"


@pytest.mark.parametrize(
    "name, report",
    [
        ("transfer_full", "docs/results/libero/transfer_full.md"),
        ("transfer_resolving", "docs/results/libero/transfer_resolving/transfer_resolving.md"),
    ],
)
def test_transfer_docs_table_is_the_reports_table(name, report):
    """A LIBERO-Long table in the plugin's transfer page is spliced from its report between two
    markers; a stale copy (the report regenerated, the page not) fails here. Fix: copy the report's
    first table."""
    page = (ROOT / "plugins/libero/docs/transfer.md").read_text()
    begin, end = f"<!-- {name} table: begin -->", f"<!-- {name} table: end -->"
    assert begin in page and end in page, f"plugins/libero/docs/transfer.md lost the {name} table markers"
    spliced = page.split(begin, 1)[1].split(end, 1)[0].strip().splitlines()
    first_table = re.search(r"(?:^\|.*\n)+", (ROOT / report).read_text(), re.MULTILINE)
    assert first_table, f"{report} has no table"
    assert spliced == first_table.group(0).strip().splitlines(), (
        f"plugins/libero/docs/transfer.md's {name} table differs from {report}"
    )


def test_every_experiment_the_docs_name_is_registered():
    """A command the docs print as ``wmrl experiment NAME`` runs from the repository root: NAME is an
    installed plugin's experiment or a study of the checkout (``experiments/<study>/study.py``)."""
    from wmrl_core.experiments.studies import register_studies
    from wmrl_core.plugins import build_registry, get_plugin_manager

    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "docs/results/README.md"]
    pages += [*(ROOT / "plugins").glob("*/README.md"), *(ROOT / "plugins").glob("*/docs/*.md")]
    cited = {
        (page.relative_to(ROOT), name)
        for page in pages
        for name in re.findall(r"wmrl experiment ([a-z][a-z0-9-]*)", page.read_text())
    }
    pm = get_plugin_manager()
    register_studies(pm, ROOT)
    registered = set(build_registry(pm).experiments.names())
    missing = sorted(f"{page}: {name}" for page, name in cited if name not in registered)
    assert not missing, f"docs cite experiments that are not registered ({', '.join(sorted(registered))}): {missing}"


def test_the_docs_number_the_loop_as_the_trainer_does():
    """One numbering of the loop's steps: the eight lines of ``wmrl_core/trainer.py``'s docstring,
    as the README and docs/method.md print them (reST ``code`` as Markdown `code`)."""
    from wmrl_core import trainer

    def steps(text: str) -> list[str]:
        return re.findall(r"^([1-8]\. \*\*.+)$", text, re.MULTILINE)

    expected = [line.replace("``", "`") for line in steps(inspect.getdoc(trainer) or "")]
    assert len(expected) == 8, "wmrl_core/trainer.py's docstring lost its eight numbered steps"
    for page in ("README.md", "docs/method.md"):
        assert steps((ROOT / page).read_text()) == expected, (
            f"{page}: the loop's steps differ from trainer.py's docstring"
        )


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_docs_links_resolve():
    """Every relative link of the README and the docs tree names a file that exists (and, for a
    Markdown file, a heading it has): content moved between pages keeps its links."""
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "docs/results/README.md"]
    pages += [*(ROOT / "plugins").glob("*/README.md"), *(ROOT / "plugins").glob("*/docs/*.md")]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md":
                headings = {_slug(h) for h in re.findall(r"^#+ (.*)$", linked.read_text(), re.MULTILINE)}
                if anchor not in headings:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


@pytest.mark.slow  # trains the synthetic domain for 3 steps
def test_the_plugin_docs_python_example_trains(tmp_path, monkeypatch, capsys):
    section = (ROOT / "docs/plugins.md").read_text().split("## Training from Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    assert "runs/python-example" in code, "docs/plugins.md: the example's run_dir changed; change it here too"
    monkeypatch.chdir(ROOT)  # the example names its config relative to the repository root
    exec(compile(code.replace("runs/python-example", str(tmp_path / "run")), "docs/plugins.md", "exec"), {})
    printed = capsys.readouterr().out.split()
    assert printed[:2] == [str(tmp_path / "run"), "3"] and (tmp_path / "run" / "summary.json").is_file()


def _plain_signature(fn) -> str:
    """``name(a, b=1, *, c=None)``: the signature without annotations, defaults as Python writes them
    (strings in double quotes, as the docs write them)."""
    parts, star = [], False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        default = "" if p.default is p.empty else "=" + repr(p.default).replace("'", '"')
        parts.append(p.name + default)
    return f"{fn.__name__}({', '.join(parts)})"


def test_the_plugin_docs_give_the_python_api_and_the_checkers_signatures_as_the_code_has_them():
    from wmrl_core import checkers
    from wmrl_core.config import load_config
    from wmrl_core.trainer import train

    docs = " ".join((ROOT / "docs/plugins.md").read_text().split())
    for fn in (load_config, train, checkers.check_environment, checkers.check_rollouts):
        assert f"`{_plain_signature(fn)}`" in docs, f"docs/plugins.md lacks `{_plain_signature(fn)}`"

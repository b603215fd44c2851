"""Plugin discovery, the registry, and a user plugin installed through an entry point."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from wmrl_core import hookimpl
from wmrl_core.errors import UnknownComponentError, WMRLError
from wmrl_core.plugins import build_registry, describe_plugins, get_plugin_manager
from wmrl_core.registry import ComponentTable


def test_builtin_components_are_registered_through_hooks():
    pm = get_plugin_manager(entry_points=False)
    reg = build_registry(pm)
    assert "synthetic-bandit" in reg.environments
    assert reg.environments.get("synthetic-bandit").plugin == "wmrl_core.synthetic.plugin"
    assert {"tabular-softmax"} <= set(reg.policies.names())
    assert "score" in reg.reward_extractors
    infos = {i.name: i for i in describe_plugins(pm, reg)}
    assert infos["wmrl_core.synthetic.plugin"].components["world_model"] == ["synthetic-world-model"]


def test_unknown_name_lists_known_names_and_plugins():
    reg = build_registry(get_plugin_manager(entry_points=False))
    with pytest.raises(UnknownComponentError) as err:
        reg.environments.make("synthetic-bandt")
    msg = str(err.value)
    assert "Did you mean `synthetic-bandit`" in msg
    assert "synthetic-bandit (from wmrl_core.synthetic.plugin)" in msg


def test_duplicate_and_malformed_registrations_fail_clearly():
    table = ComponentTable("policy")
    table.add("p", "x:y")
    with pytest.raises(WMRLError, match="registered twice"):
        table.add("p", "x:z")
    table.add("bad", "no_colon")
    with pytest.raises(WMRLError, match="package.module:Attribute"):
        table.make("bad")


def test_extra_plugin_object_and_blocking():
    class MyPlugin:
        @hookimpl
        def wmrl_register_environments(self, table):
            table.add("mine", lambda **kw: kw, description="test")

    reg = build_registry(get_plugin_manager(entry_points=False, extra_plugins=[MyPlugin()]))
    assert reg.environments.make("mine", a=1) == {"a": 1}
    blocked = build_registry(get_plugin_manager(entry_points=False, blocked=["wmrl_core.synthetic.plugin"]))
    assert "synthetic-bandit" not in blocked.environments


@pytest.fixture
def user_plugin_path(tmp_path):
    """A user package exposing an environment through the ``wmrl`` entry-point group, made
    discoverable the way pip makes an installed package discoverable (a .dist-info folder)."""
    pkg = tmp_path / "my_envs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text(
        textwrap.dedent("""
        from wmrl_core import hookimpl
        from wmrl_core.types import Outcome, Task

        class CoinEnv:
            def tasks(self, split="train"):
                return [Task(id="coin", description="say 1", data={"index": 0})]
            def execute(self, tasks, solutions):
                return [Outcome(score=float(s == 1)) for s in solutions]

        @hookimpl
        def wmrl_register_environments(table):
            table.add("coin", "my_envs.plugin:CoinEnv", description="a user environment")
    """)
    )
    dist = tmp_path / "my_envs-0.3.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-envs\nVersion: 0.3.0\n")
    (dist / "entry_points.txt").write_text("[wmrl]\nmy_envs = my_envs.plugin\n")
    return tmp_path


@pytest.mark.slow  # starts the CLI in a fresh interpreter (torch import) to discover the plugin
def test_user_plugin_discovered_through_entry_points(user_plugin_path):
    env = {**os.environ, "PYTHONPATH": f"{user_plugin_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-m", "wmrl_core.cli", "plugins", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    plugins = {p["name"]: p for p in json.loads(out)}
    assert plugins["my_envs"]["version"] == "0.3.0"
    assert plugins["my_envs"]["components"] == {"environment": ["coin"]}


def test_broken_plugin_names_itself_and_the_fix(tmp_path):
    dist = tmp_path / "broken-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[wmrl]\nbroken = does_not_exist.plugin\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "wmrl_core.cli", "plugins"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "plugin `broken`" in proc.stderr and "WMRL_DISABLE_PLUGINS=broken" in proc.stderr

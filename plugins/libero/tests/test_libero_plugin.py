"""`wmrl plugins` sees the LIBERO components through the entry point."""

from importlib import metadata

import wmrl_libero.plugin

from wmrl_core.plugins import build_registry, get_plugin_manager


def test_entry_point_is_installed():
    eps = {ep.name: ep.value for ep in metadata.entry_points(group="wmrl")}
    assert eps.get("libero") == "wmrl_libero.plugin", "pip install -e plugins/libero"


def test_plugin_registers_environments_and_policies():
    # loaded directly so that a broken sibling plugin cannot fail this test
    pm = get_plugin_manager(entry_points=False, extra_plugins=[wmrl_libero.plugin])
    registry = build_registry(pm)
    for name in ("libero-10", "libero-spatial", "libero-object", "libero-goal", "libero-90"):
        assert name in registry.environments
    assert registry.environments.get("libero-10").kwargs == {"suite": "libero_10"}
    assert "libero-small-vla" in registry.policies
    assert "libero-hf-vla" in registry.policies

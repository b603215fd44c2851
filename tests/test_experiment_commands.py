"""Every experiment that ``wmrl experiment NAME`` runs is registered, with its own ``--help``."""

import pytest

from wmrl_core.plugins import build_registry, get_plugin_manager

CORE = ("synthetic", "compute-to-target", "cache-agreement", "ray-execution")
PLUGINS = {
    "autoresearch": (
        "heldout-gain",
        "equal-execution",
        "noise-control",
        "sandbox-load",
        "wm-online-update",
        "lambda-estimates",
    ),
    "libero": ("libero-transfer", "libero-transfer-resolving", "libero-group-ranking", "libero-bc-recipe"),
}


def _experiments():
    return build_registry(get_plugin_manager()).experiments


@pytest.mark.parametrize("name", [*CORE, *(n for names in PLUGINS.values() for n in names)])
def test_each_experiment_is_registered_and_prints_its_options(name, capsys):
    spec = _experiments().get(name)
    main = spec.load()
    with pytest.raises(SystemExit) as exit_:
        main(["--help"], prog=f"wmrl experiment {name}")
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: wmrl experiment {name} ")


def test_the_plugins_experiments_come_from_the_plugins():
    by_plugin = {spec.name: spec.plugin for spec in _experiments()}
    for plugin, names in PLUGINS.items():
        assert {by_plugin[n] for n in names} == {plugin}, names

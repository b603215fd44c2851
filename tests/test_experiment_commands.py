"""Every experiment that ``wmrl experiment NAME`` runs is registered, with its own ``--help``."""

from pathlib import Path

import pytest

from wmrl_core.experiments.studies import register_studies
from wmrl_core.plugins import build_registry, get_plugin_manager

ROOT = Path(__file__).resolve().parents[1]

CORE = ("synthetic", "compute-to-target", "cache-agreement", "ray-execution")
PLUGINS = {
    "autoresearch": ("sandbox-load",),
    # the studies of this checkout (experiments/<study>/study.py), registered under their module's name
    "experiments.libero_transfer.study": ("libero-transfer", "libero-transfer-resolving"),
    "experiments.libero_group_ranking.study": ("libero-group-ranking",),
    "experiments.libero_bc_recipe.study": ("libero-bc-recipe",),
    "experiments.autoresearch_heldout_gain.study": ("heldout-gain",),
    "experiments.autoresearch_equal_execution.study": ("equal-execution",),
    "experiments.autoresearch_noise_control.study": ("noise-control",),
    "experiments.autoresearch_wm_online_update.study": ("wm-online-update",),
    "experiments.autoresearch_lambda_estimates.study": ("lambda-estimates",),
}


def _experiments():
    pm = get_plugin_manager()
    register_studies(pm, ROOT)
    return build_registry(pm).experiments


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

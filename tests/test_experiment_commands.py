"""Every experiment that ``wmrl experiment NAME`` runs is registered, with its own ``--help``."""

import json
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


def test_the_online_update_table_is_rewritten_from_its_record_alone(tmp_path, capsys):
    from experiments.autoresearch_wm_online_update import wm_online_update

    row = {"prior": "task-fold", "shrinkage": 8.0, "groups": 16, "seen_per_task": 0.17, "prior_rho": 0.485}
    row |= {"updated_rho": 0.482, "diff_over_tasks": [-0.003, 0.002], "diff_over_shuffles": [-0.003, 0.004]}
    record = {"args": {"shuffles": "5", "group_size": "2"}, "tasks": 188, "executions": 5238, "results": [row]}
    (tmp_path / "summary.json").write_text(
        json.dumps({**record, "results": [row | {"tasks_better": 23, "tasks": 188}]})
    )
    assert wm_online_update.main(["--from-json", str(tmp_path / "summary.json"), "--out", str(tmp_path / "t")]) == 0
    table = (tmp_path / "t" / "table.md").read_text()
    assert "5 shuffles, groups of 2 (188 tasks, 5238 executions)" in table
    assert "| task-fold | 8 | 16 | 0.2 | 0.485 | 0.482 | -0.003 ± 0.002 | -0.003 ± 0.004 | 23/188 |" in table
    with pytest.raises(SystemExit):
        wm_online_update.main(["--from-json", str(tmp_path / "summary.json")])
    assert "--from-json needs --out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        wm_online_update.main(
            ["--from-json", str(tmp_path / "summary.json"), "--out", str(tmp_path), "--shuffles", "2"]
        )
    assert "--shuffles would change the run, not the page" in capsys.readouterr().err

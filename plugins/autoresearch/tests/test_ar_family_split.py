"""The W / R / E family split as the main job uses it: the environment trains on R only, the world
model is fitted on W's executions only, and neither choice reaches the held-out split E."""

from __future__ import annotations

import numpy as np
import pytest
from wmrl_autoresearch.environment import AutoResearchEnvironment
from wmrl_autoresearch.experiments import config_path
from wmrl_autoresearch.program import build
from wmrl_autoresearch.program.grammar import Program
from wmrl_autoresearch.program.world_model import SHIPPED_CHECKPOINT, LearnedWorldModel, load_outcome_model
from wmrl_autoresearch.tasks.families import WORLD_MODEL_FAMILIES, families_of, family_set, resolve_families

from wmrl_core.config import load_config

POOL = ["autoresearch-pool"]


def fitted_task_ids(model) -> set[str]:
    """Every task whose own statistics a fitted outcome model holds (its score models' ``stats_``)."""
    return {t for reg in model.regressors_ for t in getattr(reg, "stats_", {})}


def test_resolve_families_by_hand():
    known = {"MASS", "HSAUR", "Ecdat", "car"}  # MASS and HSAUR are W families, Ecdat and car are not
    assert resolve_families(["W"], known, "opt") == {"MASS", "HSAUR"}
    assert resolve_families(["R"], known, "opt") == {"Ecdat", "car"}
    assert resolve_families(["car", "W"], known, "opt") == {"car", "MASS", "HSAUR"}
    assert resolve_families("R", known, "opt") == {"Ecdat", "car"}  # one name, not its letters
    with pytest.raises(ValueError, match=r"opt: 'Ecdatt' is not a training family\. Did you mean Ecdat"):
        resolve_families(["Ecdatt"], known, "opt")
    with pytest.raises(ValueError, match="'KMsurv' is a held-out \\(E\\) family"):
        resolve_families(["KMsurv"], known, "opt", heldout_families={"KMsurv"})
    with pytest.raises(ValueError, match="selects no training family"):
        resolve_families([], known, "opt")


def test_train_families_restricts_the_training_split_only():
    everything = AutoResearchEnvironment(task_sets=POOL)
    r_only = AutoResearchEnvironment(task_sets=POOL, train_families=["R"])
    family = families_of(everything.tasks("train"))
    train = r_only.tasks("train")
    assert train and {family[t.id] for t in train}.isdisjoint(WORLD_MODEL_FAMILIES)
    # every training task of R is kept, none of W: the split is by whole families
    assert {t.id for t in train} == {
        t.id for t in everything.tasks("train") if family[t.id] not in WORLD_MODEL_FAMILIES
    }
    assert [t.id for t in r_only.tasks("heldout")] == [t.id for t in everything.tasks("heldout")]
    with pytest.raises(ValueError, match=r"environment\.kwargs\.train_families: 'Ecdatt'.*Did you mean Ecdat"):
        AutoResearchEnvironment(task_sets=POOL, train_families=["Ecdatt"])


def test_quickstart_trains_on_r_with_a_world_model_that_saw_neither_r_nor_e():
    cfg = load_config(config_path("quickstart.yaml"))
    env = AutoResearchEnvironment(**dict(cfg.environment.kwargs))
    assert cfg.rollout.task_split == "train" and cfg.eval.split == "heldout"
    train, heldout = env.tasks(cfg.rollout.task_split), env.tasks(cfg.eval.split)
    family = families_of(train + heldout)
    assert {family_set(family[t.id], "train") for t in train} == {"R"}
    assert {family[t.id] for t in train}.isdisjoint({family[t.id] for t in heldout})
    wm = LearnedWorldModel(env, **dict(cfg.world_model.kwargs))
    seen = fitted_task_ids(wm.model)
    assert seen, "the world model holds no task statistics: the check below would pass vacuously"
    assert seen.isdisjoint({t.id for t in train}) and seen.isdisjoint({t.id for t in heldout})
    w_tasks = {t.id for t in AutoResearchEnvironment(task_sets=POOL, train_families=["W"]).tasks("train")}
    assert seen <= w_tasks | _builtin_training_ids()  # W: the pool's W families and the built-in suite
    assert wm.info["fit"] == {"families": ["W"]}


def _builtin_training_ids() -> set[str]:
    return {t.id for t in AutoResearchEnvironment(task_sets=["autoresearch-builtin"]).tasks("train")}


@pytest.mark.slow  # fits the outcome model (about 10 CPU-s)
def test_build_command_writes_the_model_that_fit_families_fits(tmp_path):
    assert build.main(["--families", "W", "--out", str(tmp_path)]) == 0
    built, info = load_outcome_model(tmp_path / SHIPPED_CHECKPOINT)
    assert info["fit"]["families"] == ["W"] and set(info["families"]) <= WORLD_MODEL_FAMILIES | {"builtin"}
    wm = LearnedWorldModel(fit_families=["W"])
    assert fitted_task_ids(built) == fitted_task_ids(wm.model)
    tasks = AutoResearchEnvironment(task_sets=POOL, train_families=["R"]).tasks("train")[:6]
    rng = np.random.default_rng(0)
    programs = [Program(tuple(int(rng.integers(n)) for n in _options())) for _ in tasks]
    from_file = LearnedWorldModel(checkpoint=str(tmp_path / SHIPPED_CHECKPOINT)).predict_rewards(tasks, programs)
    np.testing.assert_allclose(from_file, wm.predict_rewards(tasks, programs))  # deterministic: the same fit
    with pytest.raises(ValueError, match="checkpoint or fit_families, not both"):
        LearnedWorldModel(checkpoint=str(tmp_path / SHIPPED_CHECKPOINT), fit_families=["W"])


def _options() -> tuple[int, ...]:
    from wmrl_autoresearch.program.grammar import N_OPTIONS

    return tuple(N_OPTIONS)

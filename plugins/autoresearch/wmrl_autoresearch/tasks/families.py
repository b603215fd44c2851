"""The W / R / E family split of the compute-to-target benchmark (pre-registered with the
equal-execution study, ``experiments/autoresearch_equal_execution/PREREGISTRATION.md`` in the repository).

* **W** (:data:`WORLD_MODEL_FAMILIES`): the world model is fitted on these families' executions only,
  the analogue of an LLM's prior knowledge.
* **R**: every other training family; the policy trains on R, which the world model never saw.
* **E**: the held-out split (:data:`wmrl_autoresearch.vetting.build.HELDOUT_FAMILIES`), untouched.

The built-in suite counts as one family, ``builtin`` (the execution corpus records it so).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "BUILTIN_FAMILY",
    "FAMILY_SETS",
    "WORLD_MODEL_FAMILIES",
    "family_set",
    "families_of",
    "resolve_families",
]

BUILTIN_FAMILY = "builtin"

WORLD_MODEL_FAMILIES: frozenset[str] = frozenset(
    {
        # statistics textbooks, biology and medicine, psychology, methods packages, and the synthetic /
        # scikit-learn built-in suite; R is then the econometrics and social-science packages
        # (Ecdat, car, Zelig, quantreg, plm, sem), a coherent domain the world model never saw
        "MASS",
        "HSAUR",
        "psych",
        "robustbase",
        "datasets",
        "geepack",
        "lme4",
        "rpart",
        "texmex",
        "vcd",
        "boot",
        "ggplot2",
        "cluster",
        "lattice",
        "multgee",
        "reshape2",
        BUILTIN_FAMILY,
    }
)


FAMILY_SETS = ("W", "R")
"""Names that stand for a whole set of training families in :func:`resolve_families` (E, the
held-out split, is never a training or world-model family)."""


def families_of(tasks: Iterable[Any]) -> dict[str, str]:
    """Family of every task id: the pool's dataset family, :data:`BUILTIN_FAMILY` for any other task."""
    from wmrl_autoresearch.tasks.dataset_pool import pool_entries

    pool = {card.id: recipe.family for recipe, card in pool_entries()}
    return {t.id: pool.get(t.id, BUILTIN_FAMILY) for t in tasks}


def resolve_families(
    names: Sequence[str], training_families: Iterable[str], option: str, heldout_families: Iterable[str] = ()
) -> frozenset[str]:
    """The training families that ``names`` select: each name is a family of ``training_families``
    or a set name, ``"W"`` (:data:`WORLD_MODEL_FAMILIES`) or ``"R"`` (every other training family).

    :param option: the config option being read, named in the error.
    :param heldout_families: E's families, named as such in the error when one is asked for.
    :raises ValueError: for an empty selection or a name that is neither (with close matches).
    """
    if isinstance(names, str):
        names = [names]
    known = frozenset(training_families)
    w = known & WORLD_MODEL_FAMILIES
    chosen: set[str] = set()
    for name in names:
        if name == "W":
            chosen |= w
        elif name == "R":
            chosen |= known - WORLD_MODEL_FAMILIES
        elif name in known:
            chosen.add(name)
        elif name in set(heldout_families):
            raise ValueError(f"{option}: {name!r} is a held-out (E) family, never trained on; use 'R' or 'W'")
        else:
            close = difflib.get_close_matches(str(name), sorted(known) + list(FAMILY_SETS), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(
                f"{option}: {name!r} is not a training family.{hint} Use 'W' (world-model families), 'R' "
                f"(RL training families) or family names among: {', '.join(sorted(known))}"
            )
    if not chosen:
        raise ValueError(f"{option}={list(names)} selects no training family; use 'R', 'W' or family names")
    return frozenset(chosen)


def family_set(family: str, split: str) -> str:
    """``"W"``, ``"R"`` or ``"E"`` for a task of ``family`` in ``split`` (``"train"`` / ``"heldout"``)."""
    if split == "heldout":
        return "E"
    if split != "train":
        raise ValueError(f"split {split!r} must be 'train' or 'heldout'")
    return "W" if family in WORLD_MODEL_FAMILIES else "R"

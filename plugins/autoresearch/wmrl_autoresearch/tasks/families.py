"""The W / R / E family split of the compute-to-target benchmark (draft pre-registration:
``docs/results/autoresearch/compute_to_target_v2/PREREGISTRATION.md``).

* **W** (:data:`WORLD_MODEL_FAMILIES`): the world model is fitted on these families' executions only,
  the analogue of an LLM's prior knowledge.
* **R**: every other training family; the policy trains on R, which the world model never saw.
* **E**: the held-out split (:data:`wmrl_autoresearch.vetting.build.HELDOUT_FAMILIES`), untouched.

The built-in suite counts as one family, ``builtin`` (the execution corpus records it so).
"""

from __future__ import annotations

__all__ = ["BUILTIN_FAMILY", "WORLD_MODEL_FAMILIES", "family_set"]

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


def family_set(family: str, split: str) -> str:
    """``"W"``, ``"R"`` or ``"E"`` for a task of ``family`` in ``split`` (``"train"`` / ``"heldout"``)."""
    if split == "heldout":
        return "E"
    if split != "train":
        raise ValueError(f"split {split!r} must be 'train' or 'heldout'")
    return "W" if family in WORLD_MODEL_FAMILIES else "R"

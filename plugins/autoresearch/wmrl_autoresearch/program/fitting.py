"""The default world model's recipe: its settings and its fit on a corpus of the training tasks
(shared by ``world_model.py``, which fits it at first use, and ``build.py``, which reports on it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "OUTCOME_SETTINGS",
    "checked_training_rows",
    "excluded_tasks",
    "fit_outcome_model",
    "rows_of_families",
    "training_features",
]

OUTCOME_SETTINGS = {
    "members": 5,
    "max_iter": 200,
    "learning_rate": 0.05,
    "max_leaf_nodes": 31,
    "min_samples_leaf": 10,
    "score_model": "task_scaled",
    "task_prior_strength": 3.0,
}
"""The shipped outcome model's settings (see ``--report``: the cross-validated within-task Spearman)."""


def training_features() -> dict[str, np.ndarray]:
    """Meta-features of every TRAINING task (pool and built-in; no data is loaded)."""
    from wmrl_autoresearch.environment import collect_tasks

    return {t.id: np.asarray(t.features, dtype=np.float32) for t in collect_tasks() if t.data.split == "train"}


def excluded_tasks() -> set[str]:
    """Tasks the pool build dropped because they share their data with a task of the other split
    (``cross_split`` in the manifest): their executions must not teach the world model either."""
    from wmrl_autoresearch.tasks.dataset_pool import load_manifest

    try:
        return {d["task_id"] for d in load_manifest().get("cross_split", [])}
    except FileNotFoundError:
        return set()


def checked_training_rows(rows: Sequence[dict], features: dict[str, np.ndarray]) -> list[dict]:
    """``rows`` of training tasks, after checking that every one is of a training task (the model never
    sees a held-out one); rows of a task dropped for sharing a held-out task's data are left out."""
    excluded = excluded_tasks()
    rows = [r for r in rows if r["task_id"] not in excluded]
    foreign = sorted({r["task_id"] for r in rows} - set(features))
    if foreign:
        raise ValueError(
            f"the corpus has executions of {len(foreign)} task(s) that are not training tasks ({foreign[:5]}); "
            "the world model is fitted on training tasks only: rebuild the corpus with `wmrl-autoresearch build-corpus`"
        )
    return list(rows)


def rows_of_families(rows: Sequence[dict], families: Sequence[str] | None) -> list[dict]:
    """The corpus rows whose family ``families`` selects (``None``: every row; names as in
    :func:`~wmrl_autoresearch.tasks.families.resolve_families`, e.g. ``["W"]``)."""
    if families is None:
        return list(rows)
    from wmrl_autoresearch.tasks.families import resolve_families

    keep = resolve_families(families, {r["family"] for r in rows}, "families")
    return [r for r in rows if r["family"] in keep]


def fit_outcome_model(corpus: str | None = None, seed: int = 0, families: Sequence[str] | None = None, **settings: Any):
    """The :class:`~.outcome_model.OutcomeModel` fitted on a corpus (default: the shipped one), on the
    executions of ``families`` only when given (``["W"]``: the world-model families)."""
    from wmrl_autoresearch.program.corpus import load_corpus
    from wmrl_autoresearch.program.cross_validation import corpus_arrays
    from wmrl_autoresearch.program.outcome_model import OutcomeModel, design_matrix

    features = training_features()
    rows = rows_of_families(checked_training_rows(load_corpus(corpus), features), families)
    a = corpus_arrays(rows, features)
    model = OutcomeModel(**{**OUTCOME_SETTINGS, **settings}, seed=seed)
    x = design_matrix(a["features"], a["choices"])
    return model.fit(x, a["reward"], failed=a["failed"], task_ids=a["task_ids"])

"""A pool task's recipe: how one dataset becomes one :class:`AutoResearchTask`.

The vetting step (:mod:`wmrl_autoresearch.vetting`) decides the recipe once (target, kind, metric, which
columns to drop, split); the manifest stores it; :func:`build_task` replays it whenever the
task's data is needed, so vetting and execution see exactly the same table.

Replaying a recipe on a raw table:

1. keep the rows whose target is present; for classification, drop the rows of classes
   with fewer than :data:`MIN_CLASS_ROWS` rows (too rare to stratify and to learn);
2. keep at most :data:`MAX_ROWS` rows, sampled with the recipe's seed;
3. keep the feature columns ``features`` (everything else was dropped by the vetting,
   with a reason recorded in the manifest);
4. split 70/30 (stratified for classification) with the recipe's seed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from wmrl_autoresearch.tasks.labels import label_string
from wmrl_autoresearch.tasks.task import AutoResearchTask

__all__ = ["MAX_ROWS", "MIN_CLASS_ROWS", "TEST_FRACTION", "Recipe", "build_task", "clean_table", "feature_name"]

MAX_ROWS = 5000
"""Row cap: larger tables are subsampled (fixed seed) so every task runs in seconds."""

MIN_CLASS_ROWS = 10
"""Classes with fewer rows than this are dropped (with their rows)."""

TEST_FRACTION = 0.3


@dataclass(frozen=True)
class Recipe:
    """Everything needed to rebuild a pool task from its package's data.

    :param id: task id.
    :param source: dataset source (a key of ``sources.SOURCES``).
    :param dataset: the dataset's name inside the source.
    :param family: the dataset family (R package, or the source); decides the split.
    :param target: target column of the raw table.
    :param kind: ``classification`` or ``regression``.
    :param metric: metric name.
    :param split: ``train`` or ``heldout``.
    :param features: raw names of the kept feature columns, in order.
    :param seed: seed of the row sample and the train/test split.
    :param summary: one sentence shown to agents.
    :param licence: licence of the data.
    :param dropped: raw columns left out, with the reason (identifier, free text, leakage ...).
    """

    id: str
    source: str
    dataset: str
    family: str
    target: str
    kind: str
    metric: str
    split: str
    features: tuple[str, ...]
    seed: int = 0
    summary: str = ""
    licence: str = ""
    dropped: dict[str, str] = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["features"] = list(self.features)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Recipe:
        return cls(**{**d, "features": tuple(d["features"]), "dropped": dict(d.get("dropped") or {})})


def _cell(value: Any) -> Any:
    """A table cell as the task stores it: float (NaN = missing) for numbers, else a string."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or value is pd.NaT:
        return math.nan
    if isinstance(value, (bool, np.bool_)):
        return float(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return str(value)


def feature_name(raw: str) -> str:
    """A raw column name as written in train.csv (no separators that break naive parsing)."""
    name = "".join(c if c.isalnum() or c in "_." else "_" for c in str(raw).strip()) or "col"
    return f"{name}_" if name.lower() in {"id", "target"} else name


def clean_table(df: pd.DataFrame, target: str, kind: str, seed: int) -> pd.DataFrame:
    """Steps 1-2 of the recipe: rows with a target, no rare classes, at most MAX_ROWS rows."""
    df = df[df[target].notna()]
    if kind == "classification":
        labels = df[target].map(label_string)
        counts = labels.value_counts()
        df = df[labels.isin(counts[counts >= MIN_CLASS_ROWS].index)]
    if len(df) > MAX_ROWS:
        df = df.sample(n=MAX_ROWS, random_state=seed)
    return df


def build_task(recipe: Recipe, raw: pd.DataFrame) -> AutoResearchTask:
    """Replay ``recipe`` on the raw table of its dataset (see the module docstring)."""
    from sklearn.model_selection import train_test_split

    missing = [c for c in (recipe.target, *recipe.features) if c not in raw.columns]
    if missing:
        raise ValueError(
            f"task {recipe.id}: columns {missing} are not in {recipe.source}:{recipe.dataset} any more; the installed "
            "package differs from the one the pool was vetted with: run `wmrl-autoresearch build-pool`"
        )
    df = clean_table(raw, recipe.target, recipe.kind, recipe.seed)
    x = np.array(
        [[_cell(v) for v in row] for row in df[list(recipe.features)].itertuples(index=False)], dtype=object
    ).reshape(len(df), len(recipe.features))
    y = df[recipe.target].to_numpy()
    if recipe.kind == "classification":
        y = np.array([label_string(v) for v in y.tolist()], dtype=object)
    else:
        y = y.astype(float)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=TEST_FRACTION, random_state=recipe.seed, stratify=y if recipe.kind == "classification" else None
    )
    return AutoResearchTask.create(
        id=recipe.id,
        kind=recipe.kind,
        metric=recipe.metric,
        split=recipe.split,
        columns=[feature_name(c) for c in recipe.features],
        x_train=x_tr,
        y_train=y_tr,
        x_test=x_te,
        y_test=y_te,
        source=f"{recipe.source}:{recipe.dataset}",
        summary=recipe.summary,
        licence=recipe.licence,
    )

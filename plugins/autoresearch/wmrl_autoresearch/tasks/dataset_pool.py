"""The pool of real-data tasks (task set ``autoresearch-pool``) and the committed manifest.

``data/pool.json`` (written by ``wmrl-autoresearch build-pool``, see
:mod:`wmrl_autoresearch.vetting`) holds every vetted task's recipe and card, and the cards
of the built-in suite. Listing tasks reads only this file; a task's table is built from its
package's data the first time a solution for it is run or graded (:class:`DeferredTask`).
"""

from __future__ import annotations

import json
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from wmrl_autoresearch.tasks.deferred import DeferredTask, TaskCard
from wmrl_autoresearch.tasks.recipe import Recipe, build_task
from wmrl_autoresearch.tasks.sources import read_dataset
from wmrl_autoresearch.tasks.task import AutoResearchTask, to_wmrl_task

__all__ = ["MANIFEST_PATH", "builtin_cards", "load_manifest", "load_recipe", "pool_entries", "pool_tasks"]

MANIFEST_PATH = Path(__file__).with_name("data") / "pool.json"


@lru_cache(maxsize=4)
def load_manifest(path: str | None = None) -> dict[str, Any]:
    """The manifest document (cached per path)."""
    target = Path(path) if path else MANIFEST_PATH
    if not target.is_file():
        raise FileNotFoundError(f"task pool manifest {target} is missing; run `wmrl-autoresearch build-pool`")
    return json.loads(target.read_text())


def load_recipe(recipe: Recipe) -> AutoResearchTask:
    """Build one pool task from its package's data (what a :class:`DeferredTask` calls on first use)."""
    return build_task(recipe, read_dataset(recipe.source, recipe.dataset))


def pool_entries(split: str | None = None, path: str | None = None) -> list[tuple[Recipe, TaskCard]]:
    """(recipe, card) of every pool task of ``split`` (``None``: all), in manifest order."""
    entries = [(Recipe.from_dict(e["recipe"]), TaskCard.from_dict(e["card"])) for e in load_manifest(path)["tasks"]]
    return [(r, c) for r, c in entries if split is None or c.split == split]


def pool_tasks(
    split: str | None = None, environment: str = "autoresearch", manifest: str | None = None, **_: Any
) -> list:
    """Task-set entry point of the pool: ``list[wmrl_core.types.Task]`` whose data loads on first use."""
    return [
        to_wmrl_task(DeferredTask(card, partial(load_recipe, recipe))) for recipe, card in pool_entries(split, manifest)
    ]


def builtin_cards(path: str | None = None) -> dict[str, TaskCard]:
    """Cards of the built-in suite cached in the manifest, by task id (none before the first build)."""
    try:
        manifest = load_manifest(path)
    except FileNotFoundError:
        return {}
    return {c["id"]: TaskCard.from_dict(c) for c in manifest.get("builtin", [])}

"""The ``wmrl`` section of verl's config, read alike by the trainer, the reward loop workers and
the world-model worker (each in its own Ray process)::

    +wmrl.config=configs/my_domain/wmrl.yaml      # the WMRL config: environment, world model, anchors, fusion
    +wmrl.overrides=[anchors.fraction=0.1]         # dotted overrides of it
    +wmrl.to_solution=my_domain.parsing:solution  # optional: (task, response text) -> solution; the text by default
    +wmrl.world_model_worker.num_gpus=1           # optional: Ray resources of the actor holding the world model
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from typing import Any

from wmrl_core.config import TrainConfig, load_config
from wmrl_core.errors import ConfigError
from wmrl_core.types import Task

__all__ = ["wmrl_config_from_verl", "solution_mapping", "world_model_worker_options", "EXECUTE"]

EXECUTE = "wmrl_execute"
"""Per-prompt field the trainer adds to every prompt it sends to rollout: ``True`` for the anchor
groups of a training step and for every validation prompt. verl's agent loop hands it, like every
dataset column, to the reward manager in ``non_tensor_batch``."""

WORLD_MODEL_WORKER_DEFAULTS = {"num_cpus": 1}


def _section(config: Any) -> Any:
    """verl's ``wmrl`` section; ``{}`` when there is none."""
    section = config.get("wmrl") if config is not None and hasattr(config, "get") else None
    return section or {}


def wmrl_config_from_verl(config: Any) -> TrainConfig:
    """The WMRL config named by verl's ``wmrl.config`` (and ``wmrl.overrides``)."""
    section = _section(config)
    if not section.get("config"):
        raise ConfigError(
            "the wmrl trainer and reward manager need a WMRL config: add +wmrl.config=path/to/wmrl.yaml to the verl command"
        )
    return load_config(section["config"], list(section.get("overrides") or []))


def solution_mapping(config: Any) -> Callable[[Task, str], Any]:
    """``wmrl.to_solution`` (``"package.module:function"``), imported; the response text itself
    when unset. The reward manager and the world-model worker both apply it, so the environment
    and the world model judge the same solution."""
    path = _section(config).get("to_solution")
    if not path:
        return lambda task, text: text
    try:
        fn = pkgutil.resolve_name(str(path))
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f"wmrl.to_solution={path!r} cannot be imported ({exc}); write it as 'package.module:function'"
        ) from exc
    if not callable(fn):
        raise ConfigError(f"wmrl.to_solution={path!r} is not callable: it must be (task, response text) -> solution")
    return fn


def world_model_worker_options(config: Any) -> dict[str, Any]:
    """Ray ``.options()`` of the world-model actor: ``wmrl.world_model_worker`` over ``{"num_cpus": 1}``."""
    extra = _section(config).get("world_model_worker") or {}
    return {**WORLD_MODEL_WORKER_DEFAULTS, **dict(extra)}

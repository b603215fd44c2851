"""The data that flows between the engine and its plugins.

A *task* is one problem the policy solves; a *solution* is whatever the policy emits for it
(an arm index, a Python script, an action sequence); an *outcome* is what executing or
predicting that solution yields. Rewards are floats derived from outcomes by a reward
extractor. Keeping these types tiny lets any domain plug in without subclassing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only: importing the data types must not import torch
    import torch

__all__ = ["Task", "Outcome", "Rollouts", "CostModel", "as_outcome"]


@dataclass(frozen=True)
class Task:
    """One problem instance.

    :param id: unique, stable name (used for seeding, logging and checkpoints).
    :param description: natural-language statement shown to language-model policies.
    :param features: optional numeric description (task meta-features) for small policies.
    :param data: anything else the domain needs (not inspected by the engine).
    """

    id: str
    description: str = ""
    features: np.ndarray | None = field(default=None, compare=False, repr=False)
    data: Any = field(default=None, compare=False, repr=False)


@dataclass
class Outcome:
    """Result of executing (or predicting) one solution.

    :param status: ``"ok"`` or a failure kind (``"timeout"``, ``"crashed"``, ...).
    :param score: the domain's scalar result, higher is better after reward extraction;
        ``None`` when there is none.
    :param info: anything else (runtime, logs, resource use).
    """

    status: str = "ok"
    score: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.score is not None and math.isfinite(self.score)


def as_outcome(value: Outcome | float | int | None) -> Outcome:
    """World models may return bare numbers; wrap them so reward extraction sees one type."""
    if isinstance(value, Outcome):
        return value
    if value is None:  # the world model had nothing to say: no reward, not a failure
        return Outcome(status="no_prediction", score=None)
    return Outcome(status="ok", score=float(value))


@dataclass
class Rollouts:
    """N = B * G sampled solutions with what GRPO needs to score them again.

    :param tasks: the task of each rollout (length N).
    :param solutions: the solution of each rollout (length N).
    :param group_ids: int array (N,), rollouts of one group share the id ``0..B-1``.
    :param old_log_probs: (N, T) log-probabilities at sampling time, detached.
    :param mask: (N, T) float, 1 where a token/action exists.
    :param extra: policy-private data needed to recompute log-probabilities (token ids ...).
    """

    tasks: list[Task]
    solutions: list[Any]
    group_ids: np.ndarray
    old_log_probs: torch.Tensor
    mask: torch.Tensor
    extra: Any = None

    def __len__(self) -> int:
        return len(self.solutions)


@dataclass(frozen=True)
class CostModel:
    """A declared cost, in seconds of the resource the stage uses.

    ``cost(n) = per_call_s + per_item_s * n`` for one call on ``n`` items. Declaring a cost
    lets a CPU-only run account for what the same stage costs at scale (for example a
    sandbox execution that takes minutes); stages without one are charged wall time.
    """

    per_call_s: float = 0.0
    per_item_s: float = 0.0

    def __post_init__(self) -> None:
        if self.per_call_s < 0 or self.per_item_s < 0:
            raise ValueError(f"costs must be >= 0, got {self}; use 0.0 for a free stage")

    def cost(self, n_items: int) -> float:
        return self.per_call_s + self.per_item_s * n_items

"""``halves``: a fixed convex combination of the two streams, registered through
``wmrl_register_fusers`` with its own settings dataclass; ``wmrl_core`` knows nothing of it.

.. math:: L = (1-w)\\,L(\\mathcal A; A^R) + w\\,L(\\bar{\\mathcal A}; A^C)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wmrl_core import hookimpl
from wmrl_core.fusion.base import FusionInputs, FusionPlan, LossTerm


@dataclass
class HalvesSettings:
    world_model_weight: float = field(
        default=0.5, metadata={"help": "w: the world-model stream's weight, the anchors' is 1 - w."}
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.world_model_weight <= 1.0:
            raise ValueError(f"world_model_weight must be in [0, 1], got {self.world_model_weight}")


class HalvesFuser:
    """Weighs the streams by the configured ``w``; counts the steps it was fitted on (its state)."""

    def __init__(self, settings: HalvesSettings):
        self.weight = settings.world_model_weight
        self.fitted = 0

    def plan(self, step: FusionInputs) -> FusionPlan:
        w = self.weight
        terms = (LossTerm(1.0 - w, step.advantages, step.is_anchor), LossTerm(w, step.advantages, ~step.is_anchor))
        return FusionPlan(terms=terms, w_real=1.0 - w, w_world_model=w, n_effective=float(step.n_real))

    def fit(self, step: FusionInputs) -> None:
        self.fitted += 1

    def state_dict(self) -> dict[str, Any]:
        return {"fitted": self.fitted}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fitted = state["fitted"]


@hookimpl
def wmrl_register_fusers(table) -> None:
    table.add(
        "halves",
        HalvesFuser,
        settings=HalvesSettings,
        description="the streams by a fixed weight w (world model) and 1 - w (anchors)",
    )

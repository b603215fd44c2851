"""Compute accounting: every call to generation, the world model and real execution.

Each call is timed (wall seconds) and counted. A stage whose component declares a
:class:`~wmrl_core.types.CostModel` is *charged* its declared cost (``per_call_s +
per_item_s * n``, e.g. the minutes one sandbox run takes at scale); otherwise, when the
call's results carry a measured cost (an environment's outcomes with ``info["cost_s"]``,
:data:`MEASURED_COST_KEY`, e.g. the CPU seconds of each sandboxed script), it is charged
their sum; otherwise its wall time. ``compute/*`` metrics are charged seconds, ``wall/*``
are measured seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from wmrl_core.types import CostModel

__all__ = ["STAGES", "ComputeLedger", "MEASURED_COST_KEY", "measured_cost_s"]

STAGES = ("generation", "world_model", "execution")

MEASURED_COST_KEY = "cost_s"
"""Key of ``Outcome.info`` holding the measured cost of producing that outcome, seconds."""


def measured_cost_s(outcomes) -> float | None:
    """Sum of the finite, non-negative ``info["cost_s"]`` of ``outcomes``; ``None`` when none has one.

    Bare numbers and outcomes without the key add nothing.
    """
    costs = []
    for outcome in outcomes:
        info = getattr(outcome, "info", None)
        value = info.get(MEASURED_COST_KEY) if isinstance(info, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
            costs.append(float(value))
    return sum(costs) if costs else None


@dataclass
class MeasuredCall:
    """Yielded by :meth:`ComputeLedger.measure`; the body may set ``measured_s`` (charged instead of wall time)."""

    measured_s: float | None = None


@dataclass
class _StageTotals:
    charged_s: float = 0.0
    wall_s: float = 0.0
    calls: int = 0
    items: int = 0


@dataclass
class ComputeLedger:
    """Per-step and cumulative compute by stage."""

    cumulative: dict[str, _StageTotals] = field(default_factory=lambda: {s: _StageTotals() for s in STAGES})
    step: dict[str, _StageTotals] = field(default_factory=lambda: {s: _StageTotals() for s in STAGES})

    def new_step(self) -> None:
        self.step = {s: _StageTotals() for s in STAGES}

    def charge(
        self, stage: str, *, n_items: int, wall_s: float, cost: CostModel | None, measured_s: float | None = None
    ) -> float:
        """Record one call; returns the charged seconds: the declared ``cost``, else ``measured_s``, else ``wall_s``."""
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {STAGES}")
        charged = cost.cost(n_items) if cost is not None else (measured_s if measured_s is not None else wall_s)
        for totals in (self.step[stage], self.cumulative[stage]):
            totals.charged_s += charged
            totals.wall_s += wall_s
            totals.calls += 1
            totals.items += n_items
        return charged

    @contextmanager
    def measure(self, stage: str, *, n_items: int, cost: CostModel | None) -> Iterator[MeasuredCall]:
        """Time the body and charge it to ``stage``; nothing is charged for an empty call.

        The body may set ``call.measured_s`` (e.g. :func:`measured_cost_s` of its outcomes).
        """
        call = MeasuredCall()
        start = time.perf_counter()
        yield call
        if n_items > 0:
            self.charge(
                stage, n_items=n_items, wall_s=time.perf_counter() - start, cost=cost, measured_s=call.measured_s
            )

    @property
    def total_s(self) -> float:
        return sum(t.charged_s for t in self.cumulative.values())

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for stage in STAGES:
            step, cum = self.step[stage], self.cumulative[stage]
            out[f"compute/{stage}_s"] = cum.charged_s
            out[f"compute/step_{stage}_s"] = step.charged_s
            out[f"compute/{stage}_calls"] = cum.calls
            out[f"compute/{stage}_items"] = cum.items
            out[f"wall/{stage}_s"] = cum.wall_s
        out["compute/total_s"] = self.total_s
        out["compute/step_total_s"] = sum(t.charged_s for t in self.step.values())
        out["wall/total_s"] = sum(t.wall_s for t in self.cumulative.values())
        return out

    def state_dict(self) -> dict:
        return {s: vars(t).copy() for s, t in self.cumulative.items()}

    def load_state_dict(self, state: dict) -> None:
        self.cumulative = {s: _StageTotals(**state[s]) for s in STAGES}
        self.new_step()

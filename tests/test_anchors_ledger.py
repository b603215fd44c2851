import numpy as np
import pytest

from wmrl_core.anchors import AnchorSampler
from wmrl_core.ledger import ComputeLedger
from wmrl_core.types import CostModel


def test_anchor_count_fraction_and_minimum():
    s = AnchorSampler(fraction=0.1, min_groups=1, seed=0)
    assert s.sample(20, step=1).sum() == 2
    assert s.sample(4, step=1).sum() == 1  # at least one group
    assert AnchorSampler(fraction=1.0).sample(7, 3).all()
    assert not AnchorSampler(fraction=0.0, min_groups=0).sample(7, 3).any()


def test_anchor_draw_is_seeded_by_seed_and_step():
    a, b = AnchorSampler(fraction=0.25, seed=3), AnchorSampler(fraction=0.25, seed=3)
    np.testing.assert_array_equal(a.sample(40, 5), b.sample(40, 5))
    draws = {tuple(np.flatnonzero(a.sample(40, step))) for step in range(20)}
    assert len(draws) > 10  # different groups on different steps


def test_anchor_sampler_rejects_bad_fraction():
    with pytest.raises(ValueError, match="fraction"):
        AnchorSampler(fraction=1.5)


def test_ledger_charges_declared_cost_else_wall_time():
    ledger = ComputeLedger()
    ledger.charge("execution", n_items=4, wall_s=0.01, cost=CostModel(per_call_s=1.0, per_item_s=2.0))
    ledger.charge("generation", n_items=4, wall_s=0.5, cost=None)
    m = ledger.metrics()
    assert m["compute/execution_s"] == pytest.approx(9.0)
    assert m["compute/generation_s"] == pytest.approx(0.5)
    assert m["compute/total_s"] == pytest.approx(9.5)
    assert m["wall/execution_s"] == pytest.approx(0.01)
    ledger.new_step()
    ledger.charge("execution", n_items=1, wall_s=0.0, cost=CostModel(per_item_s=2.0))
    m = ledger.metrics()
    assert m["compute/step_execution_s"] == pytest.approx(2.0)
    assert m["compute/execution_s"] == pytest.approx(11.0)
    assert m["compute/execution_calls"] == 2


def test_ledger_measure_and_state_roundtrip():
    ledger = ComputeLedger()
    with ledger.measure("world_model", n_items=3, cost=None):
        sum(range(1000))
    with ledger.measure("world_model", n_items=0, cost=CostModel(per_call_s=5)):
        pass  # empty calls are not charged
    assert ledger.cumulative["world_model"].calls == 1
    other = ComputeLedger()
    other.load_state_dict(ledger.state_dict())
    assert other.total_s == pytest.approx(ledger.total_s)
    with pytest.raises(ValueError, match="stage"):
        ledger.charge("nope", n_items=1, wall_s=0, cost=None)
    with pytest.raises(ValueError):
        CostModel(per_item_s=-1)


def test_ledger_charges_measured_cost_of_outcomes_when_none_is_declared():
    from wmrl_core.ledger import measured_cost_s
    from wmrl_core.types import Outcome

    outcomes = [
        Outcome("ok", 0.5, {"cost_s": 1.25}),
        Outcome("timeout", None, {"cost_s": 2.0}),
        Outcome("ok", 0.1, {}),
        0.3,
        Outcome("ok", 0.2, {"cost_s": float("nan")}),
    ]
    assert measured_cost_s(outcomes) == pytest.approx(3.25)  # no key, bare numbers and NaN add nothing
    assert measured_cost_s([Outcome("ok", 1.0), 0.5]) is None
    ledger = ComputeLedger()
    with ledger.measure("execution", n_items=5, cost=None) as call:
        call.measured_s = measured_cost_s(outcomes)
    assert ledger.metrics()["compute/execution_s"] == pytest.approx(3.25)  # measured CPU, not wall time
    with ledger.measure("execution", n_items=5, cost=CostModel(per_item_s=1.0)) as call:
        call.measured_s = 100.0  # a declared cost wins over a measured one
    assert ledger.metrics()["compute/execution_s"] == pytest.approx(8.25)
    with ledger.measure("execution", n_items=1, cost=None):
        pass  # nothing measured: wall time
    assert ledger.metrics()["compute/execution_s"] == pytest.approx(8.25, abs=0.05)

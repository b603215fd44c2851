"""The anytime-valid world-model gate (wmrl_core/fusion/gate.py): hand cases, the exact null mean
of its e-values, its false-opening rate over whole runs, opening, closing and resuming."""

import itertools
import math

import numpy as np
import pytest

from wmrl_core.fusion.gate import AgreementGate, agrapa_bet, permutation_log_evalues, within_group_correlation


def test_within_group_correlation_is_a_rank_correlation():
    assert within_group_correlation([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]) == pytest.approx(1.0)
    assert within_group_correlation([3.0, 2.0, 1.0], [10.0, 20.0, 30.0]) == pytest.approx(-1.0)
    # one score far out does not decide it: ranks 1, 2, 3, 4 against 1, 2, 3, 4
    assert within_group_correlation([0.1, 0.2, 0.3, 40.0], [0.0, 0.1, 0.2, 0.3]) == pytest.approx(1.0)
    assert within_group_correlation([1.0, 1.0, 1.0], [0.0, 1.0, 2.0]) == 0.0
    assert math.isnan(within_group_correlation([1.0, np.nan], [0.0, 1.0]))


def test_permutation_evalues_have_mean_one_over_every_permutation():
    """The null: were the scores any permutation of themselves, the e-values would average 1 exactly."""
    w, r = np.array([0.3, 0.1, 0.9, 0.5, 0.2]), np.array([1.0, 0.0, 1.0, 0.5, 0.0])
    etas = (0.5, 2.0, 8.0)
    values = np.array([np.exp(permutation_log_evalues(w[list(p)], r, etas)) for p in itertools.permutations(range(5))])
    np.testing.assert_allclose(values.mean(axis=0), 1.0, rtol=1e-10)


def test_permutation_evalues_edge_cases():
    assert permutation_log_evalues([1.0], [1.0]) is None
    np.testing.assert_array_equal(permutation_log_evalues([1.0, 1.0, 1.0], [0.0, 1.0, 2.0], (1.0, 2.0)), [0.0, 0.0])
    # a perfectly ordered group of 8 under a large tilt is strong evidence; reversed, strong against
    ordered = permutation_log_evalues(np.arange(8.0), np.arange(8.0), (8.0,))
    assert ordered[0] > 3.0
    assert permutation_log_evalues(-np.arange(8.0), np.arange(8.0), (8.0,))[0] < -3.0
    # larger groups draw permutations (seeded) and still give finite evidence
    big = permutation_log_evalues(np.arange(12.0), np.arange(12.0), (4.0,), rng=np.random.default_rng(0))
    assert np.isfinite(big).all() and big[0] > 0


def test_agrapa_bet():
    assert agrapa_bet(0.0, 0.0, 0, cap=0.5) == 0.0  # the first bet: nothing staked
    assert agrapa_bet(1.0, 3.0, 3, cap=0.9) == pytest.approx((1.0 / 4) / (3.25 / 4))
    assert agrapa_bet(2.0, 1.0, 3, cap=0.5) == 0.5  # 1.6 clipped
    assert agrapa_bet(-2.0, 1.0, 3, cap=0.5) == 0.0


def _run(gate: AgreementGate, rho: float, group_size: int, groups: int, rng: np.random.Generator) -> AgreementGate:
    for _ in range(groups):
        r = rng.normal(size=group_size)
        gate.update(rho * r + math.sqrt(1 - rho**2) * rng.normal(size=group_size), r)
    return gate


@pytest.mark.parametrize("group_size", [4, 8])
def test_a_useless_world_model_opens_the_gate_on_few_runs(group_size):
    """Ville's bound: at most `level` of runs ever open, over 40 groups each (binomial slack, 3 sd)."""
    rng = np.random.default_rng(7)
    runs = 300 if group_size == 4 else 120
    opened = [bool(_run(AgreementGate(level=0.05, seed=i), 0.0, group_size, 40, rng).opened_at_) for i in range(runs)]
    assert np.mean(opened) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)


def test_a_useful_world_model_opens_it_and_a_contradicted_one_closes_it():
    rng = np.random.default_rng(1)
    gate = _run(AgreementGate(level=0.05), 0.8, 8, 4, rng)
    assert gate.open_ and gate.opened_at_[0] <= 4
    _run(gate, -0.8, 8, 20, rng)  # the world model now ranks backwards (a decoy once the policy finds it)
    assert not gate.open_ and gate.closed_at_
    assert gate.wealth_ < 20  # the opening wealth restarted on the groups after closing


def test_a_validation_prior_helps_but_cannot_open_the_gate_alone():
    gate = AgreementGate(level=0.05)
    gate.set_prior(0.9, groups=1000)
    assert gate.prior_wealth_ == pytest.approx(math.sqrt(20)) and not gate.open_
    with pytest.raises(ValueError, match="correlation"):
        AgreementGate().set_prior(1.5, 10)


def test_state_dict_round_trip_continues_exactly():
    rng = np.random.default_rng(3)
    gate = _run(AgreementGate(), 0.5, 4, 6, rng)
    copy = AgreementGate()
    copy.load_state_dict(gate.state_dict())
    tail = [(rng.normal(size=4), rng.normal(size=4)) for _ in range(10)]
    for w, r in tail:
        gate.update(w, r)
        copy.update(w, r)
    assert copy.state_dict() == gate.state_dict()


def test_bad_settings_fail_clearly():
    with pytest.raises(ValueError, match="level"):
        AgreementGate(level=1.5)
    with pytest.raises(ValueError, match="max_bet"):
        AgreementGate(max_bet=1.0)
    with pytest.raises(ValueError, match="etas"):
        AgreementGate(etas=())

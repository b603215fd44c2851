"""The `real`-learns study's endpoints and page, from hand-made evaluation records (no simulator)."""

import numpy as np
import pytest

from experiments.libero_grpo import real_learns
from experiments.libero_grpo.real_learns import SEEDS, analyse, page


def _record(train: int, heldout: int) -> dict:
    return {
        "train": {"successes": train, "episodes": 320, "infrastructure_failures": 0, "per_task": {}},
        "heldout": {"successes": heldout, "episodes": 80, "infrastructure_failures": 0, "per_task": {}},
    }


def _records(real_gain: list[int], control_loss: int = 0) -> dict:
    return {
        "base": {s: _record(180, 40) for s in SEEDS},
        "real": {s: _record(180 + g, 40 + g // 4) for s, g in zip(SEEDS, real_gain)},
        "noise_control": {s: _record(180 - control_loss, 40) for s in SEEDS},
    }


@pytest.mark.parametrize(
    "gains, verdict",
    [
        ([40, 45, 35, 50, 42, 38], "learns"),  # +12.5 points on 320 episodes, tight across seeds
        ([1, -2, 0, 2, -1, 0], "no effect as large as the smallest of interest"),
        ([60, -40, 30, -20, 50, -30], "unresolved"),  # the interval spans 0 and the smallest effect
    ],
)
def test_the_verdict_reads_the_primary_interval(gains, verdict):
    result = analyse(_records(gains))
    assert result["verdict"] == verdict
    diffs = result["train"]["real_minus_control"]
    assert diffs == pytest.approx([g / 320 for g in gains])
    assert result["train"]["ci"][0] < result["train"]["mean"] < result["train"]["ci"][1]
    text = page(result)
    assert verdict.capitalize() in text and all(str(s) in text for s in SEEDS)


def test_a_gap_the_control_opens_by_losing_success_is_not_called_learning():
    result = analyse(_records([30, -30, 20, -20, 10, -10], control_loss=40))
    assert result["train"]["ci"][0] > 0  # real - control is above 0 ...
    assert result["verdict"] == real_learns.KEEPS  # ... but real - base is not


def test_no_verdict_until_every_seed_is_in():
    records = _records([40] * len(SEEDS))
    for arm in ("real", "noise_control"):
        del records[arm][SEEDS[-1]]
    result = analyse(records)
    assert result["verdict"] is None and result["finished"] == len(SEEDS) - 1
    assert "no verdict yet" in page(result)


def test_the_recipe_is_the_one_the_pre_registration_names():
    text = (real_learns.ROOT / "experiments/libero_grpo/PREREGISTRATION_REAL_LEARNS.md").read_text()
    for override in real_learns.RECIPE:
        assert f"`{override}`" in text, override
    assert f"{real_learns.STEPS} steps" in text and ", ".join(map(str, SEEDS)) in text


def test_the_page_is_rebuilt_from_the_archive_when_a_seed_s_last_arm_ends(monkeypatch):
    from types import SimpleNamespace

    calls = []
    monkeypatch.setattr(real_learns, "main", lambda argv: calls.append(argv) or 0)
    for arm in real_learns.ARMS:
        real_learns.rebuild_page_when_a_seed_ends(SimpleNamespace(arm=SimpleNamespace(name=arm), seed=SEEDS[0]))
    assert len(calls) == 1 and calls[0][:2] == ["--report", "--runs"]  # once, after noise_control, report-only


def test_seeds_for_half_width_is_the_smallest_n_whose_t_interval_fits():
    from scipy import stats

    n = real_learns.seeds_for_half_width(0.06, 0.063)
    assert n == 6  # the pre-registration's sizing: 2.571 x 0.06 / sqrt(6) = 0.063
    for m, fits in ((n - 1, False), (n, True)):
        assert bool(stats.t.ppf(0.975, m - 1) * 0.06 / m**0.5 <= 0.063) is fits
    assert real_learns.seeds_for_half_width(0.0, 0.01) == 2
    assert real_learns.seeds_for_half_width(10.0, 0.01, most=50) is None
    with pytest.raises(ValueError, match="half_width"):
        real_learns.seeds_for_half_width(0.1, 0.0)


@pytest.mark.parametrize(
    "gains, says",
    [
        ([1, -2, 0, 2, -1, 0], "so an effect as large as the smallest of interest"),
        ([60, -40, 30, -20, 50, -30], "but not an effect as large as the smallest of interest"),
    ],
)
def test_a_negative_verdict_says_what_it_rules_out_and_the_seeds_its_spread_needs(gains, says):
    result = analyse(_records(gains))
    text = page(result)
    hi = result["train"]["ci"][1]
    sd = float(np.std([g / 320 for g in gains], ddof=1))
    assert "## What was tried" in text and "## What this rules out" in text
    assert f"above {hi:+.3f} on the training init states, {says}" in text
    assert f"{real_learns.seeds_for_half_width(sd, real_learns.SMALLEST_EFFECT)} seeds" in text


def test_what_was_tried_is_listed_before_the_verdict_and_nothing_is_ruled_out_then():
    records = _records([40] * len(SEEDS))
    del records["real"][SEEDS[-1]]
    text = page(analyse(records))
    assert "## What was tried" in text and "What this rules out" not in text
    assert "What this rules out" not in page(analyse(_records([40, 45, 35, 50, 42, 38])))  # it learns

"""The AutoResearch endpoints of the fusion-defaults study, on hand-made curves."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "fusion_defaults"))

import autoresearch_endpoints as ep  # noqa: E402


def _curve(scores, executions):
    return [{"step": s, "score": v, "executions": e} for s, v, e in zip((0, 2, 4, 8, 16, 32), scores, executions)]


CURVES = {
    "real": {1: _curve([0.3, 0.3, 0.3, 0.4, 0.5, 0.5], [0, 80, 160, 320, 640, 1280])},
    "default": {1: _curve([0.3, 0.3, 0.3, 0.45, 0.5, 0.55], [0, 8, 16, 32, 64, 128])},
    "anchors_only": {1: _curve([0.3, 0.3, 0.3, 0.35, 0.4, 0.45], [0, 8, 16, 32, 64, 128])},
}


def test_paired_difference_and_execution_ratio_by_hand():
    curves = {arm: {**by, 2: [{**p, "score": p["score"] + 0.01} for p in by[1]]} for arm, by in CURVES.items()}
    diff = ep.paired_difference(curves, "default", "anchors_only")
    assert diff["per_seed"] == {1: pytest.approx(0.10), 2: pytest.approx(0.10)} and diff["seeds"] == 2
    assert ep.executions_to_reach(CURVES["default"][1], 0.5) == 64
    assert ep.executions_to_reach(CURVES["default"][1], 0.9) is None
    ratio = ep.execution_ratio(curves)
    assert ratio["reached"] == 2 and ratio["without_w"]["ratio"] == pytest.approx(1280 / 64)
    assert ratio["with_w"]["ratio"] == pytest.approx(1280 / (64 + 2762))
    assert ratio["runs_to_amortise_w"] == pytest.approx(2762 / (1280 - 64))


def test_an_unreached_seed_is_a_failure_and_the_floor_reads_every_run():
    curves = {arm: dict(by) for arm, by in CURVES.items()}
    curves["default"][2] = _curve([0.3] * 6, [0, 8, 16, 32, 64, 128])
    curves["real"][2] = CURVES["real"][1]
    ratio = ep.execution_ratio(curves)
    assert ratio["per_seed"][2] is None and ratio["reached"] == 1 and ratio["without_w"] is None
    floor = ep.weight_floor({1: [0.0] * 30, 2: [0.0] * 28 + [0.9, 0.9]})
    assert (
        not floor["met"]
        and floor["worst_mean"] == pytest.approx(0.06)
        and floor["share_above"] == pytest.approx(2 / 60)
    )
    assert ep.weight_floor({1: [0.0] * 30})["met"]
    assert math.isnan(ep.paired_difference({}, "default", "real")["mean"])


def test_the_registered_addition_reads_its_own_arm_and_noise_control():
    curves = {**CURVES, "default_v2": {1: _curve([0.3, 0.3, 0.3, 0.4, 0.45, 0.6], [0, 8, 16, 32, 64, 128])}}
    earned = {
        "default_noise_wm": {1: {"weights": [0.9] * 30}},
        "default_v2_noise_wm": {1: {"weights": [0.0] * 30}},
        "default_v2": {1: {"gate_opened_at": 3}},
    }
    lines = ep.page(curves, earned, 10, ["real", "anchors_only", "default_v2"], default="default_v2")
    text = "\n".join(lines)
    assert "`default_v2` − `anchors_only`" in text and "+0.150" in text  # 0.60 - 0.45, not default's +0.100
    assert "| 4. noise world model: steps > 0.1, worst run's mean | 1 | 0.0%, 0.000 | met |" in text
    assert "| 1 | +0.150 | +0.100 | 128 | 3 |" in text  # real's 0.5 first reached at step 32

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


def test_secondary_earned_and_curve_tables_read_every_seed():
    curves = {
        "real": {
            1: _curve([0.3, 0.3, 0.3, 0.4, 0.5, 0.5], [0] * 6),
            2: _curve([0.3, 0.3, 0.3, 0.4, 0.5, 0.6], [0] * 6),
        },
        "world_model": {1: _curve([0.3] * 5 + [0.45], [0] * 6), 2: _curve([0.3] * 5 + [0.65], [0] * 6)},
    }
    text = "\n".join(ep.secondary_lines(curves))
    assert "| `world_model` − `real` | 2 | " in text and "1: -0.050, 2: +0.050" in text
    assert "| `inverse_variance` − `anchors_only` | 0 | - | - |" in text
    summary = "\n".join(ep.curve_summary_lines(curves))
    assert "| `real` | 0.300 ± 0.000 (2) |" in summary and "0.550 ± 0.635 (2) |" in summary  # t(1) 12.71 x 0.05
    earned = {"default": {1: {"gate_opened_at": 4, "mean_weight": 0.2, "effective_per_executed": 1.5}, 2: {}}}
    row = ep.earned_lines(earned, ["default", "default_v2"])[-1]
    assert row.startswith("| `default` | 2 | 1 of 2; 1: 4, 2: never |")  # an arm without seeds has no row


def _fake_runs(tmp_path, study) -> list:
    """Every arm at seeds 10 and 11, as finished runs with metrics and curves."""
    import json
    import types

    runs = []
    for arm in study.PLAN["arms"]:
        for seed, lift in ((10, 0.0), (11, 0.02)):
            folder = tmp_path / "runs" / f"{arm}-seed{seed}"
            folder.mkdir(parents=True)
            weight = 0.0 if arm.endswith("noise_wm") else 0.5
            steps = [
                {
                    "step": t,
                    "fusion/w_world_model": weight,
                    "fusion/gate_open": float(weight > 0),
                    "anchors/groups": 1,
                    "fusion/n_real": 4,
                    "fusion/n_effective": 4 + 8 * weight,
                }
                for t in (1, 2)
            ]
            (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
            curve = [{**p, "execution_s": 0.0, "se": 0.01} for p in _curve([0.3 + lift] * 5 + [0.4 + lift], [0] * 6)]
            runs.append(
                types.SimpleNamespace(
                    arm=types.SimpleNamespace(name=arm), seed=seed, record={"curve": curve}, run_dir=folder
                )
            )
    return runs


def test_the_page_is_written_from_runs_with_the_noise_check(tmp_path, monkeypatch):
    """write_page: every section from (fake) finished runs, the plot, and the noise paragraph."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.fusion_defaults import autoresearch as study

    monkeypatch.setattr(study, "SEEDS", [10, 11])  # the fake runs finish the study
    runs = _fake_runs(tmp_path, study)
    noise = {
        "seeds": [10, 11],
        "per_seed": {10: 0.01, 11: -0.01},
        "sd": 0.014,
        "predicted_sd": 0.02,
        "resolution95": 0.127,
        "mean": 0.0,
    }
    study.write_page(runs, tmp_path / "page", noise)
    text = (tmp_path / "page" / "README.md").read_text()
    assert (tmp_path / "page" / "fusion_defaults.png").stat().st_size > 0
    assert "Seeds finished in every arm: 2 of 2" in text and "## The registered addition" in text
    assert "| `default_v2` | 2 | 2 of 2; 10: 1, 11: 1 | 0.500 ± 0.000 | 2.000 ± 0.000 |" in text
    assert "| `default_noise_wm` | 2 | 0 of 2; 10: never, 11: never | 0.000 ± 0.000 | 1.000 ± 0.000 |" in text
    assert "fresh − shared, per seed: 10: +0.010, 11: -0.010" in text
    assert "| `world_model` − `real` | 2 | +0.000 [+0.000, +0.000] |" in text


def test_until_every_arm_has_every_seed_the_page_shows_progress_and_no_estimate(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.fusion_defaults import autoresearch as study

    runs = [r for r in _fake_runs(tmp_path, study) if not (r.arm.name == "default_v2" and r.seed == 11)]
    (tmp_path / "page").mkdir()
    (tmp_path / "page" / "fusion_defaults.png").write_bytes(b"an earlier plot")
    study.write_page(runs, tmp_path / "page", None)
    text = (tmp_path / "page" / "README.md").read_text()
    total = len(study.SEEDS) * len(study.PLAN["arms"])
    assert f"**In progress: {2 * len(study.PLAN['arms']) - 1} of {total} arm-seeds finished.**" in text
    assert "| `default_v2` | 1 of 10 | 10 |" in text and "| `real` | 2 of 10 | 10, 11 |" in text
    assert "estimate (95% t)" not in text and "0.3" not in text  # nothing read from the curves
    assert not (tmp_path / "page" / "fusion_defaults.png").exists()


def test_noise_check_trains_nothing_measures_the_noise_and_writes_the_page(tmp_path, monkeypatch):
    """``--noise-check`` reaches the check (it was once parsed and then overwritten) without training."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.fusion_defaults import autoresearch as study

    calls = []
    monkeypatch.setattr(study.ee, "run", lambda args: calls.append(("run", args.analyse)) or [])
    monkeypatch.setattr(study.ee, "noise_check", lambda args: calls.append(("noise_check",)))
    monkeypatch.setattr(study.ee, "evaluation_noise", lambda args, folders: {"measured": True})
    monkeypatch.setattr(study, "write_page", lambda runs, out, noise: calls.append(("page", out, noise)))
    flags = ["--runs", str(tmp_path / "runs"), "--archive", str(tmp_path / "archive"), "--out", str(tmp_path / "p")]
    assert study.main([*flags, "--noise-check"]) == 0
    assert calls == [("run", True), ("noise_check",), ("page", tmp_path / "p", {"measured": True})]
    calls.clear()
    assert study.main(flags) == 0  # the run itself: trains, writes no page
    assert calls == [("run", False)]

"""The side-by-side report: compute to target, gain over the untrained policy, paired speed-up."""

from pathlib import Path

import pytest

from experiments.synthetic.theorem import (
    ArmResult,
    compute_to_reach,
    markdown_table,
    paired_compute_ratios,
    smoothed_final,
    summarize,
)


def _arm(name, curves):
    res = ArmResult(name, curves=curves)
    res.finals = [c[-1][1] for c in curves]
    res.compute = [
        {"generation_s": 0.0, "world_model_s": 0.0, "execution_s": c[-1][0], "total_s": c[-1][0]} for c in curves
    ]
    res.w_world_model = [0.5 for _ in curves]
    return res


def test_compute_to_reach_is_the_first_trained_evaluation_whose_running_mean_reaches_the_target():
    curve = [(0.0, 0.1), (10.0, 0.3), (20.0, 0.7), (30.0, 0.9)]
    assert compute_to_reach(curve, 0.5) == 20.0  # running mean of two: 0.3, 0.5, 0.8
    assert compute_to_reach(curve, 0.6) == 30.0
    assert compute_to_reach(curve, 0.7, smooth=1) == 20.0
    assert compute_to_reach(curve, 0.95) is None


def test_compute_to_reach_never_counts_the_untrained_policy():
    # the untrained policy (step 0, no compute) already beats the target: reaching it still
    # takes the first trained evaluation
    curve = [(0.0, 0.9), (10.0, 0.6), (20.0, 0.6)]
    assert compute_to_reach(curve, 0.5, smooth=1) == 10.0
    assert compute_to_reach(curve, 0.95, smooth=1) is None


def test_summarize_reports_paired_gain_and_flags_a_baseline_that_did_not_improve():
    real = _arm("real", [[(0.0, 0.8), (100.0, 0.7), (200.0, 0.6)], [(0.0, 0.8), (100.0, 0.7), (200.0, 0.7)]])
    wmrl = _arm("wmrl", [[(0.0, 0.8), (10.0, 0.9), (20.0, 0.9)], [(0.0, 0.8), (10.0, 0.85), (20.0, 0.9)]])
    s = summarize({"real": real, "wmrl": wmrl}, fraction=1.0)
    # the target is real's mean of its last two trained evaluations, averaged over seeds
    assert s["target"] == pytest.approx((0.65 + 0.7) / 2)
    assert not s["baseline_improved"]
    assert s["arms"]["real"]["gain_mean"] == pytest.approx(-0.15)
    assert s["arms"]["wmrl"]["gain_mean"] == pytest.approx(0.1)
    # real reaches 0.675 at 100 s (seed 0) and 100 s (seed 1); wmrl at 10 s on both
    assert s["arms"]["wmrl"]["speedup_vs_baseline"] == pytest.approx(10.0)
    assert s["arms"]["wmrl"]["speedup_seeds"] == "2/2"
    assert "did not improve on the untrained policy" in markdown_table(s)


def test_summarize_does_not_flag_an_improving_baseline():
    real = _arm("real", [[(0.0, 0.2), (100.0, 0.5), (200.0, 0.8)]])
    s = summarize({"real": real}, fraction=1.0)
    assert s["baseline_improved"]
    assert "did not improve" not in markdown_table(s)


def test_paired_compute_ratios_compare_arms_seed_by_seed():
    # target 0.5 (smooth=2: running mean of two trained evaluations)
    wmrl = _arm("wmrl", [[(0, 0.1), (10, 0.5), (20, 0.5)], [(0, 0.1), (10, 0.6), (20, 0.6)], [(0, 0.1), (5, 0.2)]])
    ivw = _arm("ivw", [[(0, 0.1), (10, 0.4), (20, 0.6)], [(0, 0.1), (10, 0.6), (30, 0.6)], [(0, 0.1), (5, 0.6)]])
    p = paired_compute_ratios({"wmrl": wmrl, "ivw": ivw}, "wmrl", "ivw", target=0.5)
    assert p["per_seed"] == [10 / 20, 10 / 10, None]  # the third seed's wmrl never reaches it
    assert p["mean"] == pytest.approx(0.75)
    s = summarize({"real": ivw, "wmrl": wmrl, "wmrl_inverse_variance": ivw}, fraction=0.5 / 0.6)
    assert [q["arm"] for q in s["paired"]] == ["wmrl"]
    assert "| wmrl / wmrl_inverse_variance | 0.50, 1.00, - | 0.75 ±" in markdown_table(s)


def test_smoothed_final_is_the_running_mean_that_reaching_is_tested_with():
    curve = [(0.0, 0.1), (10.0, 0.3), (20.0, 0.5), (30.0, 0.9)]
    assert smoothed_final(curve, smooth=2) == pytest.approx(0.7)
    assert smoothed_final(curve, smooth=1) == pytest.approx(0.9)
    assert smoothed_final([(0.0, 0.4)]) == pytest.approx(0.4)  # only the untrained evaluation
    # a curve whose smoothed final equals the target reaches it at its last evaluation
    assert compute_to_reach(curve, smoothed_final(curve)) == 30.0


def test_the_speed_up_uses_the_seeds_where_both_arms_reach_the_target_and_says_how_many():
    # real's last-two means: 0.6 and 0.4 -> target 0.5; only seed 0 of real reaches it
    real = _arm("real", [[(0, 0.1), (100, 0.6), (200, 0.6)], [(0, 0.1), (100, 0.4), (200, 0.4)]])
    wmrl = _arm("wmrl", [[(0, 0.1), (20, 0.6), (40, 0.6)], [(0, 0.1), (20, 0.6), (40, 0.6)]])
    s = summarize({"real": real, "wmrl": wmrl}, fraction=1.0)
    assert s["target"] == pytest.approx(0.5)
    assert s["arms"]["real"]["seeds_reaching_target"] == "1/2"
    assert s["arms"]["wmrl"]["speedup_vs_baseline"] == pytest.approx(100 / 20)
    assert s["arms"]["wmrl"]["speedup_seeds"] == "1/2"
    assert "5.0x ± 0.0 (1/2 seeds)" in markdown_table(s)


def test_wmrl_experiment_help_lists_every_registered_experiment_and_runs_a_plugins_one(capsys, monkeypatch):
    from wmrl_core import hookimpl, plugins
    from wmrl_core.cli import main

    seen = []

    class Plugin:
        @hookimpl
        def wmrl_register_experiments(self, table):
            table.add("toy", lambda argv, prog: seen.append((argv, prog)) or 3, description="a toy experiment")

    real = plugins.get_plugin_manager
    # the installed plugins' experiments are theirs to test; the core's and a toy one are enough here
    monkeypatch.setattr(plugins, "get_plugin_manager", lambda: real(extra_plugins=[Plugin()], entry_points=False))
    assert main(["experiment", "--help"]) == 0
    out = capsys.readouterr().out
    assert "synthetic " in out and "the theorem experiment" in out and "toy " in out and "a toy experiment" in out
    assert main(["experiment", "toy", "--seeds", "2", "x=1"]) == 3
    assert seen == [(["--seeds", "2", "x=1"], "wmrl experiment toy")]
    assert main(["experiment", "tyo"]) == 2
    assert "Did you mean `toy`?" in capsys.readouterr().err


def test_wmrl_experiment_synthetic_help_shows_its_options(capsys):
    from wmrl_core.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["experiment", "synthetic", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: wmrl experiment synthetic") and "--replications" in out and "--reuse" in out


@pytest.mark.slow
def test_wmrl_experiment_synthetic_runs_end_to_end(capsys, synthetic_config, tmp_path):
    from wmrl_core.cli import main

    argv = ["experiment", "synthetic", "--config", str(synthetic_config), "--seeds", "0-0", "--arms", "real"]
    argv += ["--replications", "0", "--out", str(tmp_path), "steps=2", "eval.every=1", "eval.samples_per_task=4"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| real |" in out and (tmp_path / "summary.json").is_file() and (tmp_path / "runs" / "real-seed0").is_dir()
    assert main([*argv[:-3], "--arms", "rael"]) == 2
    assert "unknown arms ['rael']" in capsys.readouterr().err


def test_the_synthetic_experiment_is_registered_by_its_study_in_the_checkout():
    from wmrl_core.experiments.studies import register_studies
    from wmrl_core.plugins import build_registry, describe_plugins, get_plugin_manager

    pm = get_plugin_manager(entry_points=False)
    assert "synthetic" not in build_registry(pm).experiments  # a study is not part of the installed package
    register_studies(pm, Path(__file__).resolve().parents[1])
    registry = build_registry(pm)
    spec = registry.experiments.get("synthetic")
    assert spec.plugin == "experiments.synthetic.study" and spec.load().__name__ == "main"
    infos = {i.name: i for i in describe_plugins(pm, registry)}
    assert "synthetic" in infos["experiments.synthetic.study"].components["experiment"]
    assert "experiment" not in registry.tables()  # not a component of a run

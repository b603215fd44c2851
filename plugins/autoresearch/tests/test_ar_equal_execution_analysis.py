"""The endpoints of ``wmrl experiment equal-execution`` on hand-made numbers: the reading at
equal execution, the per-seed target with running means, the non-inferiority decision and
not-reached counting."""

import math

import numpy as np
import pytest

from experiments.autoresearch_equal_execution import analysis as an
from experiments.autoresearch_equal_execution import equal_execution as ee


def test_interpolation_weights_between_and_at_points_never_beyond():
    assert an.interpolation_weights([0, 120, 160, 320], 128) == [(1, pytest.approx(0.8)), (2, pytest.approx(0.2))]
    assert an.interpolation_weights([0, 120, 160], 160) == [(2, 1.0)]
    assert an.interpolation_weights([0, 120, 160], 161) is None
    assert an.interpolation_weights([0, 120, 160], -1) is None


def test_running_mean_target_and_execution_to_target():
    real = [0.10, 0.14, 0.20, 0.26, 0.30]  # smoothed gain (0.26 + 0.30) / 2 - 0.10 = 0.18: target 0.19
    assert an.running_mean(real) == pytest.approx([0.12, 0.17, 0.23, 0.28])
    target = an.seed_target(real)
    assert target == pytest.approx(0.19)
    # running means 0.12, 0.17, 0.23: first at or above 0.19 at the pair (0.20, 0.26), read at the later one
    assert an.execution_to_target([0, 40, 80, 120, 160], real, target) == 120
    # one evaluation above the target is not enough: the pair's mean must pass it (0.18, then 0.155)
    assert an.execution_to_target([0, 4, 8], [0.10, 0.26, 0.05], target) is None
    assert an.execution_to_target([0, 4, 8], [0.10, 0.26, 0.20], target) == 8
    assert an.seed_target([0.2, 0.1, 0.15]) is None  # real lost: no target, so nobody reaches it
    assert an.execution_to_target([0, 4], [0.1, 0.9], None) is None


def test_non_inferiority_reads_the_lower_bound_against_the_margin():
    wide = an.non_inferiority([0.05, -0.06, 0.04, -0.05])  # mean -0.005, interval includes 0, lower < -0.02
    assert wide["non_inferior"] is False and wide["ci95"][0] < -0.02 < 0 < wide["ci95"][1]
    tight = an.non_inferiority([-0.005, -0.006, -0.004, -0.005])  # below 0 throughout, yet within the margin
    assert tight["non_inferior"] is True and tight["ci95"][1] < 0
    assert an.non_inferiority([0.1])["non_inferior"] is None  # one seed: undecided


def _curve(steps, executions, scores):
    return [
        {"step": s, "executions": e, "execution_s": e * 0.5, "score": v, "se": 0.01}
        for s, e, v in zip(steps, executions, scores, strict=True)
    ]


def test_analyse_reads_real_at_wmrl_execution_and_counts_seeds_that_never_reach():
    rng = np.random.default_rng(0)
    mats = {}

    def matrix(arm, seed, step):
        return mats.setdefault((arm, seed, step), rng.normal(size=(3, 2)))

    real_steps, steps = [0, 3, 4, 8], [0, 4, 8]
    curves = {
        "real": {
            0: _curve(real_steps, [0, 120, 160, 320], [0.10, 0.20, 0.30, 0.40]),
            1: _curve(real_steps, [0, 120, 160, 320], [0.10, 0.10, 0.10, 0.05]),  # no gain: no target
        },
        "wmrl_rectified": {
            0: _curve(steps, [0, 64, 128], [0.10, 0.30, 0.35]),
            1: _curve(steps, [0, 64, 128], [0.10, 0.12, 0.14]),
        },
        "anchors_only": {0: _curve(steps, [0, 64, 128], [0.10, 0.15, 0.20])},  # seed 1 not finished yet
        "noise_control": {0: _curve(steps, [0, 64, 128], [0.10, 0.10, 0.12])},
    }
    r = an.analyse(curves, matrix)
    assert r["seeds_per_arm"] == {"real": [0, 1], "wmrl_rectified": [0, 1], "anchors_only": [0], "noise_control": [0]}
    # seed 0: x = 128, real between steps 3 and 4: 0.8 * 0.20 + 0.2 * 0.30 = 0.22; wmrl's last 0.35
    eq = r["equal_execution"]["wmrl_rectified"]
    assert eq["per_seed"][0] == pytest.approx(0.35 - 0.22)
    assert eq["per_seed"][1] == pytest.approx(0.14 - 0.10) and eq["seeds"] == 2
    assert r["equal_execution"]["anchors_only"]["per_seed"] == {0: pytest.approx(0.20 - 0.22)}
    assert eq["evaluation_se"][0] > 0
    # the same reading by charged seconds: here proportional, so the same numbers
    assert r["equal_execution_s"]["wmrl_rectified"]["per_seed"][0] == pytest.approx(0.13)
    ni = r["non_inferiority"]
    assert ni["per_seed"] == {0: pytest.approx(-0.05), 1: pytest.approx(0.09)} and ni["seeds"] == 2
    # secondary: seed 0's target 0.10 + ((0.30 + 0.40) / 2 - 0.10) / 2 = 0.225; seed 1 has none
    sec = r["execution_to_target"]
    assert sec["targets"][0] == pytest.approx(0.225) and sec["targets"][1] is None
    # wmrl's running means 0.20, 0.325: reached at step 8 (128 executions); real's 0.15, 0.25: at step 4 (160)
    assert sec["wmrl_rectified"]["per_seed"] == {0: 128.0, 1: None}
    assert (sec["wmrl_rectified"]["reached"], sec["wmrl_rectified"]["not_reached"]) == (1, 1)
    assert sec["real"]["per_seed"] == {0: 160.0, 1: None}
    credit = r["minus_controls"]
    assert credit["wmrl_rectified - anchors_only"]["per_seed"] == {0: pytest.approx(0.15)}
    assert credit["wmrl_rectified - noise_control"]["per_seed"] == {0: pytest.approx(0.23)}
    text = an.table(r, "W corpus line")
    assert "anchors_only 1 (0)" in text and "not reached" in text and "undecided" not in text


def test_the_arms_keep_their_evaluated_steps_and_real_keeps_3_and_4():
    arms = {a.name: a for a in ee.arms(ee.FULL)}
    assert list(arms) == [
        "real",
        "anchors_only",
        "wmrl_rectified",
        "wmrl_inverse_variance",
        "wmrl_shrinkage",
        "wmrl_no_denoise",
        "world_model",
        "noise_control",
    ]
    assert "checkpoint.at_steps=[0,3,4,8,16,32]" in arms["real"].overrides
    assert "checkpoint.at_steps=[0,8,16,32]" in arms["wmrl_rectified"].overrides
    assert not math.isnan(ee.w_corpus_cost()["container_cpu_s"])


def test_world_model_on_anchors_ranks_within_groups_by_window():
    pairs = {
        "wmrl_rectified": {
            0: [
                # step 1, two groups: group 0 ranked right (rho 1), group 1 ranked backwards (rho -1)
                {"step": 1, "group": [0, 0, 1, 1], "world_model": [0.1, 0.2, 0.5, 0.4], "real": [0.0, 1.0, 0.2, 0.6]},
                # step 9, no group ids: one group; constant predictions among differing rewards rank nothing
                {"step": 9, "world_model": [0.3, 0.3, 0.3], "real": [0.0, 0.5, 1.0]},
            ],
            1: [{"step": 2, "group": [3, 3], "world_model": [0.9, 0.1], "real": [0.5, 0.5]}],  # equal rewards
        }
    }
    rows = an.world_model_on_anchors(pairs, windows=((1, 8), (9, 16), (17, 32)))["wmrl_rectified"]
    first, second, third = rows
    assert first["groups"] == 2 and first["spearman"] == pytest.approx(0.0)
    # bias over every pair of the window: predictions 0.1 0.2 0.5 0.4 0.9 0.1, rewards 0 1 0.2 0.6 0.5 0.5
    assert first["bias"] == pytest.approx((2.2 - 2.8) / 6)
    # level error: |0.15 - 0.5|, |0.45 - 0.4|, |0.5 - 0.5| over the three groups (the tied one counts here)
    assert first["level_error"] == pytest.approx((0.35 + 0.05 + 0.0) / 3)
    assert second["groups"] == 1 and second["spearman"] == 0.0 and math.isnan(second["spearman_ci95"])
    assert second["bias"] == pytest.approx(0.3 - 0.5)
    assert third["groups"] == 0 and math.isnan(third["spearman"]) and math.isnan(third["bias"])


def test_declared_compute_counts_generation_world_model_and_execution():
    # real for 32 steps of 10 groups x 4: 1,280 generated, 1,280 executed, none scored; e = 10 generations
    assert an.declared_compute(1280, 0, 1280, 10.0) == 1280 + 10 * 1280
    # WMRL: the same generation, 1,408 world-model predictions (w = 1), 128 executions
    assert an.declared_compute(1280, 1408, 128, 10.0) == 1280 + 1408 + 1280
    assert an.declared_compute(1280, 1408, 128, 10.0, world_model_cost=0.5) == 1280 + 704 + 1280
    with pytest.raises(ValueError, match="costs must be >= 0"):
        an.declared_compute(1, 1, 1, -1.0)


def test_compute_at_cost_ratios_pairs_each_arm_with_real_by_seed():
    real = {"generated": 1280, "scored": 0, "executed": 1280}
    counts = {
        "real": {0: real, 1: real},
        "wmrl_rectified": {
            0: {"generated": 1280, "scored": 1408, "executed": 128},
            1: {"generated": 1280, "scored": 1408, "executed": 256},
        },
        "world_model": {0: {"generated": 1280, "scored": 1280, "executed": 0}},
    }
    out = an.compute_at_cost_ratios(counts, execution_costs=(1.0, 10.0))
    rect = out["arms"]["wmrl_rectified"]
    # e = 10: 14,080 / 3,968 on seed 0 and 14,080 / 5,248 on seed 1
    assert rect["10"]["per_seed"] == {0: pytest.approx(14080 / 3968), 1: pytest.approx(14080 / 5248)}
    assert rect["10"]["mean"] == pytest.approx((14080 / 3968 + 14080 / 5248) / 2) and rect["10"]["seeds"] == 2
    assert rect["1"]["per_seed"][0] == pytest.approx(2560 / (1280 + 1408 + 128))  # below 1: more compute than real
    assert out["arms"]["real"]["10"]["mean"] == pytest.approx(1.0)
    one = out["arms"]["world_model"]["10"]
    assert one["per_seed"] == {0: pytest.approx(14080 / 2560)} and math.isnan(one["ci95"][0])  # one seed: no interval


def test_live_ratio_beside_the_measured_one_counts_seeds_without_it():
    live = {"wmrl_rectified": {0: 0.9, 1: 1.1, 2: 1.0}}
    to_target = {"real": {0: 320.0, 1: None, 2: 160.0}, "wmrl_rectified": {0: 128.0, 1: 64.0, 2: None}}
    out = an.live_and_measured_ratios(live, to_target)["wmrl_rectified"]
    assert out["live"]["mean"] == pytest.approx(1.0) and out["live"]["seeds"] == 3
    assert out["measured"]["per_seed"] == {0: pytest.approx(2.5)}  # seed 1: real has no target; seed 2: not reached
    assert out["seeds_not_measured"] == [1, 2]


def test_run_calls_on_archived_after_each_arm_seed_trained_or_evaluated_here(tmp_path, monkeypatch):
    """``args.on_archived`` (e.g. a study's page following its archive) gets every arm-seed finished so far
    after each one this invocation trained or evaluated afresh, never after one it only found finished."""
    import argparse
    from types import SimpleNamespace

    def fake_run_arms(config, arm_list, *, seeds, evaluate, on_run, **_):
        runs = []
        for arm in arm_list:
            run = SimpleNamespace(
                arm=arm,
                seed=seeds[0],
                trained=arm.name != "real",  # real: trained in an earlier invocation
                restored=False,
                record={"curve": [{"executions": 4}]},
            )
            if arm.name != "real" or seeds[0] == 8:  # real seed 7 found evaluated, real seed 8 evaluated here
                evaluate(run)
            on_run(run)
            runs.append(run)
        return runs

    def fake_evaluate_run(args, run, progress):
        progress["evaluations"] += 1
        return {}

    monkeypatch.setattr(ee, "evaluate_run", fake_evaluate_run)
    monkeypatch.setattr(ee, "run_arms", fake_run_arms)
    monkeypatch.setattr(ee, "archive_caches", lambda archive, caches: None)
    monkeypatch.setattr(ee, "restore_caches", lambda archive, caches: None)
    calls = []
    plan = {
        "seeds": 2,
        "seed_list": [7, 8],
        "steps": 1,
        "every": 1,
        "eval_steps": [0],
        "real_extra": [],
        "arms": {"real": [], "b": []},
    }
    args = argparse.Namespace(
        plan=plan, analyse=False, archive=tmp_path, cache=tmp_path / "e", train_cache=tmp_path / "t", quick=False,
        uncached_seeds=set(), config=tmp_path / "c.yaml", samples=1, max_tasks=None, runs=tmp_path / "runs",
        on_archived=lambda finished: calls.append([(r.arm.name, r.seed) for r in finished]),
    )  # fmt: skip
    assert len(ee.run(args)) == 4
    assert calls == [
        [("real", 7), ("b", 7)],
        [("real", 7), ("b", 7), ("real", 8)],
        [("real", 7), ("b", 7), ("real", 8), ("b", 8)],
    ]

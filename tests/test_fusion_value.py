"""The predicted compute ratios of an update (``wmrl_core/fusion/value.py``)."""

import math

import pytest

from wmrl_core.fusion.value import predicted_compute_ratios, value_summary


def test_predicted_compute_ratios_hand_computed():
    """160 rollouts at 0.05 s, 16 executed at 1 s, world model 0.26 s: C = 24.26 s. An update
    worth 40 real rollouts: q_real = 40 * 1.05 / 24.26, q_anchors = (40 / 16) * (8 + 16) / 24.26."""
    q_real, q_anchors = predicted_compute_ratios(
        n_effective=40, n_real=16, n_rollouts=160, n_executed=16, generation_s=8.0, execution_s=16.0, step_total_s=24.26
    )
    assert q_real == pytest.approx(40 * 1.05 / 24.26)
    assert q_anchors == pytest.approx(2.5 * 24 / 24.26)


def test_grpo_with_every_group_executed_is_worth_exactly_itself():
    q_real, q_anchors = predicted_compute_ratios(
        n_effective=160,
        n_real=160,
        n_rollouts=160,
        n_executed=160,
        generation_s=8.0,
        execution_s=160.0,
        step_total_s=168.0,
    )
    assert q_real == pytest.approx(1.0) and q_anchors == pytest.approx(1.0)


def test_undefined_without_executions_or_anchors():
    kwargs = dict(n_effective=10.0, n_rollouts=160, generation_s=8.0, step_total_s=9.0)
    assert all(math.isnan(q) for q in predicted_compute_ratios(n_real=0, n_executed=0, execution_s=0.0, **kwargs))
    q_real, q_anchors = predicted_compute_ratios(n_real=0, n_executed=16, execution_s=16.0, **kwargs)
    assert math.isfinite(q_real) and math.isnan(q_anchors)


def test_value_summary_averages_the_defined_steps():
    records = [{"step": 0}, {"value/n_eff": 10.0, "value/ratio_vs_real": 2.0, "value/ratio_vs_anchors": float("nan")}]
    records.append({"value/n_eff": 20.0, "value/ratio_vs_real": 4.0, "value/ratio_vs_anchors": 1.5})
    assert value_summary(records) == {"value/n_eff": 15.0, "value/ratio_vs_real": 3.0, "value/ratio_vs_anchors": 1.5}


def test_world_model_earned_reads_the_gate_the_weight_and_the_effective_rollouts():
    from wmrl_core.fusion.value import world_model_earned

    records = [
        {"step": 0, "eval/true_reward": 0.5},
        {
            "step": 1,
            "anchors/groups": 1,
            "fusion/w_world_model": 0.0,
            "fusion/gate_open": 0.0,
            "fusion/n_real": 4,
            "fusion/n_effective": 4.0,
        },
        {
            "step": 2,
            "anchors/groups": 1,
            "fusion/w_world_model": 0.6,
            "fusion/gate_open": 1.0,
            "fusion/n_real": 4,
            "fusion/n_effective": 12.0,
        },
    ]
    earned = world_model_earned(records)
    assert earned == {"gate_opened_at": 2, "steps": 2, "mean_weight": 0.3, "effective_per_executed": 2.0}
    no_gate = [{**r, "fusion/gate_open": None} for r in records]
    assert world_model_earned(no_gate)["gate_opened_at"] == 2  # the first step with weight
    shut = [{**r, "fusion/w_world_model": 0.0, "fusion/gate_open": 0.0} for r in records]
    assert world_model_earned(shut)["gate_opened_at"] is None
    assert world_model_earned([{"step": 1, "loss": 0.0}]) == {}  # mode=real: nothing to report

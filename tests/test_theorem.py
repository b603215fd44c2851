"""The theorem experiment on a fast setting: the claims of docs/results/synthetic/README.md, asserted."""

import numpy as np
import pytest

from experiments.synthetic.theorem import SYNTHETIC_ARMS, run_curves, with_steps, write_report
from wmrl_core.synthetic.bandit import BanditTruth

pytestmark = pytest.mark.slow

ARMS = (
    "real",
    "world_model",
    "wmrl",
    "wmrl_inverse_variance",
    "wmrl_independent_wm",
    "wmrl_confident_decoy",
    "wmrl_confident_decoy_inverse_variance_smoothed",
)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    from tests.conftest import SYNTHETIC

    out = tmp_path_factory.mktemp("theorem")
    arms = with_steps({k: SYNTHETIC_ARMS[k] for k in ARMS}, steps=100, real_steps=50)
    results = run_curves(
        SYNTHETIC,
        arms,
        seeds=[0, 1],
        out_dir=out,
        overrides=["eval.every=2", "logging.tensorboard=false", "checkpoint.every=0"],
    )
    summary = write_report(results, out, title="test", optimum=BanditTruth().optimum)
    return out, results, summary


def test_world_model_only_plateaus_at_the_bias_floor(experiment):
    _, _, summary = experiment
    arms = summary["arms"]
    assert arms["world_model"]["final_mean"] < BanditTruth().optimum - 0.2
    assert arms["world_model"]["final_mean"] < summary["target"]


def test_wmrl_reaches_real_with_3x_less_compute(experiment):
    _, _, summary = experiment
    arms = summary["arms"]
    assert arms["wmrl"]["final_mean"] >= arms["real"]["final_mean"] - 0.01
    assert arms["wmrl"]["compute_to_target_s"] is not None
    assert arms["wmrl"]["speedup_vs_baseline"] >= 3.0


def test_rectified_is_at_most_a_little_slower_than_inverse_variance_with_the_miscalibrated_world_model(experiment):
    _, _, summary = experiment
    arms = summary["arms"]
    # measured (10 paired seeds, docs/results/synthetic/floor_level999.md): 1.11 ± 0.05 times
    # inverse variance's compute to the target, at most 1.23 on a seed (lambda is 0 until the
    # anchors show the world model is informative); the bound allows that on these 2 seeds, not more
    assert arms["wmrl"]["compute_to_target_s"] <= 1.25 * arms["wmrl_inverse_variance"]["compute_to_target_s"]
    # lambda-hat stays where the world model tracks the real advantages (0.73 late, 10 seeds)
    # instead of sinking towards 0 as the policy concentrates (0.40 with per-rollout moments)
    assert arms["wmrl"]["w_world_model_late"] >= 0.6


def test_independent_world_model_gets_lambda_near_zero_and_learns_from_anchors(experiment):
    _, results, summary = experiment
    arm = summary["arms"]["wmrl_independent_wm"]
    # lambda-tilde late: 0.00 over 10 seeds at 120 steps with the default test against the null
    # (floor_level999.md); 0.10 with the plain factor, 0.16 on these two seeds
    # here (a shrunk slope of pure noise is 0 in most windows and positive in a few); against
    # 0.73 for the miscalibrated world model
    assert arm["w_world_model_late"] < 0.25
    assert arm["w_world_model_late"] < summary["arms"]["wmrl"]["w_world_model_late"] / 3
    start = np.mean([c[0][1] for c in results["wmrl_independent_wm"].curves])
    assert arm["final_mean"] > start + 0.1


def test_confident_decoy_rectified_reaches_real_where_calibrated_fusion_does_not(experiment):
    _, _, summary = experiment
    arms = summary["arms"]
    real = arms["real"]["final_mean"]
    assert arms["wmrl_confident_decoy"]["final_mean"] >= real - 0.01
    # a calibrator that does not tie the decoy with the best arm leads calibrated fusion to the decoy
    assert arms["wmrl_confident_decoy_inverse_variance_smoothed"]["final_mean"] < real - 0.1


def test_report_files(experiment):
    out, _, _ = experiment
    assert (out / "table.md").read_text().count("|") > 20
    assert (out / "reward_vs_compute.png").stat().st_size > 10_000

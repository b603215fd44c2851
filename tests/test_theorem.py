"""The theorem experiment on a fast setting: the claims the README makes, asserted."""

import numpy as np
import pytest

from wmrl_core.experiment import SYNTHETIC_ARMS, run_arms, summarize, write_report
from wmrl_core.synthetic.bandit import BanditTruth


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    from tests.conftest import SYNTHETIC

    out = tmp_path_factory.mktemp("theorem")
    results = run_arms(SYNTHETIC, SYNTHETIC_ARMS, seeds=[0, 1], out_dir=out,
                       overrides=["steps=50", "eval.every=2", "logging.tensorboard=false", "checkpoint.every=0"])
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
    assert arms["wmrl"]["final_mean"] >= arms["real"]["final_mean"] - 0.03
    assert arms["wmrl"]["compute_to_target_s"] is not None
    assert arms["wmrl"]["speedup_vs_baseline"] >= 3.0


def test_independent_world_model_falls_back_to_anchors(experiment):
    _, results, summary = experiment
    arm = summary["arms"]["wmrl_independent_wm"]
    assert arm["w_world_model_late"] < 0.1
    start = np.mean([c[0][1] for c in results["wmrl_independent_wm"].curves])
    assert arm["final_mean"] > start + 0.1  # still learns, from the anchors alone


def test_report_files(experiment):
    out, _, _ = experiment
    assert (out / "table.md").read_text().count("|") > 20
    assert (out / "reward_vs_compute.png").stat().st_size > 10_000

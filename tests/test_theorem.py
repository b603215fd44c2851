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
    "wmrl_noise_wm",
    "wmrl_independent_wm",
    "wmrl_confident_decoy",
    "wmrl_confident_decoy_inverse_variance",
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


def test_the_default_is_at_most_a_little_slower_than_inverse_variance_with_the_miscalibrated_world_model(experiment):
    _, _, summary = experiment
    arms = summary["arms"]
    # measured (30 paired seeds, docs/results/synthetic/fusion_defaults, Part 5): 0.95 ± 0.05 times inverse
    # variance's compute to the target; the gate holds the weight at 0 for the first steps, so on 2 seeds
    # allow a quarter more, not more
    assert arms["wmrl"]["compute_to_target_s"] <= 1.25 * arms["wmrl_inverse_variance"]["compute_to_target_s"]
    # once the gate opens the world model carries a large share of the update (about 0.45 late on these two
    # seeds: the bias this miscalibrated world model shows keeps it below inverse variance's weight)
    assert arms["wmrl"]["w_world_model_late"] >= 0.35


def test_a_world_model_that_carries_nothing_gets_no_weight_and_learning_comes_from_the_anchors(experiment):
    _, results, summary = experiment
    for name in ("wmrl_noise_wm", "wmrl_independent_wm"):
        arm = summary["arms"][name]
        assert arm["w_world_model_late"] < 0.05, name
        start = np.mean([c[0][1] for c in results[name].curves])
        assert arm["final_mean"] > start + 0.1, name


def test_the_confident_decoy_fools_inverse_variance_but_not_the_default(experiment):
    _, _, summary = experiment
    arms = summary["arms"]
    real = arms["real"]["final_mean"]
    assert arms["wmrl_confident_decoy"]["final_mean"] >= real - 0.01
    # the tie-free calibrator keeps the decoy's ranking, and a weight without the gate follows it
    assert arms["wmrl_confident_decoy_inverse_variance"]["final_mean"] < real - 0.1


def test_report_files(experiment):
    out, _, _ = experiment
    assert (out / "table.md").read_text().count("|") > 20
    assert (out / "reward_vs_compute.png").stat().st_size > 10_000


def test_the_report_is_rebuilt_byte_for_byte_from_the_archive(experiment, tmp_path):
    from experiments.synthetic.theorem import load_archive, save_archive

    out, results, _ = experiment
    save_archive(results, tmp_path / "runs.json.gz", {"arms": list(results)})
    reread, settings = load_archive(tmp_path / "runs.json.gz")
    assert settings == {"arms": list(results)} and list(reread) == list(results)
    write_report(reread, tmp_path, title="test", optimum=BanditTruth().optimum)
    for name in ("table.md", "summary.json", "reward_vs_compute.png"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes(), name

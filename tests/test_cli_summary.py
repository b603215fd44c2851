"""What ``wmrl train`` prints at the end: evaluations with their standard errors, the predicted
value of the world model, and the config's caveat line."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from wmrl_core.cli import summary_lines


def test_summary_lines_by_hand():
    summary = {
        "eval_first": {"step": 0, "eval/reward": 0.38712, "eval/reward_se": 0.03801, "eval/execution_s": 9.0},
        "eval_last": {"step": 16, "eval/reward": 0.39649, "eval/reward_se": 0.0375, "eval/execution_s": 8.0},
        "value": {"value/n_eff": 5.25, "value/ratio_vs_real": 2.0, "value/ratio_vs_anchors": math.nan},
    }
    assert summary_lines(summary, "one run; not evidence of learning") == [
        "eval/reward: 0.3871 ± 0.0380 at step 0 -> 0.3965 ± 0.0375 at step 16",
        "predicted value of the world model (run averages; module wmrl_core.fusion.value): "
        "n_eff 5.25, ratio_vs_real 2, ratio_vs_anchors nan",
        "what this run shows: one run; not evidence of learning",
    ]
    # no evaluation, no value and no caveat: nothing to print
    assert summary_lines({"eval_first": None, "eval_last": None, "value": {}}) == []


@pytest.mark.slow
def test_train_prints_the_configured_caveat(synthetic_config, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wmrl_core.cli",
            "train",
            str(synthetic_config),
            f"run_dir={tmp_path / 'r'}",
            "steps=2",
            "eval.every=2",
            "logging.tensorboard=false",
            "logging.caveat=two steps show nothing",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "what this run shows: two steps show nothing" in proc.stdout
    assert "predicted value of the world model" in proc.stdout

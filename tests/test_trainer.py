import json
import math

import pytest

from wmrl_core.config import load_config
from wmrl_core.metrics import read_metrics
from wmrl_core.trainer import train

REQUIRED = ["step", "reward/real_mean", "reward/world_model_mean", "debias/residual_var", "fusion/w_world_model",
            "fusion/w_real", "compute/generation_s", "compute/world_model_s", "compute/execution_s", "compute/total_s",
            "eval/true_reward"]


def _cfg(path, tmp_path, *overrides):
    return load_config(path, [f"run_dir={tmp_path / 'run'}", "steps=12", "eval.every=3", "checkpoint.every=4",
                              "logging.progress=false", *overrides])


@pytest.mark.parametrize("mode", ["real", "world_model", "wmrl"])
def test_each_mode_writes_a_complete_run_directory(synthetic_config, tmp_path, mode):
    summary = train(_cfg(synthetic_config, tmp_path, f"mode={mode}", "logging.tensorboard=true"))
    run = tmp_path / "run"
    for name in ("config.yaml", "metrics.jsonl", "summary.json", "checkpoints/last.pt", "checkpoints/step_000012.pt",
                 "plots/evaluation.png", "plots/compute.png"):
        assert (run / name).exists(), name
    assert any((run / "tensorboard").iterdir())
    records = read_metrics(run)
    assert [r["step"] for r in records] == list(range(13))
    for key in REQUIRED:
        assert key in records[-1], key
    assert json.loads((run / "summary.json").read_text())["final"]["step"] == 12
    last = records[-1]
    assert math.isclose(last["fusion/w_real"] + last["fusion/w_world_model"], 1.0)
    executed = last["compute/execution_items"]
    if mode == "real":
        assert executed == 12 * 20 * 8 and last["compute/world_model_calls"] == 0
    elif mode == "world_model":
        assert executed == 0 and last["fusion/w_world_model"] == 1.0
    else:
        assert executed == 12 * 2 * 8  # 10% of 20 groups of 8
        assert last["compute/world_model_items"] == 12 * 20 * 8
        assert summary["final"]["debias/n_pairs"] == executed


def test_resume_reproduces_an_uninterrupted_run(synthetic_config, tmp_path):
    full = tmp_path / "full"
    train(load_config(synthetic_config, [f"run_dir={full}", "steps=10", "checkpoint.every=4", "eval.every=2",
                                         "logging.progress=false", "logging.tensorboard=false"]))
    part = tmp_path / "part"
    train(load_config(synthetic_config, [f"run_dir={part}", "steps=6", "checkpoint.every=4", "eval.every=2",
                                         "logging.progress=false", "logging.tensorboard=false"]))
    # the run "crashed" after step 6; its last checkpoint is step 4 ... but the final step is
    # always checkpointed, so kill the step-6 checkpoint to resume from step 4 as after a crash
    (part / "checkpoints" / "last.pt").unlink()
    (part / "checkpoints" / "step_000004.pt").rename(part / "checkpoints" / "last.pt")
    train(load_config(synthetic_config, [f"run_dir={part}", "steps=10", "checkpoint.every=4", "eval.every=2",
                                         "logging.progress=false", "logging.tensorboard=false", "resume=true"]))
    a, b = read_metrics(full), read_metrics(part)
    assert [r["step"] for r in b] == list(range(11))

    def strip(r):
        return {k: v for k, v in r.items() if not k.startswith("wall/")}
    assert [strip(r) for r in a] == [strip(r) for r in b]


def test_wmrl_beats_world_model_only_on_the_truth(synthetic_config, tmp_path):
    wm = train(load_config(synthetic_config, [f"run_dir={tmp_path / 'wm'}", "mode=world_model", "steps=40",
                                              "logging.progress=false", "logging.tensorboard=false"]))
    ours = train(load_config(synthetic_config, [f"run_dir={tmp_path / 'ours'}", "mode=wmrl", "steps=40",
                                                "logging.progress=false", "logging.tensorboard=false"]))
    assert ours["final"]["eval/true_reward"] > wm["final"]["eval/true_reward"] + 0.15

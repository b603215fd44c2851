"""``checkpoint.at_steps``: checkpoints kept at listed steps (0: the initial policy), for
evaluating the kept policies offline after training."""

import pytest
import torch

from wmrl_core.config import load_config
from wmrl_core.errors import ConfigError
from wmrl_core.metrics import read_metrics
from wmrl_core.trainer import train

COMMON = ["steps=3", "eval.every=0", "logging.progress=false", "logging.tensorboard=false", "checkpoint.every=0"]


def _cfg(path, run_dir, *overrides):
    return load_config(path, [*COMMON, f"run_dir={run_dir}", *overrides])


def test_the_listed_steps_and_the_last_are_kept_and_step_0_is_the_initial_policy(synthetic_config, tmp_path):
    train(_cfg(synthetic_config, tmp_path / "run", "checkpoint.at_steps=[0,2]"))
    ckpts = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("step_*.pt")) == ["step_000000.pt", "step_000002.pt", "step_000003.pt"]
    # the same seed without any update: its step-0 checkpoint holds the same parameters
    train(_cfg(synthetic_config, tmp_path / "none", "steps=0", "checkpoint.at_steps=[0]"))
    initial = torch.load(tmp_path / "none" / "checkpoints" / "step_000000.pt", weights_only=False)["policy"]
    kept = torch.load(ckpts / "step_000000.pt", weights_only=False)
    assert kept["step"] == 0
    for key, value in initial.items():
        assert torch.equal(torch.as_tensor(kept["policy"][key]), torch.as_tensor(value)), key


def test_a_resume_from_the_step_0_checkpoint_writes_step_0_once(synthetic_config, tmp_path):
    run = tmp_path / "run"
    train(_cfg(synthetic_config, run, "checkpoint.at_steps=[0]"))
    ckpts = run / "checkpoints"
    for path in ckpts.glob("*.pt"):
        if path.name != "step_000000.pt":
            path.unlink()
    train(_cfg(synthetic_config, run, "checkpoint.at_steps=[0]", "resume=true"))
    assert [r["step"] for r in read_metrics(run)] == list(range(4))


@pytest.mark.parametrize("steps", ["[-1]", "[4]"])
def test_steps_outside_the_run_are_refused(synthetic_config, tmp_path, steps):
    with pytest.raises(ConfigError, match=r"checkpoint.at_steps must lie in \[0, steps=3\]"):
        _cfg(synthetic_config, tmp_path / "run", f"checkpoint.at_steps={steps}")

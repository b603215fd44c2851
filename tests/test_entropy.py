"""Entropy bonus, the ``policy/entropy`` metric, and the ``noise`` world model of the control runs."""

import io
import math

import numpy as np
import pytest
import torch
from rich.console import Console

from wmrl_core import hookimpl
from wmrl_core.config import load_config
from wmrl_core.errors import ConfigError
from wmrl_core.experiments.noise import NoiseWorldModel
from wmrl_core.grpo import entropy_bonus, rollout_entropy
from wmrl_core.metrics import read_metrics
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.progress import SHOWN, TrainingProgress
from wmrl_core.synthetic.policy import TabularSoftmaxPolicy
from wmrl_core.trainer import train
from wmrl_core.types import Task

ENTROPY = torch.tensor([[1.0, 2.0], [3.0, 0.5]])
MASK = torch.tensor([[1.0, 1.0], [1.0, 0.0]])


def test_entropy_bonus_by_hand():
    h = ENTROPY.clone().requires_grad_(True)
    # token_mean: (1 + 2 + 3) / 3 = 2 -> -0.5 * 2
    loss = entropy_bonus(h, MASK, 0.5, "token_mean")
    assert loss.item() == pytest.approx(-1.0)
    loss.backward()
    assert torch.allclose(h.grad, -0.5 * MASK / 3)  # masked tokens get no push
    # sequence_mean: rows (1 + 2) / 2 = 1.5 and 3 / 1 = 3 -> mean 2.25
    assert entropy_bonus(ENTROPY, MASK, 0.5, "sequence_mean").item() == pytest.approx(-1.125)
    assert entropy_bonus(ENTROPY, MASK, 0.0).item() == 0.0
    with pytest.raises(ValueError, match=">= 0"):
        entropy_bonus(ENTROPY, MASK, -0.1)


def test_rollout_entropy_sums_existing_tokens():
    assert rollout_entropy(ENTROPY, MASK).tolist() == [3.0, 3.0]


@pytest.mark.parametrize(
    "override, key",
    [
        ("grpo.entropy_coef=-0.1", "entropy_coef"),
        ("grpo.kl_coef=-1", "kl_coef"),
        ("grpo.lr=0", "lr"),
        ("grpo.entropy_coef=nan", "entropy_coef"),
    ],
)
def test_config_rejects_bad_regularisation(synthetic_config, override, key):
    with pytest.raises(ConfigError, match=f"grpo.{key}"):
        load_config(synthetic_config, [override])


# --------------------------------------------------------------------------- noise world model


def test_noise_world_model_is_uniform_reproducible_and_resumable():
    tasks, solutions = [Task("t")] * 2000, ["x"] * 2000
    wm = NoiseWorldModel(low=-2.0, high=3.0, seed=7)
    first = np.asarray(wm.predict(tasks, solutions))
    assert first.min() >= -2.0 and first.max() < 3.0
    assert abs(first.mean() - 0.5) < 0.15 and abs(first.var() - 25 / 12) < 0.25  # U(-2, 3)
    state = wm.state_dict()
    second = wm.predict(tasks, solutions)
    assert not np.allclose(first, second)  # a fresh draw per call
    resumed = NoiseWorldModel(seed=0, low=-2.0, high=3.0)
    resumed.load_state_dict(state)
    assert resumed.predict(tasks, solutions) == second
    assert NoiseWorldModel(low=-2.0, high=3.0, seed=7).predict(tasks, solutions) == first.tolist()
    with pytest.raises(ValueError, match="low < high"):
        NoiseWorldModel(low=1.0, high=1.0)
    with pytest.raises(ValueError, match="one task per solution"):
        wm.predict(tasks[:1], solutions)


def test_noise_world_model_is_registered():
    spec = build_registry(get_plugin_manager(entry_points=False)).world_models.get("noise")
    assert isinstance(spec.make(env=None, seed=1), NoiseWorldModel)


# --------------------------------------------------------------------------- trainer


class EntropySoftmaxPolicy(TabularSoftmaxPolicy):
    """The synthetic policy with the optional ``entropy`` method (one token per rollout)."""

    def entropy(self, rollouts):
        return torch.distributions.Categorical(logits=self.logits[rollouts.extra["rows"]]).entropy().unsqueeze(-1)


class EntropyPlugin:
    @hookimpl
    def wmrl_register_policies(self, table):
        table.add("tabular-softmax-entropy", EntropySoftmaxPolicy)


def _run(synthetic_config, tmp_path, name, *overrides, plugins=()):
    cfg = load_config(
        synthetic_config,
        [
            f"run_dir={tmp_path / name}",
            "mode=world_model",
            "steps=12",
            "eval.every=0",
            "checkpoint.every=0",
            *overrides,
        ],
    )
    train(cfg, plugin_manager=get_plugin_manager(entry_points=False, extra_plugins=plugins))
    return [r for r in read_metrics(tmp_path / name) if r["step"] > 0]


@pytest.mark.slow
def test_policy_without_entropy_logs_nan_and_refuses_the_bonus(synthetic_config, tmp_path):
    records = _run(synthetic_config, tmp_path, "plain")
    assert all(r["policy/entropy"] is None for r in records)  # NaN, written to metrics.jsonl as null
    with pytest.raises(ConfigError, match=r"entropy\(rollouts\).*'tabular-softmax' has none.*grpo.entropy_coef=0"):
        _run(synthetic_config, tmp_path, "bonus", "grpo.entropy_coef=0.1")


@pytest.mark.slow
def test_entropy_metric_and_bonus_in_training(synthetic_config, tmp_path):
    plugins = [EntropyPlugin()]
    plain = _run(
        synthetic_config, tmp_path, "plain", "policy.name=tabular-softmax-entropy", "grpo.lr=0.3", plugins=plugins
    )
    assert plain[0]["policy/entropy"] == pytest.approx(math.log(10))  # uniform over 10 arms
    bonus = _run(
        synthetic_config,
        tmp_path,
        "bonus",
        "policy.name=tabular-softmax-entropy",
        "grpo.lr=0.3",
        "grpo.entropy_coef=1.0",
        plugins=plugins,
    )
    assert bonus[0]["policy/entropy"] == pytest.approx(math.log(10))
    # the miscalibrated world model pulls every task to its decoy arm; the bonus holds it back
    assert plain[-1]["policy/entropy"] < 0.8 * math.log(10)
    assert bonus[-1]["policy/entropy"] > plain[-1]["policy/entropy"] + 0.3


def test_progress_bar_shows_entropy():
    terminal = Console(file=io.StringIO(), force_terminal=True)
    progress = TrainingProgress(total=2, enabled=True, console=terminal)
    try:
        progress.update(1, {"reward/train_mean": 0.5, "policy/entropy": 9.53})
        assert "entropy=9.53" in progress._progress.tasks[0].fields["info"]
    finally:
        progress.close()


def test_progress_is_a_plain_line_per_step_in_a_log_file():
    log = io.StringIO()
    progress = TrainingProgress(total=12, label="real", console=Console(file=log, force_terminal=False))
    progress.update(3, {"reward/train_mean": 0.59, "policy/entropy": float("nan"), "compute/total_s": 832.0})
    progress.close()
    assert log.getvalue() == "real: step 3/12 reward=0.59 compute_s=832\n"  # NaN left out
    wide = io.StringIO()  # every shown metric: longer than a log console's 80 columns, still one line
    full = {key: 1234.5678 for key, _ in SHOWN}
    TrainingProgress(total=12, label="wmrl", console=Console(file=wide, force_terminal=False)).update(3, full)
    assert wide.getvalue().count("\n") == 1 and len(wide.getvalue()) > 80
    silent = io.StringIO()
    TrainingProgress(total=2, enabled=False, console=Console(file=silent)).update(1, {"reward/train_mean": 1.0})
    assert silent.getvalue() == ""

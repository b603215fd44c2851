"""The program policy's exact entropy, and the noise control of the shipped defaults (no Docker:
``world_model`` mode scores every rollout with a world model)."""

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from wmrl_autoresearch.experiments import config_path
from wmrl_autoresearch.program.grammar import N_OPTIONS
from wmrl_autoresearch.program.policy import ProgramPolicy
from wmrl_autoresearch.tasks.builtin_suite import builtin_tasks

from wmrl_core.components import make_components
from wmrl_core.config import load_config
from wmrl_core.grpo import rollout_entropy
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.trainer import extract_rewards, train

ROOT = Path(__file__).resolve().parents[3]  # the repository: `wmrl experiment` finds its studies there

WORLD_MODEL_CONFIG = config_path("world_model.yaml")
MAX_ENTROPY = sum(math.log(n) for n in N_OPTIONS)  # 9.53 nats: uniform over every menu


def test_initial_policy_has_the_maximal_entropy_per_rollout():
    policy = ProgramPolicy(seed=0)
    rollouts = policy.generate(builtin_tasks("train")[:3], 4)
    entropy = policy.entropy(rollouts)
    assert entropy.shape == rollouts.old_log_probs.shape
    assert torch.allclose(rollout_entropy(entropy, rollouts.mask), torch.full((12,), MAX_ENTROPY))


@pytest.mark.slow
def test_mean_rollout_entropy_is_the_exact_entropy_of_the_program_distribution():
    """Chain rule, checked by enumerating all 13,824 programs of one task under a trained-looking
    (randomly perturbed) policy: E_p[sum_k H_k(prefix)] = -sum_programs p log p."""
    policy = ProgramPolicy(seed=0)
    torch.manual_seed(1)
    with torch.no_grad():
        for head in policy.heads:
            head.weight.normal_(0.0, 0.5)
            head.bias.normal_(0.0, 1.0)
    task = builtin_tasks("train")[0]
    template = policy.generate([task], 2)
    choices = torch.tensor(list(itertools.product(*(range(n) for n in N_OPTIONS))))
    rollouts = type(template)(
        tasks=[task] * len(choices),
        solutions=[None] * len(choices),
        group_ids=template.group_ids,
        old_log_probs=template.old_log_probs,
        mask=template.mask,
        extra={"features": template.extra["features"][:1].expand(len(choices), -1), "choices": choices},
    )
    with torch.no_grad():
        log_p = policy.log_probs(rollouts).sum(1).double()
        per_rollout = policy.entropy(rollouts).sum(1).double()
    p = log_p.exp()
    assert p.sum().item() == pytest.approx(1.0, abs=1e-5)
    joint = -(p * log_p).sum().item()
    assert (p * per_rollout).sum().item() == pytest.approx(joint, rel=1e-5)
    assert 1.0 < joint < MAX_ENTROPY - 0.5  # the perturbation moved it well away from uniform


def test_entropy_is_differentiable():
    policy = ProgramPolicy(seed=0)
    rollouts = policy.generate(builtin_tasks("train")[:2], 3)
    policy.entropy(rollouts).sum().backward()
    assert policy.encode.weight.grad is not None


# --------------------------------------------------------------------------- noise control


@torch.no_grad()
def measure_policy(cfg, trained: bool = True, samples_per_task: int = 16) -> dict[str, float]:
    """Exact entropy and learned-world-model reward of the run's final (or initial) policy on
    fresh samples of every training task."""
    cfg.world_model.name = "program-world-model"
    pm = get_plugin_manager()
    c = make_components(cfg, build_registry(pm), pm)
    try:
        if trained:
            state = torch.load(Path(cfg.run_dir) / "checkpoints" / "last.pt", weights_only=False)
            c.policy.load_state_dict(state["policy"])
        with torch.random.fork_rng():
            torch.manual_seed(123)
            rollouts = c.policy.generate(c.environment.tasks("train"), samples_per_task)
        rewards = extract_rewards(c.reward, rollouts.tasks, c.world_model.predict(rollouts.tasks, rollouts.solutions))
        return {
            "entropy": float(rollout_entropy(c.policy.entropy(rollouts), rollouts.mask).mean()),
            "learned_reward": float(rewards.mean()),
        }
    finally:
        c.close()


def _train(tmp_path, world_model: str, *overrides):
    cfg = load_config(
        WORLD_MODEL_CONFIG,
        [
            f"world_model.name={world_model}",
            f"run_dir={tmp_path / 'run'}",
            "eval.every=0",
            "checkpoint.every=0",
            "logging.progress=false",
            "logging.tensorboard=false",
            *overrides,
        ],
    )
    assert cfg.steps == 16 and (cfg.rollout.batch_tasks, cfg.rollout.group_size) == (10, 4)  # the quickstart's shapes
    train(cfg)
    return cfg


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shipped_defaults_keep_80_percent_of_the_entropy_on_pure_noise(tmp_path, seed):
    cfg = _train(tmp_path, "noise", f"seed={seed}")
    assert measure_policy(cfg)["entropy"] >= 0.8 * MAX_ENTROPY


@pytest.mark.slow
def test_the_old_optimiser_collapses_on_pure_noise(tmp_path):
    """The counter-test: lr 0.03 without a bonus walks to one program on noise alone, so the
    test above can fail."""
    cfg = _train(tmp_path, "noise", "grpo.lr=0.03", "grpo.entropy_coef=0", "grpo.kl_coef=0")
    assert measure_policy(cfg)["entropy"] < 0.3 * MAX_ENTROPY


@pytest.mark.slow
def test_shipped_defaults_still_learn_from_the_learned_world_model(tmp_path):
    cfg = _train(tmp_path, "program-world-model")
    assert measure_policy(cfg)["learned_reward"] > measure_policy(cfg, trained=False)["learned_reward"] + 0.1


@pytest.mark.slow
def test_kl_to_the_initial_policy_also_holds_the_program_policy_on_noise(tmp_path):
    """``grpo.kl_coef`` works for the program policy (a frozen copy is the reference): at the
    old lr 0.03 it keeps the entropy that the counter-test above loses."""
    cfg = _train(tmp_path, "noise", "grpo.lr=0.03", "grpo.entropy_coef=0", "grpo.kl_coef=1.0")
    assert measure_policy(cfg)["entropy"] >= 0.8 * MAX_ENTROPY


def test_quickstart_real_and_world_model_configs_share_the_optimiser():
    """The benchmark's arms compare methods, not optimisers: every AutoResearch config trains
    with the same noise-controlled settings."""
    grpo = {name: load_config(config_path(f"{name}.yaml")).grpo for name in ("quickstart", "real", "world_model")}
    assert len({(g.lr, g.entropy_coef, g.kl_coef, g.clip_eps) for g in grpo.values()}) == 1
    assert grpo["quickstart"].entropy_coef > 0 or grpo["quickstart"].kl_coef > 0


def test_quickstart_real_and_world_model_configs_share_the_family_split():
    """The baselines train on the main job's tasks, and no shipped world model was fitted on them:
    every AutoResearch config trains on R, and those with a learned world model fit it on W only."""
    cfgs = {name: load_config(config_path(f"{name}.yaml")) for name in ("quickstart", "real", "world_model")}
    assert {tuple(c.environment.kwargs["train_families"]) for c in cfgs.values()} == {("R",)}
    for name in ("quickstart", "world_model"):
        assert list(cfgs[name].world_model.kwargs["fit_families"]) == ["W"], name


@pytest.mark.slow
def test_noise_control_script_prints_the_table_and_writes_the_plot(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wmrl_core.cli",
            "experiment",
            "noise-control",
            "--cells",
            "0.03,0,0",
            "--seeds",
            "0-0",
            "--steps",
            "2",
            "--runs",
            str(tmp_path / "runs"),
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| 0.03 | 0 | 0 |" in proc.stdout
    (result,) = [r for r in json.loads((tmp_path / "out" / "noise_control.json").read_text()) if r["source"] == "noise"]
    assert len(result["entropy_curve"]) == 2 and result["entropy_curve"][0] == pytest.approx(MAX_ENTROPY, rel=1e-5)
    assert (tmp_path / "out" / "noise_control_entropy.png").stat().st_size > 0

"""Launching the verl integration through verl 0.9.1's own code: the shipped and documented recipes
pass verl's ``validate_config``, the three ``wmrl`` names resolve inside the Ray workers verl's
``run_ppo`` starts, the trainer keeps verl's sync behaviour, and its anchor draw honours
``anchors.min_groups`` on batches from verl's own dataloader."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

if os.environ.get("CI") != "true":  # CI runs these in the verl environment it creates: a missing verl fails there
    pytest.importorskip("verl", reason="the verl integration runs in its own environment (docs/integrations.md)")

DOCS = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"


def _validate(config) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


def documented_recipe() -> list[str]:
    """The overrides of the ``python -m wmrl_verl.main`` command in the verl section of the docs."""
    verl_section = DOCS.read_text().split("\n## verl\n", 1)[1]
    for block in re.findall(r"```bash\n(.*?)```", verl_section, flags=re.S):
        if "-m wmrl_verl.main" in block:
            words = shlex.split(block.replace("\\\n", " "), comments=True)
            return words[words.index("wmrl_verl.main") + 1 :]
    raise AssertionError("the verl section of docs/integrations.md has no `python -m wmrl_verl.main` command")


@pytest.mark.slow
def test_shipped_recipe_passes_verls_validate_config(compose_verl, gpu_fit, tmp_path):
    _validate(compose_verl(gpu_fit.recipe(tmp_path, tmp_path / "qwen2")))


@pytest.mark.slow
def test_documented_recipe_passes_verls_validate_config(compose_verl):
    overrides = documented_recipe()
    assert "trainer.v1.trainer_mode=wmrl" in overrides
    _validate(compose_verl(overrides))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_registrations_resolve_in_verls_ray_workers(compose_verl, tmp_path):
    """verl's ``run_ppo`` starts Ray and runs the task runner as an actor; the trainer there starts
    the reward loop workers. Both must resolve ``wmrl`` (this test process registered it too, which
    proves nothing about them)."""
    import ray
    from verl.trainer.main_ppo import run_ppo
    from wmrl_verl.registration import with_worker_registration

    assert not ray.is_initialized(), "this test needs the Ray cluster that run_ppo starts"
    config = compose_verl(
        [
            "trainer.v1.trainer_mode=wmrl",
            "ray_kwargs.ray_init.num_cpus=1",
            "+ray_kwargs.ray_init.include_dashboard=false",
        ]
    )
    report = tmp_path / "resolved.json"

    # Defined here, so Ray ships them by value: unpickling them imports no test module (and no wmrl_verl)
    def resolve() -> dict[str, str]:
        from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
        from verl.trainer.ppo.core_algos import get_adv_estimator_fn
        from verl.trainer.ppo.v1 import get_trainer_cls

        found = {}
        for kind, lookup in [
            ("trainer", get_trainer_cls),
            ("estimator", get_adv_estimator_fn),
            ("reward_manager", get_reward_manager_cls),
        ]:
            try:
                obj = lookup("wmrl")
                found[kind] = f"{obj.__module__}.{obj.__qualname__}"
            except Exception as exc:
                found[kind] = f"{type(exc).__name__}: {exc}"
        return found

    @ray.remote(num_cpus=0)
    class TaskRunner:
        def run(self, config) -> None:
            import json

            import ray

            nested = ray.get(ray.remote(num_cpus=0)(resolve).remote())
            report.write_text(json.dumps({"task_runner": resolve(), "worker_it_starts": nested}))

    try:
        run_ppo(with_worker_registration(config), task_runner_class=TaskRunner)
    finally:
        ray.shutdown()
    expected = {
        "trainer": "wmrl_verl.trainer.WMRLPPOTrainer",
        "estimator": "wmrl_verl.registration.wmrl_advantage",
        "reward_manager": "wmrl_verl.reward_manager.WMRLRewardManager",
    }
    resolved = json.loads(report.read_text())
    assert resolved == {"task_runner": expected, "worker_it_starts": expected}


@pytest.mark.slow
def test_main_hands_verls_main_the_recipe_with_the_worker_hook(monkeypatch, gpu_fit, tmp_path):
    import sys

    import wmrl_verl.main as entry
    from wmrl_verl.registration import SETUP_HOOK

    handed = []
    monkeypatch.setattr(entry, "verl_main", handed.append)
    hydra_quiet = [f"hydra.run.dir={tmp_path}", "hydra.output_subdir=null", "hydra/job_logging=none"]
    monkeypatch.setattr(sys, "argv", ["wmrl_verl.main", *gpu_fit.recipe(tmp_path, tmp_path / "qwen2"), *hydra_quiet])
    entry.main()
    (config,) = handed
    assert config.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook == SETUP_HOOK
    assert config.trainer.v1.trainer_mode == "wmrl" and config.wmrl.config == str(tmp_path / "wmrl.yaml")


def test_worker_registration_refuses_another_setup_hook(compose_verl):
    from wmrl_verl.registration import SETUP_HOOK, with_worker_registration

    from wmrl_core.errors import ConfigError

    config = with_worker_registration(compose_verl([]))
    assert config.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook == SETUP_HOOK
    assert with_worker_registration(config) is config
    theirs = compose_verl(["+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=my.hook"])
    with pytest.raises(ConfigError, match="register()"):
        with_worker_registration(theirs)


@pytest.mark.slow
def test_trainer_keeps_verls_sync_behaviour(run_config):
    """verl picks the replay buffer, the prompt refill and TransferQueue checkpoints by
    ``trainer_mode == "sync"``; ``trainer_mode=wmrl`` must not turn them asynchronous."""
    from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync
    from wmrl_verl.trainer import WMRLPPOTrainer

    trainer = WMRLPPOTrainer(run_config())
    assert trainer.trainer_mode == "sync" and not isinstance(trainer.replay_buffer, ReplayBufferAsync)


@pytest.mark.slow
def test_every_step_has_min_groups_anchor_groups(run_config):
    """With 8 groups, ``anchors.fraction=0.1`` and ``anchors.min_groups=2`` (the fixture's), every
    step marks exactly 2 groups, drawn anew each step, on prompts from verl's own dataloader."""
    from wmrl_verl.settings import EXECUTE
    from wmrl_verl.trainer import WMRLPPOTrainer

    trainer = WMRLPPOTrainer(run_config())
    trainer._init_tokenizer()
    trainer._init_dataloader()
    drawn = []
    for step in range(1, 21):
        trainer.global_steps = step
        batch = trainer._next_train_batch()
        marks = [bool(m) for m in batch[EXECUTE]]
        assert len(marks) == 8 and sum(marks) == 2, marks
        drawn.append(tuple(marks))
    assert len(set(drawn)) > 5

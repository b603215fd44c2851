"""The verl integration's pieces on the CPU, with real ``DataProto`` batches: the reward manager's
per-trajectory fields, the world-model scorer (one call per batch), the ``wmrl`` estimator against
WMRL's engine (and its state through a checkpoint), the ``wmrl`` section of verl's config and the
registrations. verl's own code paths drive them in ``test_verl_launch.py`` and
``test_verl_rollout_path.py``; ``fit()`` needs GPUs and is not run here."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

if os.environ.get("CI") == "true":  # CI runs these in the verl environment it creates: a missing verl fails there
    import verl
else:
    verl = pytest.importorskip("verl", reason="the verl integration runs in its own environment (docs/integrations.md)")

from verl import DataProto  # noqa: E402

from wmrl_core.calibration import RewardCalibrator  # noqa: E402
from wmrl_core.config import load_config  # noqa: E402
from wmrl_core.fusion import FusionSettings, build_fuser, fuse_step  # noqa: E402
from wmrl_core.types import Outcome, Task  # noqa: E402


def _cfg(*overrides):
    """The WMRL config the estimator and reward manager read (the components are passed in)."""
    names = ["environment.name=letters", "policy.name=verl-actor", "world_model.name=letters-wm"]
    return load_config(None, [*names, "anchors.fraction=0.5", *overrides])


class Letters:
    """Executes a response: the share of its letters that are ``a``; the world model predicts it
    with a monotone distortion."""

    def __init__(self):
        self.executed: list[str] = []

    def tasks(self, split):
        return [Task("t0", "say a lot of a"), Task("t1", "say b")]

    def execute(self, tasks, solutions):
        self.executed.extend(solutions)
        return [Outcome("ok", s.count("a") / max(len(s), 1)) for s in solutions]

    def predict(self, tasks, solutions):
        return [Outcome("ok", 0.1 + 0.5 * (s.count("a") / max(len(s), 1)) ** 2) for s in solutions]


def _batch(n_groups=4, group_size=4, length=6, seed=0):
    rng = np.random.default_rng(seed)
    n = n_groups * group_size
    lengths = rng.integers(1, length + 1, size=n)
    mask = (torch.arange(length)[None, :] < torch.as_tensor(lengths)[:, None]).float()
    uids = np.array([f"uid-{g}" for g in range(n_groups) for _ in range(group_size)], dtype=object)
    wm = rng.uniform(size=n)
    real = np.where(rng.uniform(size=n) < 0.5, np.nan, wm + rng.normal(0, 0.1, size=n))
    return mask, uids, wm, real


def _manager(env):
    from omegaconf import OmegaConf
    from wmrl_verl import WMRLRewardManager

    from wmrl_core.builtin_rewards import ScoreReward

    class Tok:
        def decode(self, ids, skip_special_tokens=True):
            return "".join("a" if int(i) % 2 else "b" for i in ids)

    return WMRLRewardManager(OmegaConf.create({}), Tok(), None, wmrl_config=_cfg(), components=(env, ScoreReward()))


def _rollout(uid, ids, execute, task_id="t0"):
    """One trajectory's reward batch in verl 0.9.1's layout: the prompt's columns in
    ``non_tensor_batch`` and an empty ``meta_info`` (``AgentLoopWorker._compute_score``)."""
    from wmrl_verl.settings import EXECUTE

    responses = torch.as_tensor([ids])
    prompt = torch.ones(1, 2, dtype=torch.long)
    return DataProto.from_dict(
        tensors={
            "prompts": prompt,
            "responses": responses,
            "attention_mask": torch.ones(1, 2 + responses.shape[1], dtype=torch.long),
        },
        non_tensors={
            "uid": np.array([uid], dtype=object),
            "global_steps": np.array([5]),
            "extra_info": np.array([{"task_id": task_id}]),
            EXECUTE: np.array([execute]),
        },
    )


def test_reward_manager_executes_the_marked_trajectories_only():
    env = Letters()
    manager = _manager(env)
    marks = [True, False, False, True, False]
    outputs = [
        manager.loop.run_until_complete(manager.run_single(_rollout(f"uid-{i}", [1, 1, 2], execute=m)))
        for i, m in enumerate(marks)
    ]
    assert env.executed == ["aab"] * sum(marks)
    for out, mark in zip(outputs, marks, strict=True):
        info = out["reward_extra_info"]
        assert info["wmrl_anchor"] is mark
        if mark:
            assert math.isclose(info["wmrl_real_reward"], 2 / 3) and out["reward_score"] == info["wmrl_real_reward"]
        else:
            assert math.isnan(info["wmrl_real_reward"]) and out["reward_score"] == 0.0


def test_reward_manager_errors_name_the_fix():
    from wmrl_verl.settings import EXECUTE

    from wmrl_core.errors import ConfigError

    manager = _manager(Letters())
    with pytest.raises(ConfigError, match="extra_info.task_id"):
        manager.loop.run_until_complete(manager.run_single(_rollout("u", [1], execute=True, task_id="nope")))
    data = _rollout("u", [1], execute=True)
    data.non_tensor_batch.pop(EXECUTE)
    with pytest.raises(ConfigError, match="trainer_mode=wmrl"):
        manager.loop.run_until_complete(manager.run_single(data))


def test_world_model_scorer_predicts_a_batch_in_one_call():
    from wmrl_verl.world_model import WorldModelScorer

    from wmrl_core.builtin_rewards import ScoreReward

    class Counting(Letters):
        def __init__(self):
            super().__init__()
            self.calls: list[int] = []

        def predict(self, tasks, solutions):
            self.calls.append(len(solutions))
            return [
                Outcome("no_prediction", None) if s == "" else p
                for s, p in zip(solutions, super().predict(tasks, solutions), strict=True)
            ]

    env = Counting()
    scorer = WorldModelScorer(wmrl_config=_cfg(), components=(env, env, ScoreReward()))
    refs = [("t0", None), ("t1", None), ("t0", "train"), ("t1", None)]
    rewards, faults = scorer.rewards(refs, ["aa", "ab", "", "bb"])
    assert env.calls == [4] and env.executed == []
    np.testing.assert_allclose(rewards, [0.6, 0.1 + 0.5 * 0.25, math.nan, 0.1])
    assert isinstance(faults, dict)


def test_wmrl_section_of_verls_config():
    from omegaconf import OmegaConf
    from wmrl_verl.settings import solution_mapping, wmrl_config_from_verl, world_model_worker_options

    from wmrl_core.errors import ConfigError
    from wmrl_core.vowels import vowel_share

    assert solution_mapping(OmegaConf.create({}))(Task("t", ""), "text") == "text"
    config = OmegaConf.create(
        {"wmrl": {"to_solution": "wmrl_core.vowels:vowel_share", "world_model_worker": {"num_gpus": 1}}}
    )
    assert solution_mapping(config) is vowel_share
    assert world_model_worker_options(config) == {"num_cpus": 1, "num_gpus": 1}
    with pytest.raises(ConfigError, match="package.module:function"):
        solution_mapping(OmegaConf.create({"wmrl": {"to_solution": "wmrl_core.vowels:nothing_here"}}))
    with pytest.raises(ConfigError, match=r"\+wmrl.config="):
        wmrl_config_from_verl(config)


@pytest.mark.parametrize(
    "loss_agg_mode, aggregation", [("token-mean", "token_mean"), ("seq-mean-token-mean", "sequence_mean")]
)
@pytest.mark.parametrize("method", ["mse_weighted", "rectified", "inverse_variance", "pooled", "anchors_only"])
def test_estimator_writes_wmrl_engines_advantages(method, loss_agg_mode, aggregation):
    from wmrl_verl import WMRLAdvantageEstimator

    cfg = _cfg(f"fusion.method={method}")
    estimator = WMRLAdvantageEstimator(cfg, loss_agg_mode=loss_agg_mode)
    calibrator, fuser = RewardCalibrator.from_config(cfg.calibration), build_fuser(method, cfg.fusion)
    for step in range(1, 5):
        mask, uids, wm, _ = _batch(seed=step)
        anchor_groups = np.array([True, False, False, True])
        group_ids = np.repeat(np.arange(4), 4)
        real = np.where(anchor_groups[group_ids], wm + np.random.default_rng(step).normal(0, 0.1, 16), np.nan)
        data = DataProto.from_dict(
            tensors={"response_mask": mask},
            non_tensors={
                "uid": uids,
                "wmrl_world_model_reward": wm,
                "wmrl_real_reward": real,
                "wmrl_anchor": anchor_groups[group_ids],
            },
        )
        data = estimator.compute(data)
        expected = fuse_step(
            world_model_rewards=wm,
            real_rewards=real,
            group_ids=group_ids,
            anchor_groups=anchor_groups,
            token_counts=mask.sum(-1).numpy(),
            calibrator=calibrator,
            fuser=fuser,
            settings=FusionSettings(aggregation=aggregation),
            step=step,
        )
        calibrator, fuser = expected.calibrator, expected.fuser
        adv = data.batch["advantages"]
        assert adv.shape == mask.shape and torch.all(adv[mask == 0] == 0)
        np.testing.assert_allclose(adv[:, 0].numpy(), expected.advantages, rtol=1e-6, atol=1e-6)
    assert data.meta_info["wmrl"]["calibration/n_pairs"] == 4 * 8

    restored = WMRLAdvantageEstimator(cfg, loss_agg_mode=loss_agg_mode)
    restored.load_state_dict(estimator.state_dict())
    assert restored.step == 4 and restored.calibrator.n_pairs_ == estimator.calibrator.n_pairs_


def test_estimator_refuses_partial_groups_and_unknown_aggregation():
    from wmrl_verl import WMRLAdvantageEstimator

    from wmrl_core.errors import ConfigError

    with pytest.raises(ConfigError, match="loss_agg_mode"):
        WMRLAdvantageEstimator(_cfg(), loss_agg_mode="seq-mean-token-sum")
    mask, uids, wm, real = _batch()
    anchors = np.zeros(16, dtype=bool)
    anchors[0] = True  # one rollout of a group of four
    data = DataProto.from_dict(
        tensors={"response_mask": mask},
        non_tensors={"uid": uids, "wmrl_world_model_reward": wm, "wmrl_real_reward": real, "wmrl_anchor": anchors},
    )
    with pytest.raises(ValueError, match="partly anchored"):
        WMRLAdvantageEstimator(_cfg()).compute(data)


def test_registered_with_verl():
    import wmrl_verl
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    from wmrl_core.errors import ConfigError

    assert get_reward_manager_cls("wmrl") is wmrl_verl.WMRLRewardManager
    fn = get_adv_estimator_fn("wmrl")
    mask, uids, _, _ = _batch()
    with pytest.raises(ConfigError, match="trainer_mode=wmrl"):
        fn(token_level_rewards=torch.zeros_like(mask), response_mask=mask, index=uids)


def test_trainer_is_registered():
    from verl.trainer.ppo.v1 import get_trainer_cls
    from wmrl_verl.trainer import WMRLPPOTrainer

    assert get_trainer_cls("wmrl") is WMRLPPOTrainer

"""A training step and a validation of the verl integration through verl 0.9.1's own code, on a
local Ray cluster with TransferQueue, with only the LLM scripted.

The trainer (``WMRLPPOTrainer``, built from the shipped recipe) draws its batch from verl's
dataloader and submits it; verl's TransferQueue agent-loop worker (in this process; its
``_run_agent_loop`` answers from :data:`RESPONSES` instead of an LLM server) builds each
trajectory's reward batch (``AgentLoopWorker._compute_score``) for verl's ``RewardLoopWorker``,
which runs the ``wmrl`` reward manager that verl's ``load_reward_manager`` made, and stores the
trajectories in TransferQueue; verl's replay buffer samples them; the trainer's
``_compute_advantage`` reads them back, calls the world model on its Ray actor and writes the
advantages.
"""

from __future__ import annotations

import asyncio
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch

if os.environ.get("CI") != "true":  # CI runs these in the verl environment it creates: a missing verl fails there
    pytest.importorskip("verl", reason="the verl integration runs in its own environment (docs/integrations.md)")

from wmrl_core.builtin_rewards import ScoreReward
from wmrl_core.vowels import VowelsWorldModel, vowel_share

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

RESPONSES = ["banana apple", "rhythm crypt gym", "aeiou ooo eee", "the quick brown fox", "lynx myth"]
"""What session ``s`` of the prompt of task ``vowels-k`` answers: ``RESPONSES[(s + k) % 5]``."""


def scripted_response(task_id: str, session_id: int) -> str:
    return RESPONSES[(int(session_id) + int(task_id.rsplit("-", 1)[1])) % len(RESPONSES)]


class LocalHandle:
    """A Ray actor handle (``handle.method.remote(...)``) for an object of this process."""

    def __init__(self, obj):
        self.obj = obj

    def __getattr__(self, name):
        return SimpleNamespace(remote=getattr(self.obj, name))


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()
    asyncio.set_event_loop(None)


@pytest.fixture(scope="module")
def transfer_queue():
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    ray.init(num_cpus=2, include_dashboard=False)
    try:
        # controller and storage ask for one CPU each: one storage unit fits the two
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        yield tq
    finally:
        tq.close()
        ray.shutdown()


@pytest.fixture(scope="module")
def wired(run_config, transfer_queue, loop):
    """The trainer, verl's reward loop worker and the agent-loop worker, wired as verl wires them."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
    from wmrl_verl.trainer import WMRLPPOTrainer
    from wmrl_verl.world_model import start_world_model_worker

    class ScriptedAgentLoopWorker(AgentLoopWorkerTQ.__ray_actor_class__):
        async def _run_agent_loop(self, sampling_params, trajectory, *, agent_name, trace=True, **kwargs):
            text = scripted_response(kwargs["extra_info"]["task_id"], kwargs["session_id"])
            response_ids = self.tokenizer.encode(text)
            output = AgentLoopOutput(
                prompt_ids=self.tokenizer.encode("Write some words."),
                response_ids=response_ids,
                response_mask=[1] * len(response_ids),
                num_turns=2,  # user and assistant, as verl's single-turn agent loop sets it
                metrics=AgentLoopMetrics(),
            )
            return await self._agent_loop_postprocess(output, trajectory["validate"], **kwargs)

    class AgentLoopManager:  # verl's AgentLoopManagerTQ, with its one worker in this process
        def generate_sequences(self, batch):
            async def generate():
                await agent_loop.generate_sequences(batch)
                await asyncio.gather(*list(agent_loop.background_tasks))

            loop.run_until_complete(generate())

    config = run_config()
    reward_worker = RewardLoopWorker(config)
    agent_loop = ScriptedAgentLoopWorker(config, None, None, [LocalHandle(reward_worker)])
    trainer = WMRLPPOTrainer(config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    trainer.agent_loop_manager = AgentLoopManager()
    trainer.reward_loop_manager = SimpleNamespace(reward_loop_worker_handles=[LocalHandle(reward_worker)])
    trainer.world_model = start_world_model_worker(config)
    return SimpleNamespace(trainer=trainer, reward_manager=reward_worker.reward_manager)


@pytest.fixture(scope="module")
def train_step(wired):
    """Step 1's prompts generated, scored and sampled from TransferQueue, as ``fit()`` does it."""
    import transfer_queue as tq
    from wmrl_verl.settings import EXECUTE

    trainer = wired.trainer
    trainer.global_steps = 1
    executed_before = wired.reward_manager.environment.executed
    batch = trainer._next_train_batch()
    marked = {uid: bool(m) for uid, m in zip(batch["uid"], batch[EXECUTE], strict=True)}
    trainer._submit_batch_to_rollout(batch)
    sampled, _ = trainer.replay_buffer.sample(global_steps=1, partition_id="train", batch_size=len(batch))
    fields = ["uid", "session_id", "extra_info", "extra_fields", "response_mask"]
    data = tq.kv_batch_get(keys=sampled.keys, partition_id=sampled.partition_id, select_fields=fields)
    columns = {k: data.pop(k).tolist() for k in ["uid", "session_id", "extra_info", "extra_fields"]}
    rows = [
        {
            "uid": uid,
            "extra_info": extra_info,
            "reward_extra_info": extra_fields["reward_extra_info"],
            "text": scripted_response(extra_info["task_id"], session_id),
            "length": int(length),
        }
        for uid, session_id, extra_info, extra_fields, length in zip(
            *columns.values(), data["response_mask"].offsets().diff(), strict=True
        )
    ]
    executed = wired.reward_manager.environment.executed - executed_before
    return SimpleNamespace(sampled=sampled, rows=rows, marked=marked, executed=executed)


def test_reward_manager_scores_verls_reward_batches(wired, train_step):
    """verl's agent loop hands the reward manager a batch with an empty ``meta_info`` and the
    prompt's columns in ``non_tensor_batch``; the marked groups execute, the others do not."""
    n = wired.trainer.config.actor_rollout_ref.rollout.n
    assert len(train_step.rows) == 8 * n and sum(train_step.marked.values()) == 2
    assert train_step.executed == 2 * n
    for row in train_step.rows:
        info = row["reward_extra_info"]
        assert info["wmrl_anchor"] == train_step.marked[row["uid"]]
        if info["wmrl_anchor"]:
            assert math.isclose(info["wmrl_real_reward"], vowel_share(row["text"]))
        else:
            assert math.isnan(info["wmrl_real_reward"])


def test_trainer_fuses_the_transfer_queue_batch(wired, train_step):
    """``_compute_advantage`` reads the step's trajectories from TransferQueue, asks the world
    model on its actor for all of them at once, and writes WMRL's advantages and shown rewards."""
    import transfer_queue as tq
    from verl import DataProto
    from wmrl_verl.estimator import WMRLAdvantageEstimator

    from wmrl_core.types import Task

    trainer, sampled, rows = wired.trainer, train_step.sampled, train_step.rows
    metrics: dict = {}
    trainer._compute_advantage(sampled, metrics)
    written = tq.kv_batch_get(keys=sampled.keys, partition_id="train", select_fields=["advantages", "rm_scores"])

    tasks = [Task(row["extra_info"]["task_id"], "") for row in rows]
    predictions = VowelsWorldModel().predict(tasks, [row["text"] for row in rows])
    wm = np.array([ScoreReward()(task, p) for task, p in zip(tasks, predictions, strict=True)], dtype=float)
    anchors = np.array([row["reward_extra_info"]["wmrl_anchor"] for row in rows])
    real = np.array([vowel_share(row["text"]) if a else math.nan for row, a in zip(rows, anchors, strict=True)])
    width = max(row["length"] for row in rows)
    mask = torch.tensor([[1.0] * row["length"] + [0.0] * (width - row["length"]) for row in rows])
    expected = WMRLAdvantageEstimator(trainer.wmrl_estimator.cfg).compute(
        DataProto.from_dict(
            tensors={"response_mask": mask},
            non_tensors={
                "uid": np.array([row["uid"] for row in rows], dtype=object),
                "wmrl_world_model_reward": wm,
                "wmrl_real_reward": real,
                "wmrl_anchor": anchors,
            },
        )
    )
    advantages = written["advantages"].to_padded_tensor(0.0)
    np.testing.assert_allclose(advantages.numpy(), expected.batch["advantages"].numpy(), rtol=1e-5, atol=1e-6)
    shown = written["rm_scores"].to_padded_tensor(0.0).sum(-1).numpy()
    np.testing.assert_allclose(shown, np.where(anchors, real, wm), rtol=1e-6)
    assert metrics["wmrl/calibration/n_pairs"] == int(anchors.sum())


def test_validation_rollouts_are_executed_for_real(wired):
    """verl's own ``_validate``: every validation prompt executes; no world model scores it."""
    from wmrl_verl.settings import EXECUTE

    trainer, manager = wired.trainer, wired.reward_manager
    seen = []
    generate = trainer.agent_loop_manager.generate_sequences

    def record(batch):
        seen.append([bool(m) for m in batch[EXECUTE]] if EXECUTE in batch.keys() else None)
        generate(batch)

    trainer.agent_loop_manager.generate_sequences = record
    trainer.global_steps = 0  # validation before training
    executed_before = manager.environment.executed
    metrics = trainer._validate()
    heldout = ["vowels-0", "vowels-1"]  # the vowels domain's heldout split
    assert seen == [[True, True]] and manager.environment.executed - executed_before == len(heldout)
    expected = np.mean([vowel_share(scripted_response(task, 0)) for task in heldout])
    assert metrics["val-core/wmrl-vowels/reward/mean@1"] == pytest.approx(expected)
    assert metrics["val-aux/wmrl-vowels/wmrl_anchor/mean@1"] == 1.0

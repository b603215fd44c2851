"""The ``wmrl`` reward manager for verl's reward loop: real execution of the trajectories the
trainer marked, and nothing else.

verl 0.9.1 calls :meth:`WMRLRewardManager.run_single` once per trajectory, on one of
``reward.num_workers`` CPU actors, as soon as the trajectory is generated
(``AgentLoopWorker._compute_score``). The one-row batch it gets holds the trajectory's tokens and,
in ``non_tensor_batch``, every column of its prompt: the dataset's (``extra_info`` names the task,
:mod:`wmrl_verl.tasks`), verl's (``uid``, ``global_steps``) and
:data:`~wmrl_verl.settings.EXECUTE`, which :class:`~wmrl_verl.trainer.WMRLPPOTrainer` sets per
prompt: ``True`` for the anchor groups of a training step and for every validation prompt. Those
execute in the environment while the rest of the batch is still generating. The world model is
not called here: the trainer calls it once per batch, on the actor that holds it
(:mod:`wmrl_verl.world_model`).

It returns ``reward_score``, the real reward (0 where nothing executed: the trainer puts the world
model's reward there before verl logs it), and ``reward_extra_info`` with ``wmrl_real_reward`` (NaN
where nothing executed) and ``wmrl_anchor`` (whether it executed).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from wmrl_core.config import TrainConfig
from wmrl_core.errors import ConfigError
from wmrl_core.faults import StepFaults
from wmrl_core.types import Task
from wmrl_verl.settings import EXECUTE, solution_mapping, wmrl_config_from_verl
from wmrl_verl.tasks import TaskIndex, task_ref

__all__ = ["WMRLRewardManager", "REWARD_FIELDS"]

REWARD_FIELDS = ("wmrl_real_reward", "wmrl_anchor")
"""The ``reward_extra_info`` keys of every trajectory."""


@register("wmrl")
class WMRLRewardManager(RewardManagerBase):
    """verl ``RewardManagerBase`` that executes the marked trajectories with WMRL's environment.

    :param wmrl_config: the WMRL config, instead of the one ``wmrl.config`` names.
    :param components: ``(environment, reward_extractor)`` to use instead of the ones the WMRL
        config names (tests, notebooks).
    """

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        *,
        wmrl_config: TrainConfig | None = None,
        components: tuple[Any, Any] | None = None,
        **_: Any,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        self.wmrl = wmrl_config or wmrl_config_from_verl(config)
        if components is None:
            from wmrl_core.components import make_scoring_components

            # mode "real" makes no world model: this process never calls one
            made = make_scoring_components(dataclasses.replace(self.wmrl, mode="real"))
            components = (made.environment, made.reward)
        self.environment, self.reward = components
        self.tasks = TaskIndex(self.environment, self.wmrl.rollout.task_split)
        self.to_solution = solution_mapping(config)
        self.faults = StepFaults()

    def _execute(self, task: Task, text: str) -> float:
        outcomes = self.environment.execute([task], [self.to_solution(task, text)])
        if len(outcomes) != 1:
            raise ValueError(f"environment returned {len(outcomes)} outcomes for 1 solution")
        return float(self.faults.rewards(self.reward, [task], outcomes)[0])

    async def run_single(self, data: Any) -> dict:
        item = data[-1:][0]  # a multi-turn trajectory is scored on its last output, as verl does
        columns = item.non_tensor_batch
        if EXECUTE not in columns:
            raise ConfigError(
                f"the reward batch has no {EXECUTE!r} column: run with trainer.v1.trainer_mode=wmrl, whose trainer "
                "marks each prompt as executed for real or not"
            )
        execute = bool(columns[EXECUTE])
        real = math.nan
        if execute:
            task = self.tasks[task_ref(columns.get("extra_info"))]
            response_ids = item.batch["responses"]
            n = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
            text = await self.loop.run_in_executor(
                None, lambda: self.tokenizer.decode(response_ids[:n], skip_special_tokens=True)
            )
            real = await self.loop.run_in_executor(None, self._execute, task, text)
        return {
            "reward_score": 0.0 if math.isnan(real) else real,
            "reward_extra_info": {"wmrl_real_reward": real, "wmrl_anchor": execute},
        }

"""The ``wmrl`` reward manager for verl's reward loop: world model on every trajectory, real
execution on the anchors, both raw rewards passed on as ``reward_extra_info``.

Per trajectory (``run_single``): the anchor decision is a hash of (group ``uid``, seed, step)
against the anchor fraction, :func:`is_anchor`: the same for every rollout of a group, on every
worker, whatever arrives first or however busy the sandboxes are, and independent of the
content. The world model is awaited for every trajectory; real execution only for anchors.
The ``reward_score`` verl needs is the real reward on anchors and the raw world-model reward
elsewhere (what verl logs); the ``wmrl`` advantage estimator ignores it and fuses the two raw
rewards itself (:mod:`wmrl_verl.estimator`).

Configuration (Hydra, beside verl's own keys)::

    reward.reward_manager.name=wmrl
    +wmrl.config=configs/my_domain/wmrl.yaml   # the WMRL config: environment, world model, anchors, fusion
    +wmrl.overrides=[anchors.fraction=0.1]

The task of a trajectory is ``extra_info["task_id"]`` of its dataset row (an id of the
environment's ``tasks(split)``); the step is ``meta_info["global_steps"]``, which verl's trainer
sets on each generation batch.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from wmrl_core.config import TrainConfig, load_config
from wmrl_core.errors import ConfigError
from wmrl_core.faults import StepFaults
from wmrl_core.types import Task

__all__ = ["is_anchor", "WMRLRewardManager", "wmrl_config_from_verl"]


def is_anchor(uid: str, seed: int, step: int, fraction: float) -> bool:
    """``True`` when ``u(uid, seed, step) < fraction``, with ``u`` the first 8 bytes of
    ``sha256("seed:step:uid")`` as a number in ``[0, 1)``: a per-group coin that any process
    computes alike. The count of anchor groups in a step is binomial (no minimum)."""
    digest = hashlib.sha256(f"{seed}:{step}:{uid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def wmrl_config_from_verl(config: Any) -> TrainConfig:
    """The WMRL config named by verl's ``wmrl.config`` (and ``wmrl.overrides``)."""
    section = config.get("wmrl") if hasattr(config, "get") else None
    if not section or not section.get("config"):
        raise ConfigError(
            "the wmrl reward manager needs a WMRL config: add +wmrl.config=path/to/wmrl.yaml to the verl command"
        )
    return load_config(section["config"], list(section.get("overrides") or []))


@register("wmrl")
class WMRLRewardManager(RewardManagerBase):
    """verl ``RewardManagerBase`` with WMRL's components (built from the registered plugins).

    :param wmrl_config: the WMRL config, instead of the one ``wmrl.config`` names.
    :param components: ``(environment, world_model, reward_extractor)`` to use instead of the
        ones the WMRL config names (tests, notebooks).
    :param to_solution: ``(task, response text) -> solution`` for the environment (e.g. the code
        block of an answer); the text itself by default.
    """

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        *,
        wmrl_config: TrainConfig | None = None,
        components: tuple[Any, Any, Any] | None = None,
        to_solution: Any = None,
        **_: Any,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        self.wmrl = wmrl_config or wmrl_config_from_verl(config)
        if components is None:
            from wmrl_core.components import make_scoring_components

            made = make_scoring_components(self.wmrl)
            components = (made.environment, made.world_model, made.reward)
        self.environment, self.world_model, self.reward = components
        self.faults = StepFaults(world_model_timeout_s=self.wmrl.world_model_timeout_s)
        self.to_solution = to_solution or (lambda task, text: text)
        self._tasks: dict[str, Task] = {}

    def _task(self, task_id: str) -> Task:
        if not self._tasks:
            split = self.wmrl.rollout.task_split
            self._tasks = {t.id: t for t in self.environment.tasks(split)}
        if task_id not in self._tasks:
            raise ConfigError(
                f"task_id {task_id!r} of a dataset row is not a task of the environment's "
                f"{self.wmrl.rollout.task_split!r} split; set extra_info.task_id to one of its ids"
            )
        return self._tasks[task_id]

    def _score(self, task: Task, text: str, anchor: bool) -> tuple[float, float]:
        solution = self.to_solution(task, text)
        wm = math.nan
        if self.world_model is not None:
            predictions = self.faults.predict(self.world_model, [task], [solution])
            wm = float(self.faults.rewards(self.reward, [task], predictions)[0])
        real = math.nan
        if anchor:
            outcomes = self.environment.execute([task], [solution])
            if len(outcomes) != 1:
                raise ValueError(f"environment returned {len(outcomes)} outcomes for 1 solution")
            real = float(self.faults.rewards(self.reward, [task], outcomes)[0])
        return wm, real

    async def run_single(self, data: Any) -> dict:
        item = data[-1:][0]
        response_ids = item.batch["responses"]
        n = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        text = await self.loop.run_in_executor(
            None, lambda: self.tokenizer.decode(response_ids[:n], skip_special_tokens=True)
        )
        extra = item.non_tensor_batch.get("extra_info", {}) or {}
        if "task_id" not in extra:
            raise ConfigError("a dataset row has no extra_info.task_id: the wmrl reward manager needs it per row")
        step = data.meta_info.get("global_steps")
        if step is None:
            raise ConfigError("the batch has no meta_info.global_steps: the anchor draw is keyed on the step")
        uid = str(item.non_tensor_batch["uid"])
        anchor = is_anchor(uid, self.wmrl.seed, int(step), self.wmrl.anchors.fraction)
        task = self._task(str(extra["task_id"]))
        wm, real = await self.loop.run_in_executor(None, self._score, task, text, anchor)
        shown = real if anchor else wm
        return {
            "reward_score": 0.0 if math.isnan(shown) else shown,
            "reward_extra_info": {"wmrl_world_model_reward": wm, "wmrl_real_reward": real, "wmrl_anchor": anchor},
        }

"""The world model of a verl run, held by one process and called once per training batch.

:class:`WorldModelScorer` builds the WMRL config's world model (with the environment, for its
tasks, and the reward extractor) once; :meth:`WorldModelScorer.rewards` predicts a whole batch in
one ``predict`` call, under the config's ``world_model_timeout_s``. :class:`WMRLPPOTrainer
<wmrl_verl.trainer.WMRLPPOTrainer>` starts it as a Ray actor with ``wmrl.world_model_worker``'s
resources (give it a GPU there when the world model needs one) and calls it from
``_compute_advantage``; verl's reward loop workers never build a world model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ray

from wmrl_core.config import TrainConfig
from wmrl_core.errors import ConfigError
from wmrl_core.faults import StepFaults
from wmrl_verl.settings import solution_mapping, wmrl_config_from_verl, world_model_worker_options
from wmrl_verl.tasks import TaskIndex, TaskRef

__all__ = ["WorldModelScorer", "start_world_model_worker"]


class WorldModelScorer:
    """The world model's raw rewards for batches of responses.

    :param config: verl's config (its ``wmrl`` section).
    :param wmrl_config: the WMRL config, instead of the one ``wmrl.config`` names.
    :param components: ``(environment, world_model, reward_extractor)`` instead of the config's.
    """

    def __init__(
        self, config: Any = None, *, wmrl_config: TrainConfig | None = None, components: tuple | None = None
    ) -> None:
        cfg = wmrl_config or wmrl_config_from_verl(config)
        if components is None:
            from wmrl_core.components import make_scoring_components

            made = make_scoring_components(cfg)
            components = (made.environment, made.world_model, made.reward)
        environment, self.world_model, self.reward = components
        if self.world_model is None:
            raise ConfigError("the WMRL config makes no world model: set world_model.name (and mode=wmrl)")
        self.tasks = TaskIndex(environment, cfg.rollout.task_split)
        self.to_solution = solution_mapping(config)
        self.faults = StepFaults(world_model_timeout_s=cfg.world_model_timeout_s, heartbeat_s=cfg.heartbeat_s)

    def rewards(self, refs: Sequence[TaskRef], texts: Sequence[str]) -> tuple[list[float], dict[str, int]]:
        """The raw world-model reward of each ``(task, response text)`` (NaN where the prediction
        was dropped) from one ``predict`` call, and the fault counts of that call."""
        tasks = [self.tasks[ref] for ref in refs]
        solutions = [self.to_solution(task, text) for task, text in zip(tasks, texts, strict=True)]
        predictions = self.faults.predict(self.world_model, tasks, solutions)
        return self.faults.rewards(self.reward, tasks, predictions).tolist(), self.faults.metrics()


def start_world_model_worker(config: Any) -> Any:
    """A Ray actor of :class:`WorldModelScorer` for verl's ``config``, with ``wmrl.world_model_worker``'s options."""
    return ray.remote(WorldModelScorer).options(**world_model_worker_options(config)).remote(config)

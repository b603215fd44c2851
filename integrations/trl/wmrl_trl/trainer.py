"""``WMRLGRPOTrainer``: TRL's GRPOTrainer with WMRL's anchors, calibration and fusion.

Two ways to say what is rewarded:

* TRL's: ``reward_funcs`` (any TRL reward functions, sync or async, with ``reward_weights``) are
  the real, expensive reward, run on the anchor rows only; ``world_model`` (a reward function or
  a sequence-classification reward model) scores every row. Dataset columns reach both as in TRL.
* WMRL's plugins: a WMRL ``environment`` executes the anchor rows, a WMRL world model predicts
  every row and a reward extractor turns both outcomes into rewards; the dataset's ``task_id``
  column names each row's task (:func:`task_dataset`).

Per generation batch, on every rank:

1. TRL generates ``num_generations`` completions per prompt (vLLM or ``generate``).
2. The anchor groups are drawn from ``(seed, step)`` alone (:class:`~wmrl_core.anchors.AnchorSampler`),
   so every rank draws the same ones without a broadcast.
3. The world model scores all of this rank's completions in one batched call; only this rank's
   anchor rows get the real reward (through the reward functions, or the environment, a Ray pool
   or an execution cache alike). A missing reward (``None``) is NaN and is dropped, never 0.
4. Both raw rewards and the completion lengths are gathered to the global batch, and WMRL's
   engine (:func:`wmrl_core.fusion.fuse_step`, which ``wmrl train`` calls too) turns them into one *effective
   advantage* per completion. Every rank runs it on the same inputs, so the calibrator and fuser
   states stay identical without communication.
5. TRL's loss trains on those advantages. With the probability ratio at 1 (one optimisation pass
   per generation batch), the gradient of the clipped loss is linear in the advantage, so this
   equals WMRL's own multi-term fused loss (``tests/test_trl_equivalence.py``).

TRL's ``reward``, ``reward_std`` and ``frac_reward_zero_std`` report the reward each row trains on
(real on anchor rows, calibrated world-model reward elsewhere: ``wmrl/reward/train_mean``), and
the completions table (``log_completions``) shows it as ``fused_reward`` next to each stream's
column, with WMRL's advantages. Evaluation (``eval_dataset``, ``num_generations_eval``) runs the
real reward on every row and no world model.

Off-policy passes (``num_iterations > 1``, or ``steps_per_generation`` above
``gradient_accumulation_steps``) train on the exact multi-term loss instead: one TRL loss per
fusion term, each with its own clipping (:meth:`WMRLGRPOTrainer._compute_loss`), at one forward
and backward pass per term. What is not exact: TRL adds the KL term (``beta``) to every row with
weight 1, where WMRL's own loss weights it per term (and off-policy, ``beta`` must be 0).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import get_callable_name

from wmrl_core.anchors import AnchorSampler
from wmrl_core.calibration import RewardCalibrator
from wmrl_core.config import TrainConfig
from wmrl_core.errors import ConfigError
from wmrl_core.faults import StepFaults
from wmrl_core.fusion import FusionSettings, build_fuser, effective_advantages, fuse_step
from wmrl_core.fusion.gradients import refuse_gradient_fusers
from wmrl_core.step import fusion_method
from wmrl_core.types import Task
from wmrl_trl.options import LOSS_AGGREGATION, check_trl_args, is_off_policy, wmrl_settings
from wmrl_trl.reward_funcs import call_reward_funcs, reward_metrics, weighted_real_reward

__all__ = [
    "WMRLGRPOTrainer",
    "make_wmrl_components",
    "task_dataset",
    "check_trl_args",
    "is_off_policy",
    "wmrl_settings",
    "LOSS_AGGREGATION",
]

STATE_FILE = "wmrl_state.pt"
WORLD_MODEL_COLUMN = "world_model"
"""TRL's reward column (``rewards/world_model/*`` metrics, completions table) of the world model."""
FUSED_COLUMN = "fused_reward"
"""The completions table's column of the reward each row trains on (the real one in evaluation)."""


def task_dataset(tasks: Sequence[Task], render: Callable[[Task], Any]) -> Dataset:
    """A TRL prompt dataset: one row per task, ``prompt`` rendered by ``render`` (a policy's
    template: a string, or a list of chat messages) and ``task_id`` to find the task again."""
    return Dataset.from_list([{"prompt": render(t), "task_id": t.id} for t in tasks])


def make_wmrl_components(cfg: TrainConfig, plugin_manager: Any = None) -> tuple[Any, Any, Any]:
    """(environment, world model, reward extractor) of ``cfg`` from the registered plugins, as
    ``wmrl train`` builds them (Ray workers and the execution cache included), less the policy:
    TRL's model is the policy.

    :param plugin_manager: ``wmrl_core.plugins.get_plugin_manager(...)``; the installed plugins by default."""
    from wmrl_core.components import make_scoring_components

    c = make_scoring_components(cfg, plugin_manager)
    return c.environment, c.world_model, c.reward


def _stream(name: str) -> Callable[..., list[float]]:
    """A named placeholder reward function: TRL logs one column per reward function, and the
    trainer fills this one itself (``_calculate_rewards``): the plugin route's world-model and
    real columns, or the world-model column when there is no world model."""

    def reward(**_: Any) -> list[float]:
        raise RuntimeError(f"the `{name}` column is filled by WMRLGRPOTrainer._calculate_rewards")

    reward.__name__ = name
    return reward


def _completion_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):  # conversational: the assistant's turn(s)
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    raise TypeError(f"completion of type {type(completion).__name__}; expected a string or chat messages")


def _callable_names(funcs: Sequence[Any]) -> list[str]:
    return [get_callable_name(f) for f in funcs if callable(f) and not isinstance(f, torch.nn.Module)]


def _check_reward_route(
    plugin_route: bool, world_model: Any, environment: Any, reward: Any, tasks: Sequence[Task], to_solution: Any
) -> None:
    """Refuse a mix of the two routes: TRL's (``reward_funcs``, a TRL reward function or reward
    model as the world model) and the plugin route (``environment``, ``reward``, a WMRL world model)."""
    if plugin_route and (environment is None or reward is None):
        raise ConfigError(
            "WMRLGRPOTrainer needs a real reward: pass TRL reward_funcs=[...] (run on the anchor rows), or a WMRL "
            "environment= with its reward= extractor (the plugin route)"
        )
    if not plugin_route and (environment is not None or reward is not None or len(tasks) or to_solution):
        raise ConfigError(
            "pass either reward_funcs (TRL's route) or environment=, reward=, tasks=, to_solution= (the plugin "
            "route), not both"
        )
    has_predict = callable(getattr(world_model, "predict", None))
    if world_model is not None and plugin_route != has_predict:
        raise ConfigError(
            f"world_model={type(world_model).__name__}: a WMRL world model (predict(tasks, solutions)) goes with "
            "environment= and reward=; with reward_funcs, pass a TRL reward function or a reward model"
            if has_predict
            else f"world_model={type(world_model).__name__} has no predict(tasks, solutions): the plugin route "
            "takes a WMRL world model; a TRL reward function or reward model goes with reward_funcs=[...]"
        )


def _reward_columns(
    plugin_route: bool,
    world_model: Any,
    real_funcs: list[Any],
    world_model_processing_class: Any,
    args: GRPOConfig,
    kwargs: dict[str, Any],
) -> tuple[list[Any], list[Any], list[float]]:
    """TRL's reward functions, their processing classes and the real reward's weights: the world
    model's column first, then the real reward's (the plugin route's two placeholder columns).
    Takes ``reward_processing_classes`` out of the trainer's ``kwargs``."""
    if plugin_route:
        columns: list[Any] = [_stream(WORLD_MODEL_COLUMN), _stream("real")]
        processing: list[Any] = [None, None]
        real_weights = [1.0]
    else:
        columns = [_stream(WORLD_MODEL_COLUMN) if world_model is None else world_model, *real_funcs]
        given = kwargs.pop("reward_processing_classes", None)
        given = [None] * len(real_funcs) if given is None else given if isinstance(given, list) else [given]
        if len(given) != len(real_funcs):
            raise ValueError(
                f"The number of reward processing classes ({len(given)}) must match the number of reward "
                f"functions ({len(real_funcs)})."
            )
        processing = [world_model_processing_class, *given]
        real_weights = list(args.reward_weights or [1.0] * len(real_funcs))
    return columns, processing, real_weights


class WMRLGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages are WMRL's fused, calibrated ones.

    As TRL users write it::

        WMRLGRPOTrainer(model, reward_funcs=[expensive], world_model=cheap, args=..., train_dataset=...)

    :param model: as for :class:`trl.GRPOTrainer`.
    :param reward_funcs: TRL reward functions (``f(prompts, completions, completion_ids, **columns)
        -> list[float | None]``, sync or ``async``; reward models or their ids too), the real
        reward: run on the anchor rows only (every row in evaluation) and summed with
        ``args.reward_weights``. ``None``: the plugin route (``environment`` and ``reward``).
    :param world_model: with ``reward_funcs``, a TRL reward function, a sequence-classification
        reward model or its id, scoring every training row; in the plugin route, a WMRL world model
        (``predict(tasks, solutions) -> outcomes``). ``None`` trains GRPO on the anchors alone.
    :param wmrl: WMRL's settings: a :class:`~wmrl_core.config.TrainConfig` or dotted overrides of
        the defaults (``{"anchors.fraction": 0.25}``, :func:`wmrl_settings`); its ``anchors``,
        calibration and fusion sections and ``seed`` are used (``grpo.scale_advantages`` follows
        TRL's ``scale_rewards``).
    :param world_model_processing_class: the reward model's tokenizer (as TRL's
        ``reward_processing_classes``); loaded from the model's id by default.
    :param environment: the plugin route's real execution: ``execute(tasks, solutions) -> outcomes``.
    :param reward: the plugin route's reward extractor ``reward(task, outcome) -> float | None``.
    :param tasks: the tasks the train and eval datasets' ``task_id`` columns name (plugin route).
    :param to_solution: ``(task, completion text) -> solution`` for the environment (e.g. the
        code block of a completion); identity by default.
    :param keep_history: keep every step's anchors, rewards, advantages and record in
        ``wmrl_history`` (tests, debugging); ``last_wmrl`` always holds the latest.
    :param kwargs: passed to :class:`trl.GRPOTrainer` (``args``, ``train_dataset``,
        ``eval_dataset``, ``reward_processing_classes`` ...); options WMRL cannot honour are refused
        by name (:func:`check_trl_args`).
    """

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        *,
        world_model: Any = None,
        wmrl: TrainConfig | Mapping[str, Any] | None = None,
        world_model_processing_class: Any = None,
        environment: Any = None,
        reward: Callable[[Task, Any], float | None] | None = None,
        tasks: Sequence[Task] = (),
        to_solution: Callable[[Task, str], Any] | None = None,
        keep_history: bool = False,
        **kwargs: Any,
    ) -> None:
        plugin_route = reward_funcs is None
        _check_reward_route(plugin_route, world_model, environment, reward, tasks, to_solution)
        args: GRPOConfig | None = kwargs.pop("args", None)
        if args is None:  # TRL's default
            name = model if isinstance(model, str) else getattr(model.config, "_name_or_path", "model")
            args = GRPOConfig(f"{str(name).split('/')[-1]}-GRPO")
        real_funcs = (
            [] if plugin_route else list(reward_funcs) if isinstance(reward_funcs, list | tuple) else [reward_funcs]
        )
        if not plugin_route and not real_funcs:
            raise ConfigError("reward_funcs is empty: pass at least one TRL reward function, the real reward")
        if plugin_route and world_model_processing_class is not None:
            raise ConfigError("world_model_processing_class: the plugin route's world model is a WMRL plugin; drop it")
        aggregation = check_trl_args(
            args, n_reward_funcs=None if plugin_route else len(real_funcs), trainer_kwargs=kwargs
        )
        clashes = sorted({WORLD_MODEL_COLUMN, FUSED_COLUMN} & set(_callable_names(real_funcs)))
        if clashes:
            raise ConfigError(f"a reward function is named {clashes[0]!r}, a column WMRL logs itself: rename it")

        columns, processing, real_weights = _reward_columns(
            plugin_route, world_model, real_funcs, world_model_processing_class, args, kwargs
        )
        wmrl = wmrl_settings(wmrl, seed=args.seed)
        self.wmrl_multi_term = is_off_policy(args)
        wmrl.grpo.loss_aggregation = aggregation
        wmrl.grpo.scale_advantages = args.scale_rewards != "none"
        if world_model is None:
            wmrl.mode = "real" if wmrl.anchors.fraction >= 1 else "wmrl"
        # TRL checks one weight per column; weight 0 on the world model makes TRL's own reward (its
        # evaluation advantages) the real one. The caller's args keep their reward_weights.
        user_weights, args.reward_weights = args.reward_weights, [0.0, *real_weights]
        try:
            super().__init__(model, reward_funcs=columns, args=args, reward_processing_classes=processing, **kwargs)
        finally:
            args.reward_weights = user_weights
        self.reward_func_names[0] = WORLD_MODEL_COLUMN
        self._logs["rewards"][FUSED_COLUMN]  # created first: the completions table's first reward column
        self.real_reward_weights = np.asarray(real_weights, dtype=np.float64)
        self._init_wmrl_state(wmrl, environment, world_model, reward, tasks, to_solution, keep_history)

    def _init_wmrl_state(
        self,
        wmrl: TrainConfig,
        environment: Any,
        world_model: Any,
        reward: Callable[[Task, Any], float | None] | None,
        tasks: Sequence[Task],
        to_solution: Callable[[Task, str], Any] | None,
        keep_history: bool,
    ) -> None:
        """WMRL's side of the trainer: the components, the anchor sampler, calibrator and fuser
        (from ``wmrl``), and the per-step bookkeeping."""
        self.wmrl_config = wmrl
        self.environment, self.world_model, self.reward_extractor = environment, world_model, reward
        self.tasks_by_id = {t.id: t for t in tasks}
        self.to_solution = to_solution or (lambda task, text: text)
        self.anchor_sampler = AnchorSampler(
            fraction=wmrl.anchors.fraction, min_groups=wmrl.anchors.min_groups, seed=wmrl.seed
        )
        self.calibrator = RewardCalibrator.from_config(wmrl.calibration)
        self.fuser = build_fuser(fusion_method(wmrl), wmrl.fusion)
        refuse_gradient_fusers(self.fuser, "WMRLGRPOTrainer (TRL)")
        self.fusion_settings = FusionSettings.from_config(wmrl)
        self.faults = StepFaults(world_model_timeout_s=wmrl.world_model_timeout_s)
        self.wmrl_step = 0  # generation batches trained on; the anchor draw and the engine key on it
        self.last_wmrl: dict[str, Any] = {}  # the last step's anchors, rewards and record
        self.wmrl_history: list[dict[str, Any]] | None = [] if keep_history else None
        self._pending: dict[str, Any] | None = None
        self._extra_columns: set[str] = set()  # completions-table columns reward functions have logged

    @classmethod
    def from_config(
        cls,
        wmrl: TrainConfig,
        *,
        render: Callable[[Task], Any],
        split: str | None = None,
        eval_split: str | None = None,
        max_tasks: int | None = None,
        plugin_manager: Any = None,
        **kwargs: Any,
    ) -> WMRLGRPOTrainer:
        """The trainer of ``wmrl``'s registered environment, world model and reward extractor,
        on a dataset of the environment's ``split`` (``rollout.task_split``) rendered by ``render``.

        :param eval_split: evaluate on this split of the environment (``eval_dataset``), e.g. ``heldout``.
        :param max_tasks: each split's first ``max_tasks`` tasks only (smoke runs).
        :param kwargs: the rest of the constructor's arguments (``model``, ``args``, ``to_solution`` ...).
        """
        environment, world_model, reward = make_wmrl_components(wmrl, plugin_manager)
        train_tasks = environment.tasks(split or wmrl.rollout.task_split)[:max_tasks]
        tasks = list(train_tasks)
        if eval_split is not None:
            eval_tasks = environment.tasks(eval_split)[:max_tasks]
            kwargs["eval_dataset"] = task_dataset(eval_tasks, render)
            known = {t.id for t in tasks}
            tasks += [t for t in eval_tasks if t.id not in known]
        return cls(
            train_dataset=task_dataset(train_tasks, render),
            wmrl=wmrl,
            environment=environment,
            world_model=world_model,
            reward=reward,
            tasks=tasks,
            **kwargs,
        )

    def close(self) -> None:
        """Release the environment's and the world model's resources (containers, engines)."""
        for component in (self.environment, self.world_model):
            close = getattr(component, "close", None)
            if callable(close):
                close()

    # -- the loop's steps 2-5 (wmrl_core.trainer): anchors, world model, real reward ----------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's reward columns, gathered: the world model's (column 0) on every training row, the
        real reward functions' (or the environment's) on the anchor rows; NaN elsewhere. In
        evaluation every row gets the real reward and the world model is not called."""
        device = self.accelerator.device
        n_local = len(prompts)
        training = self.model.training
        G, option = (
            (self.num_generations, "num_generations")
            if training
            else (self.num_generations_eval, "num_generations_eval")
        )
        n_global = n_local * self.accelerator.num_processes
        if n_global % G:
            raise ConfigError(f"global batch of {n_global} completions is not a multiple of {option}={G}")
        n_groups = n_global // G
        anchor_groups = (
            self.anchor_sampler.sample(n_groups, self.wmrl_step + 1) if training else np.zeros(n_groups, dtype=bool)
        )
        real_groups = anchor_groups if training else np.ones(n_groups, dtype=bool)
        local_groups = (self.accelerator.process_index * n_local + np.arange(n_local)) // G
        rows = np.flatnonzero(real_groups[local_groups])
        plugin = self.environment is not None
        if plugin:
            tasks = self._tasks_of(inputs)
            solutions = [self.to_solution(t, _completion_text(c)) for t, c in zip(tasks, completions)]
        batch = (inputs, prompts, completions, completion_ids_list)

        rewards = np.full((n_local, len(self.reward_funcs)), np.nan)
        start = time.perf_counter()
        if training and self.world_model is not None:
            if plugin:
                predictions = self.faults.predict(self.world_model, tasks, solutions)
                if len(predictions) != n_local:
                    raise ValueError(f"world model returned {len(predictions)} predictions for {n_local} solutions")
                rewards[:, 0] = self.faults.rewards(self.reward_extractor, tasks, predictions)
            else:
                rewards[:, 0] = call_reward_funcs(self, [0], *batch, np.arange(n_local))[:, 0]
        wm_s = time.perf_counter() - start

        start = time.perf_counter()
        if rows.size and plugin:
            run_tasks, run_solutions = [tasks[i] for i in rows], [solutions[i] for i in rows]
            outcomes = self.environment.execute(run_tasks, run_solutions)
            if len(outcomes) != rows.size:
                raise ValueError(f"environment returned {len(outcomes)} outcomes for {rows.size} solutions")
            rewards[rows, 1] = self.faults.rewards(self.reward_extractor, run_tasks, outcomes)
        elif rows.size:
            rewards[rows, 1:] = call_reward_funcs(self, range(1, len(self.reward_funcs)), *batch, rows)
        exec_s = time.perf_counter() - start
        self._align_extra_columns(n_local)

        local = torch.tensor(rewards, dtype=torch.float32, device=device)
        seconds = torch.tensor([[wm_s, exec_s, float(rows.size)]], dtype=torch.float64, device=device)
        gathered = self.accelerator.gather(local)
        self._pending = {
            "anchor_groups": anchor_groups,
            "rewards": gathered.detach().cpu().double().numpy(),
            "seconds": self.accelerator.gather(seconds).sum(0).cpu().numpy(),
        }
        return gathered

    def _tasks_of(self, inputs) -> list[Task]:
        if "task_id" not in inputs[0]:
            raise ConfigError(
                "the plugin route finds each row's task by its task_id column: build the train and eval datasets "
                "with task_dataset(tasks, render), or pass TRL reward_funcs instead of environment= and reward="
            )
        unknown = sorted({str(row["task_id"]) for row in inputs if row["task_id"] not in self.tasks_by_id})
        if unknown:
            raise ConfigError(
                f"task_id {', '.join(unknown[:5])} is not among the {len(self.tasks_by_id)} tasks passed as tasks=: "
                "pass every task the train and eval datasets name (from_config's eval_split does), or use reward_funcs"
            )
        return [self.tasks_by_id[row["task_id"]] for row in inputs]

    def _align_extra_columns(self, n_local: int) -> None:
        """A completions-table column that a reward function logged before gets ``None`` in a batch
        where that function was not called (the world model in evaluation, the real reward on a
        rank without anchors), so that the table stays rectangular."""
        self._extra_columns |= set(self._pending_extra_logs)
        for column in sorted(self._extra_columns - set(self._pending_extra_logs)):
            self._log_completion_extra(column, [None] * n_local)

    # -- the loop's steps 6-7: calibration, fusion, effective advantages -----------------------
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        pending, self._pending = self._pending, None
        if pending is None:
            return output
        columns = pending["rewards"]
        real = weighted_real_reward(columns[:, 1:], self.real_reward_weights)
        if not self.model.training:  # evaluation: the real reward alone, no world model, no fusion
            self._report_rewards("eval", real, self.num_generations_eval)
            return output
        lengths = self.accelerator.gather(output["completion_mask"].sum(1).to(torch.float64)).cpu().numpy()
        G = self.num_generations
        n_global = columns.shape[0]
        group_ids = np.arange(n_global) // G
        anchor_groups = pending["anchor_groups"]
        step = self.wmrl_step + 1
        result = fuse_step(
            world_model_rewards=columns[:, 0],
            real_rewards=real,
            group_ids=group_ids,
            anchor_groups=anchor_groups,
            token_counts=lengths,
            calibrator=self.calibrator,
            fuser=self.fuser,
            settings=self.fusion_settings,
            step=step,
        )
        self.calibrator, self.fuser = result.calibrator, result.fuser
        n_local = output["completion_mask"].shape[0]
        start = self.accelerator.process_index * n_local
        effective = torch.as_tensor(result.advantages[start : start + n_local], dtype=output["advantages"].dtype)
        output["advantages"] = effective.to(output["advantages"].device)
        if self.wmrl_multi_term:
            output.update(self._term_advantages(result.terms, lengths, start, n_local, output["advantages"]))
        self._report_rewards("train", result.rewards, G, advantages=result.advantages)
        wm_s, exec_s, executed = pending["seconds"]
        record = {**result.record, "time/world_model_s": float(wm_s), "time/execution_s": float(exec_s)}
        record["anchors/executed_rollouts"] = int(executed)
        for key, value in record.items():
            if isinstance(value, int | float) and math.isfinite(float(value)):
                self._metrics["train"][f"wmrl/{key}"].append(float(value))
        self.last_wmrl = {
            "step": step,
            "anchor_groups": anchor_groups.tolist(),
            "wm_rewards": columns[:, 0].tolist(),
            "real_rewards": real.tolist(),
            "fused_rewards": result.rewards.tolist(),
            "advantages": result.advantages.tolist(),
            "token_counts": lengths.tolist(),
            "record": record,
        }
        if self.wmrl_history is not None:
            self.wmrl_history.append(self.last_wmrl)
        self.wmrl_step = step
        return output

    def _report_rewards(self, mode: str, rewards: np.ndarray, num_generations: int, advantages=None) -> None:
        """TRL's ``reward``, ``reward_std`` and ``frac_reward_zero_std`` of this batch from the reward
        each row trains on (TRL has just appended them from its sum of the columns: replaced), that
        reward as the completions table's ``fused_reward`` column and, in training, WMRL's
        advantages as its ``advantage`` column."""
        for key, value in reward_metrics(rewards, num_generations).items():
            self._metrics[mode][key][-1] = value
        self._logs["rewards"][FUSED_COLUMN].extend(rewards.tolist())
        if advantages is not None:
            logged = self._logs["advantages"]
            k = min(len(advantages), len(logged))
            for _ in range(k):
                logged.pop()
            logged.extend(np.asarray(advantages)[len(advantages) - k :].tolist())

    # -- off-policy: the exact multi-term loss ----------------------------------------------------
    def _term_advantages(self, terms, lengths, start, n_local, like):
        r"""Per term :math:`k`, this rank's rows of :math:`|c_k| (Z_{all}/Z_k) 1[i \in R_k] A_{k,i}` and
        the sign of :math:`c_k`: a TRL loss on those advantages is :math:`|c_k|` times the term's
        loss over its own rows (the clipped objective is positively homogeneous in the advantage)."""
        aggregation = self.wmrl_config.grpo.loss_aggregation
        columns = [effective_advantages([term], lengths, aggregation)[0] for term in terms]
        signs = [float(np.sign(term.coef)) for term in terms]
        scaled = (
            np.stack([col * sign for col, sign in zip(columns, signs)], axis=1)
            if terms
            else np.zeros((len(lengths), 0))
        )
        local = torch.as_tensor(scaled[start : start + n_local], dtype=like.dtype, device=like.device)
        sign = torch.as_tensor(np.tile(signs, (n_local, 1)), dtype=like.dtype, device=like.device)
        return {"wmrl_term_advantages": local, "wmrl_term_signs": sign}

    def _compute_loss(self, model, inputs):
        r"""On-policy, TRL's loss on the effective advantages; off-policy, the exact multi-term loss
        :math:`\sum_k c_k L_k`, each term a TRL loss with its own clipping."""
        if not self.wmrl_multi_term or "wmrl_term_advantages" not in inputs:
            return super()._compute_loss(model, inputs)
        terms, signs = inputs["wmrl_term_advantages"], inputs["wmrl_term_signs"]
        rest = {k: v for k, v in inputs.items() if k not in ("wmrl_term_advantages", "wmrl_term_signs")}
        loss = None
        for k in range(terms.shape[1]):
            part = signs[0, k] * super()._compute_loss(model, {**rest, "advantages": terms[:, k]})
            loss = part if loss is None else loss + part
        if loss is None:  # no term (nothing rewarded): a zero that keeps the graph
            return super()._compute_loss(model, {**rest, "advantages": torch.zeros_like(rest["advantages"])})
        return loss

    # -- checkpoints: the engine state travels with TRL's --------------------------------------
    def wmrl_state_dict(self) -> dict[str, Any]:
        return {
            "step": self.wmrl_step,
            "calibrator": self.calibrator.state_dict(),
            "fuser": self.fuser.state_dict(),
            "seed": self.wmrl_config.seed,
        }

    def load_wmrl_state_dict(self, state: dict[str, Any]) -> None:
        if state["seed"] != self.wmrl_config.seed:
            raise ConfigError(
                f"checkpoint was written with wmrl seed {state['seed']}, this run has {self.wmrl_config.seed}: "
                "resume with the same seed (the anchor draw depends on it) or start a new output_dir"
            )
        self.wmrl_step = int(state["step"])
        self.calibrator.load_state_dict(state["calibrator"])
        self.fuser.load_state_dict(state["fuser"])

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

            folder = Path(self._get_output_dir(trial=trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            torch.save(self.wmrl_state_dict(), folder / STATE_FILE)
            (folder / "wmrl_record.json").write_text(json.dumps(self.last_wmrl.get("record", {}), default=float))

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            path = os.path.join(checkpoint, STATE_FILE)
            if not os.path.exists(path):
                raise ConfigError(
                    f"{checkpoint} has no {STATE_FILE}: it was not written by WMRLGRPOTrainer; resume from a "
                    "WMRL checkpoint or start a new output_dir"
                )
            self.load_wmrl_state_dict(torch.load(path, weights_only=False))

"""``WMRLGRPOTrainer``: TRL's GRPOTrainer with WMRL's anchors, calibration and fusion.

Per generation batch, on every rank:

1. TRL generates ``num_generations`` completions per prompt (vLLM or ``generate``).
2. The anchor groups are drawn from ``(seed, step)`` alone (:class:`~wmrl_core.anchors.AnchorSampler`),
   so every rank draws the same ones without a broadcast.
3. The world model scores all of this rank's completions in one batched call; only this rank's
   anchor rows are executed for real (through the environment, a Ray pool or an execution cache
   alike). A missing reward is NaN and is dropped, never 0.
4. Both raw rewards and the completion lengths are gathered to the global batch, and WMRL's
   engine (:func:`wmrl_core.fusion.fuse_step`, which ``wmrl train`` calls too) turns them into one *effective
   advantage* per completion. Every rank runs it on the same inputs, so the calibrator and fuser
   states stay identical without communication.
5. TRL's loss trains on those advantages. With the probability ratio at 1 (one optimisation pass
   per generation batch), the gradient of the clipped loss is linear in the advantage, so this
   equals WMRL's own multi-term fused loss (``tests/test_trl_equivalence.py``).

Off-policy passes (``num_iterations > 1``, or ``steps_per_generation`` above
``gradient_accumulation_steps``) train on the exact multi-term loss instead: one TRL loss per
fusion term, each with its own clipping (:meth:`WMRLGRPOTrainer._compute_loss`), at one forward
and backward pass per term. What is not exact: TRL adds the KL term (``beta``) to every row with
weight 1, where WMRL's own loss weights it per term (and off-policy, ``beta`` must be 0).
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from wmrl_core.anchors import AnchorSampler
from wmrl_core.config import TrainConfig
from wmrl_core.debias import IsotonicDebiaser
from wmrl_core.errors import ConfigError
from wmrl_core.faults import StepFaults
from wmrl_core.fusion import FusionSettings, build_fuser, effective_advantages, fuse_step
from wmrl_core.fusion.gradients import refuse_gradient_fusers
from wmrl_core.step import fusion_method
from wmrl_core.types import Task

__all__ = [
    "WMRLGRPOTrainer",
    "make_wmrl_components",
    "task_dataset",
    "check_trl_args",
    "is_off_policy",
    "LOSS_AGGREGATION",
]

LOSS_AGGREGATION = {"grpo": "sequence_mean", "dapo": "token_mean"}
"""TRL ``loss_type`` -> the WMRL aggregation whose effective advantages reproduce it across ranks.
``grpo`` averages per-sequence means; ``dapo`` divides by the global token count. ``bnpo``
divides by each rank's own tokens and ``dr_grpo`` by a constant, for which WMRL's fused loss has
no per-stream normaliser; the rest (``cispo``, ``sapo``, ``vespo``, ``luspo``) are not linear in
the advantage."""

STATE_FILE = "wmrl_state.pt"


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
    trainer fills both columns itself (``_calculate_rewards``)."""

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


def is_off_policy(args: GRPOConfig) -> bool:
    """Whether some optimisation passes see a policy that has moved since generation (probability
    ratio != 1): several passes per batch, or a generation batch spread over more optimizer
    steps than one accumulation."""
    spread = args.steps_per_generation is not None and args.steps_per_generation > args.gradient_accumulation_steps
    return args.num_iterations > 1 or spread


def check_trl_args(args: GRPOConfig) -> str:
    """The WMRL loss aggregation for ``args``, or a :class:`ConfigError` naming each TRL option
    the trainer cannot honour and what to set instead."""
    problems = []
    if args.loss_type not in LOSS_AGGREGATION:
        problems.append(
            f"loss_type={args.loss_type!r}: use 'grpo' (per-sequence mean) or 'dapo' (global token mean); "
            "the others have no exact WMRL fused-loss counterpart"
        )
    if is_off_policy(args) and args.beta != 0.0:
        problems.append(
            f"beta={args.beta} with off-policy passes (num_iterations={args.num_iterations}): the exact multi-term "
            "loss would add TRL's KL term once per loss term; set beta=0.0 or num_iterations=1"
        )
    if args.scale_rewards == "batch":
        problems.append("scale_rewards='batch': WMRL normalises within groups; use 'group' or 'none'")
    if problems:
        raise ConfigError("WMRLGRPOTrainer cannot honour: " + "; ".join(problems))
    return LOSS_AGGREGATION[args.loss_type]


class WMRLGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages are WMRL's fused, calibrated ones.

    :param wmrl: the WMRL configuration; its ``anchors``, calibration and fusion sections and
        ``seed`` are used (its ``grpo.scale_advantages`` is set from TRL's ``scale_rewards``).
    :param environment: executes anchor rows: ``execute(tasks, solutions) -> outcomes``.
    :param world_model: ``predict(tasks, solutions) -> outcomes`` for every row; ``None`` trains
        GRPO on the anchors alone.
    :param reward: WMRL reward extractor ``reward(task, outcome) -> float | None``.
    :param tasks: the tasks the dataset's ``task_id`` column refers to.
    :param to_solution: ``(task, completion text) -> solution`` for the environment (e.g. the
        code block of a completion); identity by default.
    :param keep_history: keep every step's anchors, rewards, advantages and record in
        ``wmrl_history`` (tests, debugging); ``last_wmrl`` always holds the latest.
    :param kwargs: passed to :class:`trl.GRPOTrainer` (``model``, ``args``, ``train_dataset``, ...);
        ``reward_funcs`` is the trainer's own.
    """

    def __init__(
        self,
        *,
        wmrl: TrainConfig,
        environment: Any,
        world_model: Any,
        reward: Callable[[Task, Any], float | None],
        tasks: Sequence[Task],
        to_solution: Callable[[Task, str], Any] | None = None,
        keep_history: bool = False,
        **kwargs: Any,
    ) -> None:
        if "reward_funcs" in kwargs:
            raise ConfigError(
                "WMRLGRPOTrainer makes its own reward columns (world model and real execution); pass the "
                "environment, world_model and reward extractor instead of reward_funcs"
            )
        args: GRPOConfig = kwargs["args"]
        aggregation = check_trl_args(args)
        wmrl = copy.deepcopy(wmrl)  # the caller's config stays as it was
        self.wmrl_multi_term = is_off_policy(args)
        wmrl.grpo.loss_aggregation = aggregation
        wmrl.grpo.scale_advantages = args.scale_rewards != "none"
        if world_model is None:
            wmrl.mode = "real" if wmrl.anchors.fraction >= 1 else "wmrl"
        super().__init__(reward_funcs=[_stream("world_model"), _stream("real")], **kwargs)
        self.wmrl_config = wmrl
        self.environment, self.world_model, self.reward_extractor = environment, world_model, reward
        self.tasks_by_id = {t.id: t for t in tasks}
        self.to_solution = to_solution or (lambda task, text: text)
        self.anchor_sampler = AnchorSampler(
            fraction=wmrl.anchors.fraction, min_groups=wmrl.anchors.min_groups, seed=wmrl.seed
        )
        self.calibrator = IsotonicDebiaser.from_config(wmrl.calibration)
        self.fuser = build_fuser(fusion_method(wmrl), wmrl.fusion)
        refuse_gradient_fusers(self.fuser, "WMRLGRPOTrainer (TRL)")
        self.fusion_settings = FusionSettings.from_config(wmrl)
        self.faults = StepFaults(world_model_timeout_s=wmrl.world_model_timeout_s)
        self.wmrl_step = 0  # generation batches trained on; the anchor draw and the engine key on it
        self.last_wmrl: dict[str, Any] = {}  # the last step's anchors, rewards and record
        self.wmrl_history: list[dict[str, Any]] | None = [] if keep_history else None
        self._pending: dict[str, Any] | None = None

    @classmethod
    def from_config(
        cls,
        wmrl: TrainConfig,
        *,
        render: Callable[[Task], Any],
        split: str | None = None,
        max_tasks: int | None = None,
        plugin_manager: Any = None,
        **kwargs: Any,
    ) -> WMRLGRPOTrainer:
        """The trainer of ``wmrl``'s registered environment, world model and reward extractor,
        on a dataset of the environment's ``split`` (``rollout.task_split``) rendered by ``render``.

        :param max_tasks: the split's first ``max_tasks`` tasks only (smoke runs).
        :param kwargs: the rest of the constructor's arguments (``model``, ``args``, ``to_solution`` ...).
        """
        environment, world_model, reward = make_wmrl_components(wmrl, plugin_manager)
        tasks = environment.tasks(split or wmrl.rollout.task_split)[:max_tasks]
        return cls(
            train_dataset=task_dataset(tasks, render),
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

    # -- the loop's steps 2-5 (wmrl_core.trainer): anchors, world model, execution, rewards ------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        device = self.accelerator.device
        n_local, G = len(prompts), self.num_generations
        training = self.model.training
        step = self.wmrl_step + 1
        offset = self.accelerator.process_index * n_local
        n_global = n_local * self.accelerator.num_processes
        if n_global % G:
            raise ConfigError(f"global batch of {n_global} completions is not a multiple of num_generations={G}")
        anchor_groups = (
            self.anchor_sampler.sample(n_global // G, step) if training else np.zeros(n_global // G, dtype=bool)
        )
        local_groups = (offset + np.arange(n_local)) // G
        is_anchor = anchor_groups[local_groups]
        tasks = [self.tasks_by_id[row["task_id"]] for row in inputs]
        solutions = [self.to_solution(t, _completion_text(c)) for t, c in zip(tasks, completions)]

        wm = np.full(n_local, np.nan)
        start = time.perf_counter()
        if self.world_model is not None:
            predictions = self.faults.predict(self.world_model, tasks, solutions)
            if len(predictions) != n_local:
                raise ValueError(f"world model returned {len(predictions)} predictions for {n_local} solutions")
            wm = self.faults.rewards(self.reward_extractor, tasks, predictions)
        wm_s = time.perf_counter() - start

        real = np.full(n_local, np.nan)
        idx = np.flatnonzero(is_anchor) if training else np.arange(n_local)  # evaluation: every row executed
        start = time.perf_counter()
        if idx.size:
            run_tasks, run_solutions = [tasks[i] for i in idx], [solutions[i] for i in idx]
            outcomes = self.environment.execute(run_tasks, run_solutions)
            if len(outcomes) != idx.size:
                raise ValueError(f"environment returned {len(outcomes)} outcomes for {idx.size} solutions")
            real[idx] = self.faults.rewards(self.reward_extractor, run_tasks, outcomes)
        exec_s = time.perf_counter() - start

        local = torch.tensor(np.stack([wm, real], axis=1), dtype=torch.float32, device=device)
        seconds = torch.tensor([[wm_s, exec_s, float(idx.size)]], dtype=torch.float64, device=device)
        gathered = self.accelerator.gather(local)
        self._pending = {
            "anchor_groups": anchor_groups,
            "rewards": gathered.detach().cpu().double().numpy(),
            "seconds": self.accelerator.gather(seconds).sum(0).cpu().numpy(),
        }
        return gathered

    # -- the loop's steps 6-7: calibration, fusion, effective advantages -----------------------
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if not self.model.training or self._pending is None:
            return output
        pending, self._pending = self._pending, None
        rewards = pending["rewards"]
        lengths = self.accelerator.gather(output["completion_mask"].sum(1).to(torch.float64)).cpu().numpy()
        G = self.num_generations
        n_global = rewards.shape[0]
        group_ids = np.arange(n_global) // G
        anchor_groups = pending["anchor_groups"]
        step = self.wmrl_step + 1
        result = fuse_step(
            world_model_rewards=rewards[:, 0],
            real_rewards=rewards[:, 1],
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
        wm_s, exec_s, executed = pending["seconds"]
        record = {**result.record, "time/world_model_s": float(wm_s), "time/execution_s": float(exec_s)}
        record["anchors/executed_rollouts"] = int(executed)
        for key, value in record.items():
            if isinstance(value, int | float) and math.isfinite(float(value)):
                self._metrics["train"][f"wmrl/{key}"].append(float(value))
        self.last_wmrl = {
            "step": step,
            "anchor_groups": anchor_groups.tolist(),
            "wm_rewards": rewards[:, 0].tolist(),
            "real_rewards": rewards[:, 1].tolist(),
            "advantages": result.advantages.tolist(),
            "token_counts": lengths.tolist(),
            "record": record,
        }
        if self.wmrl_history is not None:
            self.wmrl_history.append(self.last_wmrl)
        self.wmrl_step = step
        return output

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

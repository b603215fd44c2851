r"""TRL reward functions as WMRL's two reward streams.

TRL calls every reward function on every completion and sums the weighted columns. WMRL calls
the world model (a cheap reward function or reward model) on every completion and the real
reward functions (the expensive ones) only on the anchor rows, then fuses the two streams. This
module calls the functions exactly as TRL 1.16's ``GRPOTrainer._calculate_rewards`` does (the
same keyword arguments, ``None`` as NaN, async functions gathered on the trainer's event loop,
reward models on the prompt plus completion text), but on a chosen subset of rows; and it
reports TRL's ``reward`` metrics from one reward per row instead of a sum of columns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import Trainer
from trl.data_utils import apply_chat_template, is_conversational
from trl.extras.profiling import profiling_context
from trl.trainer.utils import is_async_callable, nanstd

__all__ = ["call_reward_funcs", "weighted_real_reward", "reward_metrics"]


def weighted_real_reward(columns: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    r"""One real reward per row from the real reward functions' columns, as TRL's default
    ``multi_objective_aggregation="sum_then_normalize"`` sums them:
    :math:`r_i = \sum_{k:\, r_{k,i} \ne \mathrm{NaN}} w_k r_{k,i}`, and NaN (no reward, dropped; never
    0) where every function returned ``None`` or the row was not run.

    :param columns: (N, K) rewards, NaN where a function returned ``None`` or was not called.
    :param weights: (K,) ``reward_weights``.
    """
    columns = np.asarray(columns, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if columns.ndim != 2 or columns.shape[1] != weights.size:
        raise ValueError(f"{columns.shape} reward columns for {weights.size} weights")
    finite = np.isfinite(columns)
    total = np.where(finite, columns * weights, 0.0).sum(axis=1)
    return np.where(finite.any(axis=1), total, np.nan)


def reward_metrics(rewards: np.ndarray, num_generations: int) -> dict[str, float]:
    r"""TRL's ``reward``, ``reward_std`` and ``frac_reward_zero_std`` of one reward per row (NaN
    skipped): the mean, the (Bessel-corrected) standard deviation over the batch, and the share of
    rows whose group of ``num_generations`` has a zero spread. A group with fewer than two rewards
    has no spread and does not count as zero, as in TRL."""
    r = torch.as_tensor(np.asarray(rewards, dtype=np.float64))
    if r.numel() % num_generations:
        raise ValueError(f"{r.numel()} rewards are not whole groups of {num_generations}")
    if num_generations > 1:
        group_std = nanstd(r.view(-1, num_generations), dim=1)
    else:
        group_std = torch.zeros(r.numel(), dtype=r.dtype)
    return {
        "reward": torch.nanmean(r).item(),
        "reward_std": nanstd(r).item(),
        "frac_reward_zero_std": torch.isclose(group_std, torch.zeros_like(group_std)).double().mean().item(),
    }


def _as_column(output: Sequence[float | None], name: str, expected: int) -> np.ndarray:
    values = [np.nan if r is None else r for r in output]
    if len(values) != expected:
        raise ValueError(
            f"The reward function '{name}' returned {len(values)} rewards, but {expected} were expected "
            "(one per prompt-completion pair). Make sure the reward function returns exactly one reward per completion."
        )
    return np.asarray(values, dtype=np.float64)


def _reward_model_scores(trainer: Any, model: nn.Module, processing_class: Any, prompts, completions) -> np.ndarray:
    """A sequence-classification reward model's first logit on each prompt plus completion."""
    if is_conversational({"prompt": prompts[0]}):
        texts = [
            apply_chat_template({"messages": p + c}, processing_class, **trainer.chat_template_kwargs)["text"]
            for p, c in zip(prompts, completions, strict=True)
        ]
    else:
        texts = [p + c for p, c in zip(prompts, completions, strict=True)]
    encoded = processing_class(
        text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False
    )
    encoded = Trainer._prepare_inputs(trainer, encoded)  # to the device; TRL's override would generate
    with torch.inference_mode():
        return model(**encoded).logits[:, 0].double().cpu().numpy()


def call_reward_funcs(
    trainer: Any,
    columns: Sequence[int],
    inputs: Sequence[dict[str, Any]],
    prompts: Sequence[Any],
    completions: Sequence[Any],
    completion_ids: Sequence[Any] | None,
    rows: np.ndarray,
) -> np.ndarray:
    """(len(rows), len(columns)) rewards: ``trainer.reward_funcs[c]`` for each ``c`` in ``columns``
    on the batch rows ``rows`` only, called as TRL calls it (``prompts``, ``completions``,
    ``completion_ids``, every other dataset column, ``trainer_state``, ``log_extra``,
    ``log_metric``). ``None`` becomes NaN. What a function passes to ``log_extra`` is placed at
    its rows, ``None`` at the others, so the completions table stays aligned."""
    n_local = len(prompts)
    rows = np.asarray(rows, dtype=int)
    pick = [int(i) for i in rows]
    sub_prompts = [prompts[i] for i in pick]
    sub_completions = [completions[i] for i in pick]
    sub_ids = None if completion_ids is None else [completion_ids[i] for i in pick]
    keys = [key for key in inputs[0] if key not in ("prompt", "completion", "completion_ids")]
    kwargs: dict[str, Any] = {key: [inputs[i][key] for i in pick] for key in keys}

    def log_extra(column: str, values: Sequence[Any]) -> None:
        full: list[Any] = [None] * n_local
        for i, value in zip(pick, values, strict=True):
            full[i] = value
        trainer._log_completion_extra(column, full)

    kwargs.update(trainer_state=trainer.state, log_extra=log_extra, log_metric=trainer._log_metric)
    out = np.full((len(pick), len(columns)), np.nan)
    if not pick:
        return out
    call = {"prompts": sub_prompts, "completions": sub_completions, "completion_ids": sub_ids, **kwargs}
    pending = []
    for j, c in enumerate(columns):
        func, name = trainer.reward_funcs[c], trainer.reward_func_names[c]
        if isinstance(func, nn.Module):
            with profiling_context(trainer, name):
                scores = _reward_model_scores(
                    trainer, func, trainer.reward_processing_classes[c], sub_prompts, sub_completions
                )
            out[:, j] = scores
        elif is_async_callable(func):
            pending.append((j, func, name))
        else:
            with profiling_context(trainer, name):
                out[:, j] = _as_column(func(**call), name, len(pick))

    if pending:  # concurrently, on the event loop TRL starts for async reward functions

        async def run(j, func, name):
            with profiling_context(trainer, name):
                return j, _as_column(await func(**call), name, len(pick))

        async def run_all():
            return await asyncio.gather(*(run(*job) for job in pending))

        for j, column in asyncio.run_coroutine_threadsafe(run_all(), trainer.async_loop).result():
            out[:, j] = column
    return out

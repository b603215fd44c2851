"""Per-token log-probabilities of completions under a causal LM (teacher forcing).

Layout of a batch of N rollouts (prompt ``x_i`` of length ``P_i``, completion ``y_i`` of
length ``L_i <= T``)::

    input_ids[i] = [pad]*(P - P_i) + x_i + y_i + [pad]*(T - L_i)     (N, P + T)

Prompts are left-padded to a common width ``P`` so that every completion starts at column
``P``; positions restart at 0 on each row's first real token. The logits at column
``P - 1 + t`` predict completion token ``t``, so::

    logp[i, t] = log_softmax(logits[i, P - 1 + t] / tau)[y_i[t]]        (N, T)

and ``mask[i, t] = 1`` for ``t < L_i``. Masked entries are 0.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["CompletionBatch", "build_batch", "completion_log_probs"]


@dataclass
class CompletionBatch:
    """Prompts and completions, padded as in the module docstring.

    :param prompt_ids: (N, P) long, left-padded with ``pad_id``.
    :param prompt_mask: (N, P) long, 1 on real prompt tokens.
    :param completion_ids: (N, T) long, right-padded with ``pad_id``.
    :param completion_mask: (N, T) float, 1 on real completion tokens (EOS included).
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor

    def to(self, device: torch.device) -> CompletionBatch:
        return CompletionBatch(
            *(t.to(device) for t in (self.prompt_ids, self.prompt_mask, self.completion_ids, self.completion_mask))
        )

    def select(self, idx: slice | torch.Tensor) -> CompletionBatch:
        return CompletionBatch(
            self.prompt_ids[idx], self.prompt_mask[idx], self.completion_ids[idx], self.completion_mask[idx]
        )

    def __len__(self) -> int:
        return int(self.prompt_ids.shape[0])


def build_batch(
    prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], pad_id: int, width: int | None = None
) -> CompletionBatch:
    """Pad token-id lists into a :class:`CompletionBatch`.

    :param width: ``T``; defaults to the longest completion (at least 1).
    """
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
    n = len(prompts)
    p = max((len(x) for x in prompts), default=1)
    t = width if width is not None else max([1] + [len(y) for y in completions])
    prompt_ids = torch.full((n, p), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((n, p), dtype=torch.long)
    completion_ids = torch.full((n, t), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((n, t), dtype=torch.float32)
    for i, (x, y) in enumerate(zip(prompts, completions)):
        if len(x) == 0:
            raise ValueError(f"prompt {i} is empty; a completion needs at least one prompt token to condition on")
        if len(y) > t:
            raise ValueError(f"completion {i} has {len(y)} tokens > width {t}")
        prompt_ids[i, p - len(x) :] = torch.as_tensor(list(x), dtype=torch.long)
        prompt_mask[i, p - len(x) :] = 1
        if len(y):
            completion_ids[i, : len(y)] = torch.as_tensor(list(y), dtype=torch.long)
            completion_mask[i, : len(y)] = 1.0
    return CompletionBatch(prompt_ids, prompt_mask, completion_ids, completion_mask)


def _accepts(model: Any, name: str) -> bool:
    fwd = getattr(model, "forward", None)
    try:
        params = inspect.signature(fwd).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def completion_log_probs(
    model: Any, batch: CompletionBatch, *, temperature: float = 1.0, micro_batch_size: int | None = None
) -> torch.Tensor:
    """``logp`` (N, T) of the module docstring; differentiable when grad is enabled.

    :param micro_batch_size: rows per forward pass (bounds activation memory of one pass;
        the autograd graph still spans all rows when grad is enabled).
    """
    if not temperature > 0:
        raise ValueError(f"temperature={temperature}; log-probabilities need tau > 0")
    device = next(model.parameters()).device
    n = len(batch)
    if n == 0:
        raise ValueError("no rollouts: the batch is empty")
    step = micro_batch_size or n
    out = []
    for start in range(0, n, step):
        b = batch.select(slice(start, start + step)).to(device)
        p, t = b.prompt_ids.shape[1], b.completion_ids.shape[1]
        input_ids = torch.cat([b.prompt_ids, b.completion_ids], dim=1)
        # completion padding is attended to harmlessly: causal attention means padded
        # tail positions never influence the real ones, and their log-probs are masked.
        attention_mask = torch.cat([b.prompt_mask, torch.ones_like(b.completion_ids)], dim=1)
        position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
        kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False}
        if _accepts(model, "position_ids"):
            kwargs["position_ids"] = position_ids
        keep = _accepts(model, "logits_to_keep")
        if keep:
            kwargs["logits_to_keep"] = t + 1  # columns P-1 .. P+T-1
        logits = model(**kwargs).logits
        logits = logits[:, -(t + 1) : -1] if keep else logits[:, p - 1 : p + t - 1]
        logp = torch.log_softmax(logits.float() / temperature, dim=-1)
        token_logp = logp.gather(-1, b.completion_ids.unsqueeze(-1)).squeeze(-1)
        out.append(token_logp * b.completion_mask)
    return torch.cat(out, dim=0)

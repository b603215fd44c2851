"""Generation with ``model.generate`` from transformers (CPU or GPU, any size that fits).

Prompts are left-padded into batches of ``batch_size`` prompts; each prompt is expanded to
``n`` samples by ``num_return_sequences``, so one call generates ``batch_size * n``
sequences. Sampling draws from torch's global RNG, which the WMRL trainer checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from wmrl_autoresearch.llm.backends.base import Generation
from wmrl_autoresearch.llm.sampling import SamplingConfig

__all__ = ["TransformersBackend", "split_completion"]


def split_completion(row: Sequence[int], stop_ids: set[int], pad_id: int) -> tuple[list[int], str]:
    """Cut a generated row after its first stop token (kept); strip right padding otherwise.

    :return: ``(token_ids, finish_reason)`` with reason ``"stop"`` or ``"length"``.
    """
    ids = [int(x) for x in row]
    for j, tok in enumerate(ids):
        if tok in stop_ids:
            return ids[: j + 1], "stop"
    # no stop token: the row ran to max_new_tokens (generate pads only finished rows, so a
    # pad id here is a genuinely generated token unless pad is also a stop token)
    return ids, "length"


class TransformersBackend:
    """Sample with a transformers causal LM.

    :param model: a callable returning the current model (a peft wrapper included), so the
        backend always samples from the weights being trained.
    :param pad_id: the tokenizer's pad token id.
    :param stop_ids: ids that end a completion (EOS of the tokenizer and generation config).
    :param batch_size: prompts per ``generate`` call (each expanded to ``n`` sequences).
    """

    name = "transformers"

    def __init__(self, model: Callable[[], Any], *, pad_id: int, stop_ids: Iterable[int], batch_size: int = 8):
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}; it must be >= 1")
        self._model = model
        self.pad_id = int(pad_id)
        self.stop_ids = {int(i) for i in stop_ids}
        if not self.stop_ids:
            raise ValueError("no stop token id: the tokenizer and generation config define no EOS; set stop_token_ids")
        self.batch_size = batch_size

    @torch.no_grad()
    def generate(
        self, prompts: Sequence[Sequence[int]], n: int, sampling: SamplingConfig, *, want_logprobs: bool = False
    ) -> list[list[Generation]]:
        model = self._model()
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()  # no dropout while sampling
        stop = sorted(self.stop_ids | set(sampling.stop_token_ids))
        results: list[list[Generation]] = []
        try:
            for start in range(0, len(prompts), self.batch_size):
                chunk = prompts[start : start + self.batch_size]
                width = max(len(p) for p in chunk)
                ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
                att = torch.zeros((len(chunk), width), dtype=torch.long)
                for i, p in enumerate(chunk):
                    if len(p) == 0:
                        raise ValueError("empty prompt: there is nothing to condition the generation on")
                    ids[i, width - len(p) :] = torch.as_tensor(list(p), dtype=torch.long)
                    att[i, width - len(p) :] = 1
                kwargs: dict[str, Any] = dict(
                    input_ids=ids.to(device),
                    attention_mask=att.to(device),
                    max_new_tokens=sampling.max_new_tokens,
                    num_return_sequences=n,
                    pad_token_id=self.pad_id,
                    eos_token_id=stop,
                    return_dict_in_generate=True,
                    output_logits=want_logprobs,
                )
                if sampling.greedy:
                    kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
                else:
                    kwargs.update(
                        do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k
                    )
                out = model.generate(**kwargs)
                completions = out.sequences[:, width:].cpu()
                token_logp = None
                if want_logprobs and completions.shape[1] > 0:
                    logits = torch.stack(out.logits, dim=1).float()  # (B*n, steps, V), raw logits
                    logp = torch.log_softmax(logits / sampling.effective_temperature, dim=-1)
                    token_logp = logp.gather(-1, completions.to(logp.device).unsqueeze(-1)).squeeze(-1).cpu()
                for i in range(len(chunk)):
                    group = []
                    for k in range(n):
                        row = i * n + k  # generate orders samples prompt-major
                        toks, reason = split_completion(completions[row].tolist(), set(stop), self.pad_id)
                        lps = token_logp[row, : len(toks)].tolist() if token_logp is not None else None
                        group.append(Generation(toks, lps, reason))
                    results.append(group)
        finally:
            model.train(was_training)
        return results

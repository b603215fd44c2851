"""What every generation backend returns, and the interface it honours."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from wmrl_autoresearch.llm.sampling import SamplingConfig

__all__ = ["Generation", "GenerationBackend"]


@dataclass
class Generation:
    """One sampled completion.

    :param token_ids: generated tokens, the stopping EOS included, padding excluded.
    :param logprobs: ``log_softmax(z_t / tau)[y_t]`` per token at sampling time (see
        :mod:`~wmrl_autoresearch.llm.sampling`), or ``None`` when not requested.
    :param finish_reason: ``"stop"`` (EOS/stop token) or ``"length"`` (max_new_tokens).
    """

    token_ids: list[int]
    logprobs: list[float] | None = None
    finish_reason: str = "stop"


class GenerationBackend(Protocol):
    name: str

    def generate(
        self, prompts: Sequence[Sequence[int]], n: int, sampling: SamplingConfig, *, want_logprobs: bool = False
    ) -> list[list[Generation]]:
        """``n`` completions for each prompt (token ids); result[i][k] is prompt i's k-th."""
        ...

"""Sampling settings shared by the generation backends.

The policy's per-token log-probability is that of the *tempered* distribution the tokens
were drawn from, before top-k/top-p truncation::

    log pi(y_t | x, y_<t) = log_softmax(z_t / tau)[y_t]

with ``z_t`` the model's logits at step ``t`` and ``tau`` the temperature. GRPO's ratio
``exp(log pi_new - log pi_old)`` is computed on this quantity by both backends.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SamplingConfig"]


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample one completion.

    :param max_new_tokens: generated tokens per completion (tokens, excluding the prompt).
    :param temperature: ``tau`` above; must be > 0 unless ``greedy``.
    :param top_p: nucleus mass in (0, 1]; 1 disables.
    :param top_k: keep the k most likely tokens; 0 disables.
    :param greedy: arg-max decoding (world model); ignores temperature/top_p/top_k.
    :param stop_token_ids: extra ids that end a completion besides the model's EOS.
    """

    max_new_tokens: int = 512
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    greedy: bool = False
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={self.max_new_tokens}; it must be >= 1")
        if not self.greedy and not self.temperature > 0:
            raise ValueError(f"temperature={self.temperature}; use > 0, or greedy=True for arg-max decoding")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p}; it must be in (0, 1] (1 disables nucleus sampling)")
        if self.top_k < 0:
            raise ValueError(f"top_k={self.top_k}; use 0 to disable top-k")

    @property
    def effective_temperature(self) -> float:
        """``tau`` used for log-probabilities (1 for greedy decoding)."""
        return 1.0 if self.greedy else float(self.temperature)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

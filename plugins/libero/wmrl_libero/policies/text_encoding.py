"""Instruction encoding without a downloaded tokenizer: hashed word unigrams and bigrams."""

from __future__ import annotations

import functools
import re
import zlib

import torch

__all__ = ["hashed_token_ids"]


def hashed_token_ids(instruction: str, buckets: int) -> torch.Tensor:
    """Stable ids in ``[0, buckets)`` of the instruction's words and word pairs (crc32 hash,
    the same in every process, unlike Python's ``hash``)."""
    return torch.tensor(_ids(instruction, buckets), dtype=torch.long)


@functools.lru_cache(maxsize=1024)
def _ids(instruction: str, buckets: int) -> tuple[int, ...]:
    words = re.findall(r"[a-z]+", instruction.lower())
    grams = words + [f"{a}_{b}" for a, b in zip(words, words[1:])]
    return tuple(zlib.crc32(g.encode()) % buckets for g in grams) or (0,)

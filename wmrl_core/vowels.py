"""``vowels``: a tiny text domain and a tiny causal LM, for testing trainer integrations (TRL,
verl) end to end on a CPU, without downloads.

The ``vowels`` domain: a task asks for text; executing a completion scores the share of its
letters that are vowels, which a randomly initialised model's completions already vary in, so
group advantages are non-zero from the first step. Its world model is informative but
miscalibrated and noisy (a monotone distortion plus a hash-seeded error), so calibration and
fusion have something to do. :func:`make_tiny_qwen2` builds a 2-layer Qwen2 with a BPE trained
on a few lines and saves both with ``save_pretrained``, so TRL loads it by path as it would a
real checkpoint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wmrl_core import hookimpl
from wmrl_core.types import Outcome, Task

__all__ = ["VowelsEnvironment", "VowelsWorldModel", "vowel_share", "make_tiny_qwen2", "vowels_config"]

VOWELS = set("aeiouAEIOU")


def vowel_share(text: str) -> float | None:
    """Share of the letters of ``text`` that are vowels; ``None`` without letters."""
    letters = [c for c in text if c.isalpha()]
    return sum(c in VOWELS for c in letters) / len(letters) if letters else None


class VowelsEnvironment:
    """``execute`` scores each completion's vowel share; a completion without letters is ``invalid_output``."""

    def __init__(self, env: Any = None, n_tasks: int = 8) -> None:
        self._tasks = [Task(id=f"vowels-{i}", description=f"Write some words, number {i}.") for i in range(n_tasks)]
        self.executed = 0

    def tasks(self, split: str) -> list[Task]:
        if split not in ("train", "heldout"):
            raise ValueError(f"unknown split {split!r}; the vowels domain has 'train' and 'heldout'")
        return self._tasks if split == "train" else self._tasks[:2]

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        self.executed += len(solutions)
        out = []
        for s in solutions:
            share = vowel_share(str(s))
            out.append(Outcome("ok", share) if share is not None else Outcome("invalid_output", None))
        return out


class VowelsWorldModel:
    """Predicts ``0.2 + 0.6 * share**2 + noise * u`` with ``u`` in [-1, 1] from a hash of the
    text: monotone in the truth up to the noise, and miscalibrated."""

    def __init__(self, env: Any = None, noise: float = 0.05) -> None:
        self.noise = noise

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        out = []
        for s in solutions:
            share = vowel_share(str(s))
            if share is None:
                out.append(Outcome("no_prediction", None))
                continue
            u = int(hashlib.sha256(str(s).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF * 2 - 1
            out.append(Outcome("ok", 0.2 + 0.6 * share**2 + self.noise * u))
        return out


@hookimpl
def wmrl_register_environments(table):
    table.add(
        "vowels", f"{__name__}:VowelsEnvironment", description="vowel share of a text (trainer integration tests)"
    )


@hookimpl
def wmrl_register_world_models(table):
    table.add("vowels-biased", f"{__name__}:VowelsWorldModel", description="miscalibrated vowel-share predictor")


@hookimpl
def wmrl_default_reward_extractor(environment_name):
    return "score" if environment_name == "vowels" else None


def vowels_config(**overrides: Any) -> Any:
    """A :class:`~wmrl_core.config.TrainConfig` for the vowels domain (the policy is TRL's model,
    so its name is a placeholder); ``overrides`` are dotted keys, e.g. ``{"anchors.fraction": 0.5}``."""
    from wmrl_core.config import load_config

    dotted = {
        "environment.name": "vowels",
        "policy.name": "trl-model",
        "world_model.name": "vowels-biased",
        "anchors.fraction": 0.5,
        **overrides,
    }
    return load_config(None, [f"{k}={v}" for k, v in dotted.items()])


CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "aeiou ooo eee aaa iii uuu",
    "rhythm crypt gym lynx myth",
    "Write some words, number 3.",
    "banana apple orange kiwi",
]


def make_tiny_qwen2(folder: str | Path, *, vocab_size: int = 200, hidden_size: int = 32, seed: int = 0) -> Path:
    """Save a 2-layer Qwen2 with random weights and its BPE tokenizer under ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    fast.save_pretrained(folder)
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        pad_token_id=fast.pad_token_id,
        eos_token_id=fast.eos_token_id,
        tie_word_embeddings=True,
    )
    Qwen2ForCausalLM(config).save_pretrained(folder)
    return folder

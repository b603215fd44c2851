"""Tiny, randomly initialised causal LMs for tests and smoke runs (no download).

:func:`make_tiny_causal_lm` trains a byte-level BPE tokenizer on a few lines of Python and
world-model answers, builds a 2-layer Llama with random weights, and saves both with
``save_pretrained``, so the components load it through the same ``from_pretrained`` path
a real checkpoint takes. Outputs are gibberish; plumbing (shapes, log-probabilities,
gradients, LoRA, parsing) is what such a model can check.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["make_tiny_causal_lm", "CHAT_TEMPLATE", "CORPUS"]

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
"""A minimal chat template (system/user/assistant turns closed by ``<|end|>``)."""

CORPUS = [
    "import numpy as np\nimport torch\nfrom sklearn.linear_model import LogisticRegression\n",
    "def train(model, data, epochs=10):\n    for epoch in range(epochs):\n        loss = model.step(data)\n    return loss\n",
    "```python\nprint('accuracy', 0.87)\n```\n",
    "status: ok\nscore: 0.87\n",
    "status: crash\nscore: none\n",
    "status: timeout\nscore: 12.5%\n",
    "Solve the following task by writing one complete, self-contained Python script.\n",
    "## Task\nTrain a classifier on the iris dataset and report accuracy.\n",
    "Predict what happens when this script is run for the task above.\n",
    "x = [i ** 2 for i in range(100)]\nresult = sum(x) / len(x)\n",
]


def make_tiny_causal_lm(
    folder: str | Path,
    *,
    chat_template: bool = True,
    vocab_size: int = 400,
    hidden_size: int = 32,
    num_layers: int = 2,
    seed: int = 0,
    architecture: str = "llama",
) -> Path:
    """Save a tiny Llama and its tokenizer under ``folder``; returns the folder.

    Special tokens: ``<pad>`` (pad), ``<s>`` (BOS), ``</s>`` (EOS); with ``chat_template``
    also ``<|end|>``, which then is the generation config's EOS (as ``<|im_end|>`` is for
    Qwen chat models) besides ``</s>``.

    :param architecture: ``"llama"`` (rotary positions) or ``"gpt2"`` (learned absolute
        positions, which makes left-padding bugs visible).
    """
    import torch
    from transformers import GenerationConfig

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fast = _train_tokenizer(vocab_size, chat_template)
    fast.save_pretrained(folder)

    torch.manual_seed(seed)
    eos = [fast.eos_token_id] + ([fast.convert_tokens_to_ids("<|end|>")] if chat_template else [])
    eos_id = eos if len(eos) > 1 else eos[0]
    model = _random_model(architecture, fast, eos_id, hidden_size, num_layers)
    model.generation_config = GenerationConfig(
        bos_token_id=fast.bos_token_id, eos_token_id=eos_id, pad_token_id=fast.pad_token_id
    )
    model.save_pretrained(folder)
    return folder


def _train_tokenizer(vocab_size: int, chat_template: bool):
    """A byte-level BPE tokenizer trained on :data:`CORPUS`, with the special tokens (and chat template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    # like Llama tokenizers: plain text gets a BOS (add_special_tokens=True)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=specials[3:],
    )
    if chat_template:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def _random_model(architecture: str, fast, eos_id: int | list[int], hidden_size: int, num_layers: int):
    """A randomly initialised Llama or GPT-2 sized to ``fast``'s vocabulary (torch's global RNG)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if architecture == "llama":
        config = LlamaConfig(
            vocab_size=len(fast),
            hidden_size=hidden_size,
            intermediate_size=2 * hidden_size,
            num_hidden_layers=num_layers,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=2048,
            bos_token_id=fast.bos_token_id,
            eos_token_id=eos_id,
            pad_token_id=fast.pad_token_id,
            tie_word_embeddings=False,
        )
        return LlamaForCausalLM(config)
    if architecture == "gpt2":
        config = GPT2Config(
            vocab_size=len(fast),
            n_embd=hidden_size,
            n_layer=num_layers,
            n_head=2,
            n_positions=2048,
            resid_pdrop=0.0,  # no dropout, as in current LLMs (GRPO's ratio is 1 before an update)
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=fast.bos_token_id,
            eos_token_id=eos_id,
            pad_token_id=fast.pad_token_id,
        )
        return GPT2LMHeadModel(config)
    raise ValueError(f"architecture={architecture!r}; use 'llama' or 'gpt2'")

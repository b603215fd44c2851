"""Test helpers: a tiny OpenVLA-style action-token checkpoint built locally (no hub access)."""

from pathlib import Path

WORDS = (
    "in what action should the robot take to put both alphabet soup and tomato sauce basket "
    "out pick up book place it back compartment of caddy"
).split()


def build_tiny_action_token_model(folder: Path, vocab_size: int = 320, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(seed)
    vocab = {"[UNK]": 0, "[PAD]": 1}
    for w in WORDS + ["?", ":"]:
        vocab.setdefault(w, len(vocab))
    while len(vocab) < vocab_size:  # the last 255 ids are the action bins
        vocab[f"<act{len(vocab)}>"] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")
    model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=2, n_positions=128))
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder

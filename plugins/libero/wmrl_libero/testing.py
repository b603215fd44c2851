"""Test helpers: a tiny OpenVLA-style action-token checkpoint built locally (no hub access); tiny
small-VLA and world-model checkpoints for the transfer experiments' end-to-end checks."""

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


def build_tiny_transfer_checkpoints(tmp_path: Path, task: int = 6) -> tuple[Path, Path]:
    """(base policy, world model): a tiny untrained small VLA and a world model fitted to random
    states of LIBERO-10 task ``task`` (object state 56 long, task 6's): the transfer experiments'
    plumbing checks, not success."""
    import numpy as np
    import torch

    from wmrl_libero.policies.small_vla import SmallVLA, save_small_vla
    from wmrl_libero.world_models.checkpoint import WorldModelBundle, save_bundle
    from wmrl_libero.world_models.dynamics import fit_dynamics
    from wmrl_libero.world_models.features import Episode
    from wmrl_libero.world_models.scorer import fit_scorer

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    base = save_small_vla(SmallVLA(object_dim=128, hidden=32), tmp_path / "base.pt")
    episodes = [
        Episode(
            task, i, bool(i % 2), rng.normal(size=(13, 16 + 128)).astype(np.float32), rng.uniform(-1, 1, (12, 7)), 56
        )
        for i in range(4)
    ]
    dyn = fit_dynamics(episodes, chunk=4, members=2, hidden=16, iterations=20, batch_size=8, log=lambda m: None)
    scorer = fit_scorer(episodes, hidden=16, iterations=20, batch_size=8, log=lambda m: None)
    bundle = WorldModelBundle(dyn, scorer, 128, object_len={task: 56}, meta={"train_success_rate": 0.5})
    return base, save_bundle(bundle, tmp_path / "wm.pt")

"""Behaviour cloning of :class:`~wmrl_libero.policies.small_vla.SmallVLA` on recorded demos.

Loss: negative log-likelihood of the demonstrated chunk ``a[t:t+k]`` (padded with the last
action at the end of a demo) under the policy's Gaussian at ``o_t``, averaged over samples.
Physics-state features only (proprio, object state, instruction); DAgger
(:mod:`wmrl_libero.dagger`) trains with the same functions on its aggregated data.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from wmrl_libero.demos import load_demonstrations
from wmrl_libero.environment import SPLITS
from wmrl_libero.policies.small_vla import SmallVLA, save_small_vla
from wmrl_libero.policies.vla_interface import VLAInput, batch_inputs

__all__ = [
    "chunk_targets",
    "cosine_learning_rate",
    "split_by_init_state",
    "without_heldout_init_states",
    "chunk_action_error",
    "ChunkSamples",
    "chunk_samples",
    "fit_feature_scaling",
    "fit_small_vla",
    "train_behaviour_cloning",
]


def chunk_targets(actions: np.ndarray, chunk: int) -> np.ndarray:
    """(T, 7) -> (T, chunk, 7): row t holds a[t], ..., a[t+chunk-1], the last action repeated."""
    T = len(actions)
    idx = np.minimum(np.arange(T)[:, None] + np.arange(chunk)[None, :], T - 1)
    return actions[idx]


def cosine_learning_rate(step: int, total: int, base: float, warmup: int = 0, final_fraction: float = 0.0) -> float:
    """Linear warm-up, then cosine decay (the usual BC schedule, as in robomimic / ACT)::

        lr(s) = base * (s + 1) / warmup                                    for s < warmup
        lr(s) = base * (f + (1 - f) * (1 + cos(pi * (s - warmup) / (total - warmup))) / 2)

    with ``f = final_fraction`` (the last step's share of ``base``).
    """
    if step < warmup:
        return base * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return base * (final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + np.cos(np.pi * progress)))


def split_by_init_state(demos: Sequence[dict], heldout_init_states: Sequence[int]) -> tuple[list[dict], list[dict]]:
    """(training, validation) demos: whole episodes whose ``init_state`` is in
    ``heldout_init_states`` go to validation, so that no state of a validation episode (nor a
    repeat from the same init state) is trained on."""
    heldout = set(heldout_init_states)
    train = [d for d in demos if int(d["init_state"]) not in heldout]
    val = [d for d in demos if int(d["init_state"]) in heldout]
    return train, val


def without_heldout_init_states(demos: Iterable[dict], heldout_init_states: Iterable[int]) -> tuple[list[dict], int]:
    """The demonstrations whose init state is not held out for evaluation, and how many were
    left out. Demo files may cover every init state (LIBERO's own do); training on the
    held-out states (40-49) would make the held-out evaluation a training-set one."""
    kept, left_out = split_by_init_state(list(demos), list(heldout_init_states))
    return kept, len(left_out)


@torch.no_grad()
def chunk_action_error(
    model: SmallVLA, samples: ChunkSamples, horizon: int | None = None, batch_size: int = 4096
) -> dict[str, float]:
    """Mean squared error of the deterministic chunk per instruction::

        err(task) = mean over samples of that task, steps j < horizon, dims d of (mu_j,d(o_t) - a*_{t+j},d)^2

    (the held-out action error used to choose the BC recipe; ``horizon`` (default the chunk)
    makes models with different chunk lengths comparable)."""
    h = horizon or model.chunk
    model.eval()
    sq = torch.zeros(len(samples))
    for i in range(0, len(samples), batch_size):
        mean = model.state_distribution(
            samples.state[i : i + batch_size], samples.instructions, samples.which[i : i + batch_size]
        ).mean
        sq[i : i + batch_size] = ((mean[:, :h] - samples.targets[i : i + batch_size, :h]) ** 2).mean((1, 2))
    return {text: float(sq[samples.which == k].mean()) for k, text in enumerate(samples.instructions)}


@dataclass
class ChunkSamples:
    """Training pairs (observation at t, action chunk from t), batched as tensors.

    ``state`` (N, 16 + object_dim) raw proprio and zero-padded object state, ``which`` (N,)
    index into ``instructions``, ``targets`` (N, chunk, 7) in [-1, 1].
    """

    state: torch.Tensor
    which: torch.Tensor
    instructions: list[str]
    targets: torch.Tensor

    def __len__(self) -> int:
        return len(self.targets)


def chunk_samples(demos: Sequence[dict[str, np.ndarray]], chunk: int, object_dim: int) -> ChunkSamples:
    """Every step of every demo (``load_demonstrations`` dicts) as a training pair."""
    if not demos:
        raise ValueError("no demonstrations; record some with `wmrl-libero record-demos`")
    instructions = sorted({d["language_instruction"] for d in demos})
    states, which, targets = [], [], []
    for d in demos:
        inputs = [VLAInput("", p.astype(np.float32), o) for p, o in zip(d["proprio"], d["object_state"])]
        p, o = batch_inputs(inputs, object_dim)
        states.append(torch.cat([p, o], 1))
        which.append(torch.full((len(inputs),), instructions.index(d["language_instruction"]), dtype=torch.long))
        targets.append(torch.as_tensor(chunk_targets(np.asarray(d["actions"]), chunk), dtype=torch.float32))
    return ChunkSamples(torch.cat(states), torch.cat(which), instructions, torch.cat(targets).clamp(-1, 1))


def fit_feature_scaling(model: SmallVLA, samples: ChunkSamples) -> None:
    """Standardise the physics features with the data's mean and standard deviation."""
    with torch.no_grad():
        model.feat_mean.copy_(samples.state.mean(0))
        model.feat_std.copy_(samples.state.std(0).clamp_min(1e-3))


def fit_small_vla(
    model: SmallVLA,
    samples: ChunkSamples,
    *,
    iterations: int,
    batch_size: int = 256,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    warmup: int = 0,
    final_lr_fraction: float = 1.0,
    obs_noise: float = 0.0,
    seed: int = 0,
    callback=None,
    callback_every: int = 1000,
    log=print,
) -> float:
    """AdamW on the chunk NLL ``-mean log pi(a[t:t+k] | o_t)`` over random minibatches; the
    model is trained in place (continuing from its weights).

    The learning rate follows :func:`cosine_learning_rate` (``final_lr_fraction`` 1: constant;
    the warm-up is capped at a tenth of the fit, so that short fits still reach ``lr``);
    ``obs_noise`` adds Gaussian noise of that many feature standard deviations to the physics
    features of every minibatch (noise on observations against compounding errors).
    ``callback(step, model)``, if given, runs after every ``callback_every`` steps and after
    the last (e.g. a held-out score; the model is in eval mode during the call).
    :return: the last minibatch's NLL."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    loss = torch.tensor(float("nan"))
    warmup = min(warmup, iterations // 10)
    for it in range(iterations):
        for group in opt.param_groups:
            group["lr"] = cosine_learning_rate(it, iterations, lr, warmup, final_lr_fraction)
        idx = torch.randint(len(samples), (batch_size,), generator=gen)
        state = samples.state[idx]
        if obs_noise > 0:  # not on constant features (zero padding): their std was clamped
            scale = model.feat_std * (model.feat_std > 1e-3)
            state = state + obs_noise * scale * torch.randn(state.shape, generator=gen)
        dist = model.state_distribution(state, samples.instructions, samples.which[idx])
        loss = -dist.log_prob(samples.targets[idx]).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % 500 == 0 or it == iterations - 1:
            log(f"bc iteration {it}: nll {loss.item():.3f}")
        if callback is not None and ((it + 1) % callback_every == 0 or it == iterations - 1):
            model.eval()
            callback(it + 1, model)
            model.train()
    model.eval()
    return float(loss.detach())


def train_behaviour_cloning(
    demo_files: Sequence[str | Path],
    out: str | Path,
    *,
    chunk: int = 4,
    object_dim: int = 128,
    iterations: int = 3000,
    batch_size: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
    log=print,
) -> Path:
    """Fit the small VLA on physics-state features (proprio + object state + instruction).

    :return: the checkpoint written (loadable by ``wmrl-libero eval small-vla:PATH``).
    """
    torch.manual_seed(seed)
    demos, dropped = without_heldout_init_states(
        (d for f in demo_files for d in load_demonstrations(f)), SPLITS["heldout"]
    )
    if dropped:
        log(f"bc: left out {dropped} demonstration(s) from the held-out init states (record with --init-states 0-39)")
    if not demos:
        raise ValueError(
            f"no demonstrations in {list(map(str, demo_files))}; record some with `wmrl-libero record-demos`"
        )
    samples = chunk_samples(demos, chunk, object_dim)
    model = SmallVLA(chunk=chunk, object_dim=object_dim)
    fit_feature_scaling(model, samples)
    started = time.time()
    nll = fit_small_vla(model, samples, iterations=iterations, batch_size=batch_size, lr=lr, seed=seed, log=log)
    log(f"bc: {len(demos)} demos, {len(samples)} samples, {iterations} iterations in {time.time() - started:.0f} s")
    return save_small_vla(model, out, demos=len(demos), samples=len(samples), iterations=iterations, final_nll=nll)

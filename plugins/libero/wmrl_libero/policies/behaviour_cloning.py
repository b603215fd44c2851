"""Behaviour cloning of :class:`~wmrl_libero.policies.small_vla.SmallVLA` on recorded demos.

Loss: negative log-likelihood of the demonstrated chunk ``a[t:t+k]`` (padded with the last
action at the end of a demo) under the policy's Gaussian at ``o_t``, averaged over samples.
Physics-state features only (proprio, object state, instruction); DAgger
(:mod:`wmrl_libero.dagger`) trains with the same functions on its aggregated data.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from wmrl_libero.demos import load_demonstrations
from wmrl_libero.policies.small_vla import SmallVLA, save_small_vla
from wmrl_libero.policies.vla_interface import VLAInput, batch_inputs

__all__ = [
    "chunk_targets",
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
    seed: int = 0,
    log=print,
) -> float:
    """Adam on the chunk NLL ``-mean log pi(a[t:t+k] | o_t)`` over random minibatches; the
    model is trained in place (continuing from its weights). :return: the last minibatch's NLL."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    loss = torch.tensor(float("nan"))
    for it in range(iterations):
        idx = torch.randint(len(samples), (batch_size,), generator=gen)
        dist = model.state_distribution(samples.state[idx], samples.instructions, samples.which[idx])
        loss = -dist.log_prob(samples.targets[idx]).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % 500 == 0 or it == iterations - 1:
            log(f"bc iteration {it}: nll {loss.item():.3f}")
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
    demos = [d for f in demo_files for d in load_demonstrations(f)]
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

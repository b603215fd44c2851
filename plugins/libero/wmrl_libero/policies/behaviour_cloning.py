"""Behaviour cloning of :class:`~wmrl_libero.policies.small_vla.SmallVLA` on recorded demos.

Loss: negative log-likelihood of the demonstrated chunk ``a[t:t+k]`` (padded with the last
action at the end of a demo) under the policy's Gaussian at ``o_t``, averaged over samples.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from wmrl_libero.demos import load_demonstrations
from wmrl_libero.policies.small_vla import SmallVLA, save_small_vla
from wmrl_libero.policies.vla_interface import VLAInput

__all__ = ["chunk_targets", "train_behaviour_cloning"]


def chunk_targets(actions: np.ndarray, chunk: int) -> np.ndarray:
    """(T, 7) -> (T, chunk, 7): row t holds a[t], ..., a[t+chunk-1], the last action repeated."""
    T = len(actions)
    idx = np.minimum(np.arange(T)[:, None] + np.arange(chunk)[None, :], T - 1)
    return actions[idx]


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
    rng = np.random.default_rng(seed)
    demos = [d for f in demo_files for d in load_demonstrations(f)]
    if not demos:
        raise ValueError(f"no demonstrations in {list(map(str, demo_files))}; record some with `wmrl-libero record-demos`")
    inputs: list[VLAInput] = []
    targets = []
    for d in demos:
        proprio = d["proprio"]
        for t in range(len(d["actions"])):
            inputs.append(VLAInput(d["language_instruction"], proprio[t].astype(np.float32), d["object_state"][t]))
        targets.append(chunk_targets(d["actions"], chunk))
    y = torch.as_tensor(np.concatenate(targets), dtype=torch.float32).clamp(-1, 1)
    model = SmallVLA(chunk=chunk, object_dim=object_dim)
    with torch.no_grad():
        from wmrl_libero.policies.vla_interface import batch_inputs

        p, o = batch_inputs(inputs, object_dim)
        feats = torch.cat([p, o], 1)
        model.feat_mean.copy_(feats.mean(0))
        model.feat_std.copy_(feats.std(0).clamp_min(1e-3))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    started = time.time()
    for it in range(iterations):
        idx = rng.integers(len(inputs), size=batch_size)
        loss = -model.log_prob([inputs[i] for i in idx], y[idx]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % 500 == 0 or it == iterations - 1:
            log(f"bc iteration {it}: nll {loss.item():.3f}")
    log(f"bc: {len(demos)} demos, {len(inputs)} samples, {iterations} iterations in {time.time() - started:.0f} s")
    return save_small_vla(model, out, demos=len(demos), samples=len(inputs), iterations=iterations, final_nll=float(loss.detach()))


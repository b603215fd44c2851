"""A success/progress scorer of physics states, and the potential-style progress of a trajectory.

One small MLP with two heads on ``(state, task)``:

- **success**: the logit of "the task's goal holds in this state". Positives: the last
  ``success_tail`` states of successful episodes (LIBERO ends an episode at success);
  negatives: every state of a failed episode and the states of successful ones before
  ``early_fraction`` of their length.
- **progress**: ``t / (T - 1)`` along successful episodes (regression, sigmoid output), the
  dense signal the paper's LIBERO world model gives (there from frames; here from states).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from wmrl_libero.world_models.features import Episode

__all__ = ["StateScorer", "fit_scorer", "potential_progress", "subsample_indices"]


def subsample_indices(length: int, n: int) -> np.ndarray:
    """``n`` evenly spaced indices of a trajectory of ``length`` states, first and last included."""
    if length <= 0:
        raise ValueError("cannot subsample an empty trajectory")
    return np.unique(np.round(np.linspace(0, length - 1, min(n, length))).astype(int))


def potential_progress(progress: np.ndarray, k: int = 3) -> float:
    """Potential-style progress of a trajectory: ``mean(p[-k:]) - mean(p[:k])``.

    ``p`` are per-state progress estimates in time order. Differencing the ends, not taking the
    peak ``max_t p_t``, is what keeps a policy from being rewarded for one spurious high
    estimate (the peak is reward-hacked; a difference of potentials only pays for where the
    episode ended relative to where it began).
    """
    p = np.asarray(progress, dtype=np.float64)
    if p.ndim != 1 or len(p) == 0:
        raise ValueError(f"expected a non-empty 1-d progress sequence, got shape {p.shape}")
    k = max(1, min(k, len(p) // 2 or 1))
    return float(p[-k:].mean() - p[:k].mean())


class StateScorer(nn.Module):
    """``(states (B, D), tasks (B,)) -> (success logit (B,), progress (B,) in [0, 1])``."""

    def __init__(self, state_dim: int, n_tasks: int = 10, hidden: int = 256):
        super().__init__()
        self.config = dict(state_dim=state_dim, n_tasks=n_tasks, hidden=hidden)
        self.n_tasks = n_tasks
        self.net = nn.Sequential(
            nn.Linear(state_dim + n_tasks, hidden),
            nn.SiLU(),
            nn.Linear(hidden, hidden),
            nn.SiLU(),
            nn.Linear(hidden, 2),
        )
        self.register_buffer("state_mean", torch.zeros(state_dim))
        self.register_buffer("state_std", torch.ones(state_dim))

    def forward(self, states: torch.Tensor, tasks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat(
            [(states - self.state_mean) / self.state_std, nn.functional.one_hot(tasks.long(), self.n_tasks).float()], -1
        )
        out = self.net(x)
        return out[..., 0], torch.sigmoid(out[..., 1])

    @torch.no_grad()
    def success_probability(self, states: torch.Tensor, tasks: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(states, tasks)[0])

    @torch.no_grad()
    def progress(self, states: torch.Tensor, tasks: torch.Tensor) -> torch.Tensor:
        return self(states, tasks)[1]


def _labelled_states(episodes: Sequence[Episode], success_tail: int, early_fraction: float):
    s, task, label, prog = [], [], [], []
    for e in episodes:
        L = len(e.states)
        t = np.arange(L)
        if e.success:
            lab = np.where(t >= L - success_tail, 1.0, np.where(t < early_fraction * L, 0.0, np.nan))
            p = t / max(L - 1, 1)
        else:
            lab, p = np.zeros(L), np.full(L, np.nan)
        s.append(e.states)
        task.append(np.full(L, e.task_index))
        label.append(lab)
        prog.append(p)
    return (
        np.concatenate(s),
        np.concatenate(task),
        np.concatenate(label).astype(np.float32),
        np.concatenate(prog).astype(np.float32),
    )


def fit_scorer(
    episodes: Sequence[Episode],
    *,
    n_tasks: int = 10,
    hidden: int = 256,
    iterations: int = 2000,
    batch_size: int = 512,
    lr: float = 1e-3,
    success_tail: int = 5,
    early_fraction: float = 0.7,
    seed: int = 0,
    log=print,
) -> StateScorer:
    """Train both heads (BCE on the labelled states, balanced; MSE on progress of successes)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    s, task, label, prog = _labelled_states(episodes, success_tail, early_fraction)
    if not np.any(label == 1) or not np.any(label == 0):
        raise ValueError(
            "the scorer needs successful AND failed episodes (or early states); "
            "record failures with `wmrl-libero record-wm-data`"
        )
    model = StateScorer(s.shape[1], n_tasks, hidden)
    model.state_mean.copy_(torch.as_tensor(s.mean(0)))
    model.state_std.copy_(torch.as_tensor(np.maximum(s.std(0), 1e-3)))
    pos, neg = np.flatnonzero(label == 1), np.flatnonzero(label == 0)
    with_prog = np.flatnonzero(np.isfinite(prog))
    S, K = torch.as_tensor(s), torch.as_tensor(task)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    half = batch_size // 2
    for it in range(iterations):
        cls = np.concatenate([rng.choice(pos, half), rng.choice(neg, half)])
        logit, _ = model(S[cls], K[cls])
        loss_cls = nn.functional.binary_cross_entropy_with_logits(logit, torch.as_tensor(label[cls]))
        loss_prog = torch.zeros(())
        if len(with_prog):
            pi = rng.choice(with_prog, batch_size)
            _, p = model(S[pi], K[pi])
            loss_prog = ((p - torch.as_tensor(prog[pi])) ** 2).mean()
        loss = loss_cls + loss_prog
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % 500 == 0 or it == iterations - 1:
            log(f"scorer it {it}: bce {loss_cls.item():.4f} progress mse {loss_prog.item():.4f}")
    return model.eval()

"""An ensemble of small MLPs predicting the physics-state change over an action chunk.

Each member ``m`` maps ``(s_t, a_t..a_{t+k-1}, task)`` to ``Delta_m ~ s_{t+k} - s_t`` (in
normalised units); the ensemble mean drives the imagined state and the members' spread is
the epistemic uncertainty (PETS / MBPO). Members are trained on different bootstrap
minibatches from different initialisations, so they agree where the data is dense and
disagree away from it: imagination stops trusting an episode once the spread is too large.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from wmrl_libero.world_models.features import Episode

__all__ = ["DynamicsEnsemble", "chunk_transitions", "ensemble_disagreement", "fit_dynamics"]


class _EnsembleLinear(nn.Module):
    """``E`` independent linear layers applied in one batched matmul: (E, B, i) -> (E, B, o)."""

    def __init__(self, members: int, d_in: int, d_out: int):
        super().__init__()
        bound = 1.0 / math.sqrt(d_in)
        self.weight = nn.Parameter(torch.empty(members, d_in, d_out).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, 1, d_out).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


def ensemble_disagreement(predictions: torch.Tensor) -> torch.Tensor:
    """Mean over state dimensions of the members' standard deviation.

    ``u(x) = (1/D) sum_d std_m f_m(x)_d`` for predictions ``(E, B, D)`` in normalised units
    -> ``(B,)``. Zero when the members agree.
    """
    return predictions.std(0, unbiased=False).mean(-1)


class DynamicsEnsemble(nn.Module):
    """Ensemble dynamics over ``state_dim`` states for ``n_tasks`` task one-hots.

    :param chunk: actions per prediction (``k``).
    :param members: ensemble size.
    """

    def __init__(self, state_dim: int, n_tasks: int = 10, *, chunk: int = 4, members: int = 5, hidden: int = 256):
        super().__init__()
        self.config = dict(state_dim=state_dim, n_tasks=n_tasks, chunk=chunk, members=members, hidden=hidden)
        self.state_dim, self.n_tasks, self.chunk, self.members = state_dim, n_tasks, chunk, members
        d_in = state_dim + 7 * chunk + n_tasks
        self.net = nn.Sequential(
            _EnsembleLinear(members, d_in, hidden),
            nn.SiLU(),
            _EnsembleLinear(members, hidden, hidden),
            nn.SiLU(),
            _EnsembleLinear(members, hidden, state_dim),
        )
        for name in ("state_mean", "delta_mean"):
            self.register_buffer(name, torch.zeros(state_dim))
        for name in ("state_std", "delta_std"):
            self.register_buffer(name, torch.ones(state_dim))
        self.register_buffer("state_low", torch.full((state_dim,), -1e6))
        self.register_buffer("state_high", torch.full((state_dim,), 1e6))
        self.register_buffer("train_disagreement_q99", torch.tensor(float("nan")))

    def _inputs(self, states: torch.Tensor, actions: torch.Tensor, tasks: torch.Tensor) -> torch.Tensor:
        s = (states - self.state_mean) / self.state_std
        onehot = nn.functional.one_hot(tasks.long(), self.n_tasks).float()
        return torch.cat([s, actions.reshape(len(states), -1), onehot], -1)

    def member_step(self, states: torch.Tensor, actions: torch.Tensor, tasks: torch.Tensor) -> torch.Tensor:
        """Each member's own next state, (E, B, D), from each member's own states (E, B, D):
        used to train on multi-chunk rollouts, where a member's errors compound."""
        E, B, _ = states.shape
        s = (states - self.state_mean) / self.state_std
        onehot = nn.functional.one_hot(tasks.long(), self.n_tasks).float()
        rest = torch.cat([actions.reshape(B, -1), onehot], -1).unsqueeze(0).expand(E, -1, -1)
        return states + self.net(torch.cat([s, rest], -1)) * self.delta_std + self.delta_mean

    def forward(self, states: torch.Tensor, actions: torch.Tensor, tasks: torch.Tensor) -> torch.Tensor:
        """Normalised deltas of every member, (E, B, D), for states (B, D), actions (B, k, 7), tasks (B,)."""
        x = self._inputs(states, actions, tasks)
        return self.net(x.unsqueeze(0).expand(self.members, -1, -1))

    @torch.no_grad()
    def step(self, states: torch.Tensor, actions: torch.Tensor, tasks: torch.Tensor):
        """(next states (B, D), disagreement (B,)): the ensemble-mean next state, clipped to the
        range seen in training (an imagined state outside it is an artefact to exploit), and the
        members' spread in normalised units."""
        deltas = self(states, actions, tasks)
        nxt = states + deltas.mean(0) * self.delta_std + self.delta_mean
        return torch.maximum(torch.minimum(nxt, self.state_high), self.state_low), ensemble_disagreement(deltas)


def chunk_transitions(episodes: Sequence[Episode], chunk: int) -> tuple[np.ndarray, ...]:
    """(states (N, D), action chunks (N, k, 7), next states (N, D), tasks (N,)) for every
    ``t`` with ``s_{t+k}`` recorded: ``s_t, a_{t:t+k} -> s_{t+k}``."""
    s, a, n, k = [], [], [], []
    for e in episodes:
        last = min(len(e.states) - chunk, len(e.actions) - chunk + 1)
        if last <= 0:
            continue
        idx = np.arange(last)
        s.append(e.states[idx])
        a.append(np.stack([e.actions[i : i + chunk] for i in idx]))
        n.append(e.states[idx + chunk])
        k.append(np.full(last, e.task_index))
    if not s:
        raise ValueError(f"no episode is longer than the chunk ({chunk} steps)")
    return np.concatenate(s), np.concatenate(a).astype(np.float32), np.concatenate(n), np.concatenate(k)


def chunk_windows(episodes: Sequence[Episode], chunk: int, length: int) -> tuple[np.ndarray, ...]:
    """(start states (N, D), actions (N, length, k, 7), states after each chunk (N, length, D),
    tasks (N,)) for every window of ``length`` consecutive chunks inside an episode."""
    s0, acts, targets, tasks = [], [], [], []
    for e in episodes:
        span = chunk * length
        last = min(len(e.states) - span, len(e.actions) - span + 1)
        for t in range(0, max(last, 0), chunk):
            s0.append(e.states[t])
            acts.append(e.actions[t : t + span].reshape(length, chunk, 7))
            targets.append(e.states[t + chunk : t + span + 1 : chunk])
            tasks.append(e.task_index)
    if not s0:
        raise ValueError(f"no episode is longer than {length} chunks of {chunk} steps")
    return np.stack(s0), np.stack(acts).astype(np.float32), np.stack(targets), np.asarray(tasks)


def fit_dynamics(
    episodes: Sequence[Episode],
    *,
    chunk: int = 4,
    members: int = 5,
    hidden: int = 256,
    n_tasks: int = 10,
    iterations: int = 3000,
    batch_size: int = 256,
    lr: float = 1e-3,
    rollout_chunks: int = 1,
    seed: int = 0,
    log=print,
) -> DynamicsEnsemble:
    """Train the ensemble by mean squared error on normalised deltas; each member draws its
    own minibatches (bootstrap).

    With ``rollout_chunks = H > 1`` each member is also unrolled on its own predictions for
    ``H`` chunks and penalised at every one, ``L = (1/H) sum_h ||(s^_h - s_h) / sigma_s||^2``
    (the error it will meet in imagination, where its inputs are its own outputs)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    s, a, n, k = chunk_transitions(episodes, chunk)
    model = DynamicsEnsemble(s.shape[1], n_tasks, chunk=chunk, members=members, hidden=hidden)
    delta = n - s
    model.state_mean.copy_(torch.as_tensor(s.mean(0)))
    model.state_std.copy_(torch.as_tensor(np.maximum(s.std(0), 1e-3)))
    model.delta_mean.copy_(torch.as_tensor(delta.mean(0)))
    model.delta_std.copy_(torch.as_tensor(np.maximum(delta.std(0), 1e-4)))
    span = s.max(0) - s.min(0)
    model.state_low.copy_(torch.as_tensor(s.min(0) - 0.1 * span))
    model.state_high.copy_(torch.as_tensor(s.max(0) + 0.1 * span))
    S, A, K = torch.as_tensor(s), torch.as_tensor(a), torch.as_tensor(k)
    target = (torch.as_tensor(delta) - model.delta_mean) / model.delta_std
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for it in range(iterations):
        idx = torch.as_tensor(rng.integers(0, len(S), (members, batch_size)))
        x = torch.stack([model._inputs(S[i], A[i], K[i]) for i in idx])
        loss = ((model.net(x) - target[idx]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % 500 == 0 or it == iterations - 1:
            log(f"dynamics it {it}: mse {loss.item():.4f} (normalised deltas, {len(S)} transitions)")
    if rollout_chunks > 1:
        w0, wa, wt, wk = (torch.as_tensor(x) for x in chunk_windows(episodes, chunk, rollout_chunks))
        for it in range(iterations):
            idx = torch.as_tensor(rng.integers(0, len(w0), batch_size))
            x = w0[idx].unsqueeze(0).expand(members, -1, -1)
            loss = torch.zeros(())
            for h in range(rollout_chunks):
                x = model.member_step(x, wa[idx, h], wk[idx])
                loss = loss + (((x - wt[idx, h]) / model.state_std) ** 2).mean() / rollout_chunks
            opt.zero_grad()
            loss.backward()
            opt.step()
            if it % 500 == 0 or it == iterations - 1:
                log(f"dynamics rollout it {it}: mse {loss.item():.4f} over {rollout_chunks} chunks ({len(w0)} windows)")
    model.eval()
    with torch.no_grad():  # the spread on training data: the scale for imagination's cut
        idx = torch.as_tensor(rng.integers(0, len(S), min(len(S), 5000)))
        spread = ensemble_disagreement(model(S[idx], A[idx], K[idx]))
    model.register_buffer("train_disagreement_q99", torch.quantile(spread, 0.99).reshape(()))
    return model

r"""The learned world model of the program policy's outcomes.

A ridge regression (the shipped checkpoint; :class:`RewardModel` with ``hidden=0``) reads the
task's meta-features and the program's one-hot decisions and predicts the normalized reward
(``autoresearch-score`` scale: 1 = perfect, 0 = constant baseline, -1 = failure) of running it:

.. math:: \hat r = \operatorname{clip}(w^\top [\,(x-\mu_x)/\sigma_x,\ \operatorname{onehot}(d)\,] + b, -1, 1)

fitted in closed form on executions of the **training suite only** (``build.py``, which chose
the linear model over MLPs by cross-validation). ``hidden > 0`` gives a small MLP instead,
kept for that comparison.
All rollouts of a step go through one batched forward pass. The prediction is returned as
an :class:`~wmrl_core.types.Outcome` holding the raw metric value that would give
:math:`\hat r`, so the same reward extractor serves real and predicted outcomes.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from wmrl_core.types import CostModel, Outcome, Task

from wmrl_autoresearch.program.grammar import ONE_HOT_SIZE, Program, programs_of

__all__ = ["RewardModel", "LearnedWorldModel", "fit_reward_model", "raw_score_for_reward", "SHIPPED_CHECKPOINT"]

SHIPPED_CHECKPOINT = "world_model.pt"


class RewardModel(nn.Module):
    """``hidden=0``: a linear (ridge) model, main effects of each decision plus task features;
    ``hidden>0``: an MLP with two hidden layers of that width."""

    def __init__(self, n_features: int, hidden: int = 64):
        super().__init__()
        n_in = n_features + ONE_HOT_SIZE
        self.net = (nn.Linear(n_in, 1) if hidden == 0 else
                    nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                  nn.Linear(hidden, 1)))
        self.register_buffer("mu", torch.zeros(n_features))
        self.register_buffer("sigma", torch.ones(n_features))

    def forward(self, features: torch.Tensor, one_hot: torch.Tensor) -> torch.Tensor:
        x = (features - self.mu) / self.sigma
        return self.net(torch.cat([x, one_hot], dim=-1)).squeeze(-1)


def fit_reward_model(features: np.ndarray, one_hot: np.ndarray, rewards: np.ndarray, *, hidden: int = 64,
                   epochs: int = 400, lr: float = 3e-3, weight_decay: float = 1e-3, ridge: float = 30.0,
                   seed: int = 0) -> RewardModel:
    r"""``hidden=0``: closed-form ridge, :math:`w = (X^TX + \lambda I)^{-1} X^T (y - \bar y)` on
    standardized inputs. ``hidden>0``: full-batch Adam on MSE (hundreds of runs: full batch is exact)."""
    if not (len(features) == len(one_hot) == len(rewards)) or len(rewards) < 2:
        raise ValueError(f"need >= 2 aligned examples, got {len(features)}, {len(one_hot)}, {len(rewards)}")
    torch.manual_seed(seed)
    model = RewardModel(features.shape[1], hidden)
    f = torch.as_tensor(features, dtype=torch.float32)
    model.mu.copy_(f.mean(0))
    model.sigma.copy_(f.std(0).clamp_min(1e-3))
    oh = torch.as_tensor(one_hot, dtype=torch.float32)
    y = torch.as_tensor(rewards, dtype=torch.float32)
    if hidden == 0:
        x = torch.cat([(f - model.mu) / model.sigma, oh], dim=-1).double()
        x_mean = x.mean(0)
        xc, yc = x - x_mean, (y - y.mean()).double()
        w = torch.linalg.solve(xc.T @ xc + ridge * torch.eye(x.shape[1], dtype=torch.float64), xc.T @ yc)
        with torch.no_grad():
            model.net.weight.copy_(w.float().unsqueeze(0))
            model.net.bias.copy_((y.mean() - x_mean.float() @ w.float()).reshape(1))
        return model.eval()
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.mean((model(f, oh) - y) ** 2)
        loss.backward()
        opt.step()
    return model.eval()


def raw_score_for_reward(task: Any, reward: float) -> float:
    """Invert ``normalized_score``: the raw metric value whose normalized reward is ``reward``."""
    metric = task.metric_spec
    if metric.higher_is_better:
        return float(reward)
    return float((1.0 - reward) * task.baseline)


class LearnedWorldModel:
    """Registered as ``program-world-model``.

    :param env: the AutoResearch environment (unused; factory contract).
    :param checkpoint: path of a ``build.py`` checkpoint; default: the one shipped with the plugin.
    :param cost_per_call_s: declared cost of one batched call (``None``: wall time is charged).
    """

    def __init__(self, env: Any = None, *, checkpoint: str | None = None, cost_per_call_s: float | None = None):
        path = Path(checkpoint) if checkpoint else resources.files("wmrl_autoresearch.program") / "data" / SHIPPED_CHECKPOINT
        if not Path(str(path)).is_file():
            raise FileNotFoundError(f"world-model checkpoint {path} not found; build one with "
                                    "`wmrl-autoresearch build-world-model` or pass world_model.kwargs.checkpoint")
        state = torch.load(str(path), weights_only=False)
        self.model = RewardModel(state["n_features"], state["hidden"])
        self.model.load_state_dict(state["model"])
        self.model.eval()
        self.info = state.get("info", {})
        self.cost = CostModel(per_call_s=cost_per_call_s) if cost_per_call_s is not None else None

    @torch.no_grad()
    def predict_rewards(self, tasks: Sequence[Task], programs: Sequence[Program]) -> np.ndarray:
        features = torch.as_tensor(np.stack([np.asarray(t.features, dtype=np.float32) for t in tasks]))
        one_hot = torch.as_tensor(np.stack([p.one_hot() for p in programs]))
        return self.model(features, one_hot).clamp(-1.0, 1.0).numpy()

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        programs = programs_of(solutions)
        known = [i for i, p in enumerate(programs) if p is not None]
        outcomes = [Outcome(status="invalid_output", score=None, info={"reason": "not a program-policy script"})
                    for _ in solutions]
        if known:
            rewards = self.predict_rewards([tasks[i] for i in known], [programs[i] for i in known])
            for i, r in zip(known, rewards.tolist()):
                score = raw_score_for_reward(tasks[i].data, r)
                outcomes[i] = Outcome(status="ok", score=score if math.isfinite(score) else None,
                                      info={"predicted_reward": r})
        return outcomes

r"""The program policy: a small autoregressive network over the experiment grammar.

Conditioned on the task's meta-features :math:`x` (``wmrl_autoresearch.tasks.FEATURE_NAMES``), it
emits the decisions :math:`d_1..d_K` of :data:`~.grammar.DECISIONS` one at a time:

.. math:: h_0 = \tanh(W_x x + b),\quad h_k = \operatorname{GRU}([h_{k-1}], e(d_{k-1})),\quad
          \pi(d_k \mid x, d_{<k}) = \operatorname{softmax}(W_k h_k)

with a separate output head per decision (menus differ in size). The per-decision
log-probabilities are the "tokens" GRPO updates. The rendered script is the solution.

The entropy of a rollout is exact, :math:`H = \sum_k H(\pi(\cdot \mid x, d_{<k}))` along its
sampled prefix; by the chain rule its mean over rollouts estimates the entropy of the joint
distribution over programs, at most :math:`\sum_k \log|\text{menu}_k|` (9.53 nats, the uniform
initial policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from wmrl_autoresearch.program.grammar import DECISIONS, N_DECISIONS, N_OPTIONS, Program
from wmrl_autoresearch.program.render import ScriptColumns, render_script
from wmrl_autoresearch.tasks.competition_task import CompetitionTask
from wmrl_core.types import CostModel, Rollouts, Task

__all__ = ["ProgramPolicy"]


def _features(tasks: Sequence[Task]) -> torch.Tensor:
    rows = []
    for task in tasks:
        if task.features is None:
            raise ValueError(f"task {task.id} has no features; the program policy needs AutoResearch tasks")
        rows.append(np.asarray(task.features, dtype=np.float32))
    return torch.as_tensor(np.stack(rows))


def _is_classification(task: Task) -> bool:
    return getattr(task.data, "kind", "classification") == "classification"


def _columns(task: Task) -> ScriptColumns:
    """The sandbox contract's columns, or a tabular competition's own (its target, id and submission header).

    :raises ValueError: for a competition that is not one table with a known target and id column.
    """
    data = task.data
    if not isinstance(data, CompetitionTask):
        return ScriptColumns()
    if data.tabular is None:
        raise ValueError(
            f"the program policy cannot solve competition {task.id}: {data.not_tabular}; keep only tabular "
            "competitions (environment.kwargs.competitions.tabular_only: true) or use the llm-code-agent policy"
        )
    layout = data.tabular
    return ScriptColumns(layout.target, layout.id, layout.target, (layout.id,) if layout.train_has_id else ())


class ProgramPolicy(nn.Module):
    """:param env: the AutoResearch environment (unused; kept for the factory contract).
    :param hidden: width of the recurrent state.
    :param generation_cost_s: declared cost per generated program (seconds); ``None`` charges wall time.
    :param seed: initialisation seed of the weights (the same seed gives the same untrained policy).
    """

    def __init__(
        self,
        env: Any = None,
        *,
        hidden: int = 64,
        n_features: int | None = None,
        generation_cost_s: float | None = None,
        seed: int = 0,
    ):
        super().__init__()
        if n_features is None:
            from wmrl_autoresearch.tasks.task import N_FEATURES

            n_features = N_FEATURES
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.encode = nn.Linear(n_features, hidden)
        self.embed = nn.Embedding(sum(N_OPTIONS) + 1, hidden)  # +1: the start token
        self.cell = nn.GRUCell(hidden, hidden)
        self.heads = nn.ModuleList(nn.Linear(hidden, n) for n in N_OPTIONS)
        for head in self.heads:  # start from the uniform distribution over each menu
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)
        torch.random.set_rng_state(generator_state)
        self._offsets = np.concatenate([[0], np.cumsum(N_OPTIONS)[:-1]]) + 1
        self.cost = CostModel(per_item_s=generation_cost_s) if generation_cost_s is not None else None

    def _run(
        self, features: torch.Tensor, choices: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (``choices is None``) or score given choices; returns (choices, log-probs,
        entropies of each decision's distribution), each of shape (N, K)."""
        n = features.shape[0]
        h = torch.tanh(self.encode(features))
        token = torch.zeros(n, dtype=torch.long)
        out_choices, out_lp, out_entropy = [], [], []
        for k in range(N_DECISIONS):
            h = self.cell(self.embed(token), h)
            dist = torch.distributions.Categorical(logits=self.heads[k](h))
            c = dist.sample() if choices is None else choices[:, k]
            out_choices.append(c)
            out_lp.append(dist.log_prob(c))
            out_entropy.append(dist.entropy())
            token = c + int(self._offsets[k])
        return torch.stack(out_choices, 1), torch.stack(out_lp, 1), torch.stack(out_entropy, 1)

    @torch.no_grad()
    def generate(self, tasks: Sequence[Task], group_size: int) -> Rollouts:
        all_tasks = [t for t in tasks for _ in range(group_size)]
        features = _features(all_tasks)
        choices, log_probs, _ = self._run(features, None)
        solutions = [
            render_script(
                Program(tuple(int(c) for c in row)), classification=_is_classification(t), columns=_columns(t)
            )
            for row, t in zip(choices.tolist(), all_tasks)
        ]
        return Rollouts(
            tasks=all_tasks,
            solutions=solutions,
            group_ids=np.repeat(np.arange(len(tasks)), group_size),
            old_log_probs=log_probs,
            mask=torch.ones_like(log_probs),
            extra={"features": features, "choices": choices},
        )

    def log_probs(self, rollouts: Rollouts) -> torch.Tensor:
        return self._run(rollouts.extra["features"], rollouts.extra["choices"])[1]

    def entropy(self, rollouts: Rollouts) -> torch.Tensor:
        """(N, K) exact entropy in nats of each decision's distribution along each rollout's
        prefix, under the current parameters (differentiable)."""
        return self._run(rollouts.extra["features"], rollouts.extra["choices"])[2]

    @torch.no_grad()
    def decision_marginals(self, task: Task, samples: int = 256) -> dict[str, dict[str, float]]:
        """Empirical frequency of each option under the policy for one task (for reports)."""
        choices, _, _ = self._run(_features([task] * samples), None)
        return {
            name: {opt: float((choices[:, k] == i).float().mean()) for i, opt in enumerate(options)}
            for k, (name, options) in enumerate(DECISIONS)
        }

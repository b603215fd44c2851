"""A tabular softmax policy over arms: the synthetic domain's policy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from wmrl_core.synthetic.bandit import SyntheticBanditEnvironment, _task_index
from wmrl_core.types import CostModel, Rollouts, Task

__all__ = ["TabularSoftmaxPolicy"]


class TabularSoftmaxPolicy(torch.nn.Module):
    """:math:`\\pi(a\\mid t) = \\operatorname{softmax}(\\theta_t)_a`, one action (token) per rollout.

    :param env: the synthetic environment (for the number of tasks and arms).
    :param generation_cost_s: declared cost of generating one rollout (seconds).
    :param generation_cost_per_call_s: declared cost of one batched generation call.
    """

    def __init__(
        self,
        env: SyntheticBanditEnvironment,
        *,
        generation_cost_s: float = 0.05,
        generation_cost_per_call_s: float = 0.0,
    ):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(env.truth.num_tasks, env.truth.num_arms))
        self.cost = CostModel(per_call_s=generation_cost_per_call_s, per_item_s=generation_cost_s)

    def _rows(self, tasks: Sequence[Task]) -> torch.Tensor:
        return torch.tensor([_task_index(t) for t in tasks], dtype=torch.long)

    @torch.no_grad()
    def generate(self, tasks: Sequence[Task], group_size: int) -> Rollouts:
        rows = self._rows(tasks).repeat_interleave(group_size)
        dist = torch.distributions.Categorical(logits=self.logits[rows])
        arms = dist.sample()
        return Rollouts(
            tasks=[t for t in tasks for _ in range(group_size)],
            solutions=arms.tolist(),
            group_ids=np.repeat(np.arange(len(tasks)), group_size),
            old_log_probs=dist.log_prob(arms).unsqueeze(-1),
            mask=torch.ones(len(arms), 1),
            extra={"rows": rows, "arms": arms},
        )

    def log_probs(self, rollouts: Rollouts) -> torch.Tensor:
        rows, arms = rollouts.extra["rows"], rollouts.extra["arms"]
        return torch.log_softmax(self.logits[rows], dim=-1).gather(-1, arms.unsqueeze(-1))

    def probabilities(self, task_index: int) -> np.ndarray:
        return torch.softmax(self.logits[task_index].detach(), dim=-1).numpy()

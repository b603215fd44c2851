"""An open-loop planner: a linear map from the initial state to each step's action logits.

.. math:: \\pi(a_t \\mid s_0) = \\mathrm{softmax}_a\\big(W_t^\\top [s_0 / 0.05,\\ 1]\\big)

The scale 0.05 is CartPole's reset range, so the features are O(1). A rollout's T tokens are its
``horizon`` actions, all sampled before execution (so every token exists: the mask is all ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from wmrl_core.types import Rollouts, Task

__all__ = ["LinearPlanPolicy"]

STATE_SCALE = 0.05  # CartPole-v1 resets every state variable uniformly in [-0.05, 0.05]


class LinearPlanPolicy(torch.nn.Module):
    """Samples a plan of ``horizon`` actions per rollout from the task's initial state.

    :param env: the environment (:class:`~wmrl_gymnasium_control.environment.CartPoleSeeds`): its
        ``horizon``, ``n_actions`` and ``state_dim`` size the plan and the weights (zeros: uniform plans).
    """

    def __init__(self, env: Any):
        super().__init__()
        self.horizon, self.n_actions = int(env.horizon), int(env.n_actions)
        self.weight = torch.nn.Parameter(torch.zeros(self.horizon, int(env.state_dim) + 1, self.n_actions))

    def _inputs(self, tasks: Sequence[Task]) -> torch.Tensor:
        states = torch.as_tensor(np.stack([t.features for t in tasks]), dtype=torch.float32) / STATE_SCALE
        return torch.cat([states, torch.ones(len(tasks), 1)], dim=1)

    def _logits(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.einsum("nf,tfa->nta", inputs, self.weight)  # (N, horizon, n_actions)

    @torch.no_grad()
    def generate(self, tasks: Sequence[Task], group_size: int) -> Rollouts:
        inputs = self._inputs(tasks).repeat_interleave(group_size, dim=0)
        dist = torch.distributions.Categorical(logits=self._logits(inputs))
        actions = dist.sample()  # (N, horizon)
        return Rollouts(
            tasks=[t for t in tasks for _ in range(group_size)],
            solutions=actions.tolist(),
            group_ids=np.repeat(np.arange(len(tasks)), group_size),
            old_log_probs=dist.log_prob(actions),
            mask=torch.ones(actions.shape),
            extra={"inputs": inputs, "actions": actions},
        )

    def log_probs(self, rollouts: Rollouts) -> torch.Tensor:
        logp = torch.log_softmax(self._logits(rollouts.extra["inputs"]), dim=-1)
        return logp.gather(-1, rollouts.extra["actions"][..., None]).squeeze(-1)

    def entropy(self, rollouts: Rollouts) -> torch.Tensor:
        return torch.distributions.Categorical(logits=self._logits(rollouts.extra["inputs"])).entropy()

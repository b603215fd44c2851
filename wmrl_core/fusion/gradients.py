r"""Per-group policy gradients, whole or sketched: what a fuser needs to weigh streams by their
gradients rather than by their advantages.

A group's GRPO gradient with advantages :math:`A` is

.. math:: h_g(A) = \nabla_\theta\, \operatorname{agg}_{i\in g}\big(-A_i \log\pi_\theta(y_i)\big),

the on-policy gradient of the group's surrogate loss (probability ratio 1, so clipping is
inactive), averaged over the group's own tokens or rollouts (the configured aggregation). The
step's update is then the mean of its groups' :math:`h_g`, so inner products of these vectors
are what the trace of a gradient covariance needs (:mod:`.rectified`'s gradient moments,
:mod:`.shrinkage`'s weight).

**Sketch.** For a large policy the vectors are projected by a fixed count sketch
(Charikar, Chen and Farach-Colton, 2002): coordinate :math:`j` is added, with a random sign
:math:`\sigma_j`, to bucket :math:`b_j` of :math:`D`. With :math:`b, \sigma` drawn once from a fixed
seed, :math:`E\langle Sx, Sy\rangle = \langle x, y\rangle` exactly (the signs of distinct coordinates
cancel in expectation), and its variance falls as :math:`1/D`. The same projection is used at
every step, so vectors from different steps stay comparable.

:class:`PolicyGradients` is lazy: it runs the policy's forward pass (with graph) only when a
fuser first asks for a gradient, so fusers that need none cost nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, cast

import numpy as np
import torch

from wmrl_core.errors import ConfigError
from wmrl_core.grpo import LossAggregation, aggregate

__all__ = [
    "GroupGradient",
    "PolicyGradients",
    "count_sketch",
    "MissingGradientsError",
    "require_gradients",
    "refuse_gradient_fusers",
    "anchor_group_gradients",
    "gradients_state",
    "gradients_from_state",
]

GroupGradient = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``(advantages (N,), rows (N,) bool) -> gradient vector``: :math:`h(A)` over ``rows``."""

MAX_WHOLE_PARAMETERS = 5_000_000
"""Above this many trainable parameters whole per-group gradients are refused (each kept vector
would take tens of MB); ``fusion.gradient_sketch_dim`` sketches them instead."""


class MissingGradientsError(ConfigError, RuntimeError):
    """A fuser needs per-group gradients that the trainer did not provide (the fix is another
    ``fusion`` setting, as for :func:`refuse_gradient_fusers`)."""


def require_gradients(group_gradient: GroupGradient | None, who: str) -> GroupGradient:
    """``group_gradient``, or a clear error naming what needs it and what to do."""
    if group_gradient is None:
        raise MissingGradientsError(
            f"{who} needs per-group policy gradients, which this trainer does not pass to fuse_step "
            "(WMRL's own trainer does; the TRL and verl integrations do not): use fusion.method=rectified "
            "with fusion.kwargs.lambda_moments=solution there"
        )
    return group_gradient


def refuse_gradient_fusers(fuser: Any, trainer: str) -> None:
    """A clear error, when the trainer is built, for a fuser that needs per-group gradients a
    trainer cannot give (rather than one at the first anchored step)."""
    if getattr(fuser, "needs_group_gradients", False):
        raise ConfigError(
            f"{trainer} does not compute per-group policy gradients, which this fusion needs "
            f"({type(fuser).__name__}): set fusion.method=rectified and fusion.kwargs.lambda_moments=solution "
            "(or train with WMRL's own trainer, `wmrl train`)"
        )


@lru_cache(maxsize=64)
def _sketch_plan(numel: int, dim: int, seed: int, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(int(seed) * 1_000_003 + index)
    buckets = torch.randint(dim, (numel,), generator=generator)
    signs = torch.randint(0, 2, (numel,), generator=generator).to(torch.float64) * 2.0 - 1.0
    return buckets, signs


def count_sketch(pieces: Sequence[torch.Tensor], dim: int, seed: int = 0) -> np.ndarray:
    r""":math:`(Sx)_k = \sum_{j:\,b_j = k} \sigma_j x_j` over the concatenated ``pieces`` (module
    docstring); piece :math:`p`'s buckets and signs are drawn from ``(seed, p)``, so the projection
    is the same at every call."""
    if dim < 1:
        raise ValueError(f"sketch dimension must be >= 1, got {dim}")
    out = torch.zeros(dim, dtype=torch.float64)
    for index, piece in enumerate(pieces):
        flat = piece.detach().reshape(-1).to("cpu", torch.float64)
        buckets, signs = _sketch_plan(flat.numel(), dim, seed, index)
        out.index_add_(0, buckets, flat * signs)
    return out.numpy()


class PolicyGradients:
    """:math:`h(A)` over any rows of one step's rollouts, at the parameters that sampled them.

    :param policy: a torch module with ``log_probs(rollouts) -> (N, T)``.
    :param rollouts: the step's rollouts.
    :param mask: (N, T) the tokens that count.
    :param aggregation: the GRPO loss's aggregation.
    :param sketch_dim: ``None`` for whole gradients, else the count sketch's dimension.
    :param seed: the sketch's seed (fixed for a run).
    """

    def __init__(
        self,
        policy: Any,
        rollouts: Any,
        mask: torch.Tensor,
        aggregation: str,
        *,
        sketch_dim: int | None = None,
        seed: int = 0,
    ):
        self.policy, self.rollouts, self.mask = policy, rollouts, mask
        self.aggregation, self.sketch_dim, self.seed = aggregation, sketch_dim, seed
        self._log_probs: torch.Tensor | None = None
        self._params: list[torch.Tensor] = []

    def _forward(self) -> torch.Tensor:
        if self._log_probs is None:
            self._params = [p for p in self.policy.parameters() if p.requires_grad]
            n_params = sum(p.numel() for p in self._params)
            if self.sketch_dim is None and n_params > MAX_WHOLE_PARAMETERS:
                raise ValueError(
                    f"per-group gradients of a policy with {n_params:,} trainable parameters would be kept whole; "
                    f"set fusion.gradient_sketch_dim (e.g. 1024) to sketch them"
                )
            self._log_probs = self.policy.log_probs(self.rollouts)
        return self._log_probs

    def __call__(self, advantages: np.ndarray, rows: np.ndarray) -> np.ndarray:
        log_probs = self._forward()
        adv = torch.as_tensor(np.nan_to_num(np.asarray(advantages, dtype=np.float64)), dtype=log_probs.dtype)
        rows_t = torch.as_tensor(np.asarray(rows, dtype=np.float32), device=log_probs.device).unsqueeze(-1)
        loss = aggregate(
            -adv.to(log_probs.device).unsqueeze(-1) * log_probs,
            self.mask * rows_t,
            cast(LossAggregation, self.aggregation),
        )
        grads = torch.autograd.grad(loss, self._params, retain_graph=True, allow_unused=True)
        pieces = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, self._params, strict=True)]
        if self.sketch_dim is not None:
            return count_sketch(pieces, self.sketch_dim, self.seed)
        return torch.cat([g.detach().reshape(-1).to("cpu", torch.float64) for g in pieces]).numpy()


def anchor_group_gradients(step: Any, gradient: GroupGradient) -> list[tuple[np.ndarray, np.ndarray]]:
    """:math:`(h^R_g, h^C_g)` of each anchor group of a step (a
    :class:`~wmrl_core.fusion.base.FusionInputs`): its gradient with the real advantages and with the
    calibrated ones, over the group's rows."""
    out = []
    for g in np.unique(step.group_ids[step.is_anchor]):
        rows = step.is_anchor & (step.group_ids == g)
        out.append((gradient(step.advantages, rows), gradient(step.calibrated_advantages, rows)))
    return out


def gradients_state(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[list[list[float]]]:
    """Kept ``(h^R, h^C)`` pairs as lists, for a fuser's ``state_dict``."""
    return [[h_r.tolist(), h_c.tolist()] for h_r, h_c in pairs]


def gradients_from_state(
    state: Sequence[Sequence[Sequence[float]]], window: int
) -> deque[tuple[np.ndarray, np.ndarray]]:
    """:func:`gradients_state`'s lists back as a window of at most ``window`` pairs."""
    return deque(((np.asarray(r), np.asarray(c)) for r, c in state), maxlen=window)

r"""What every fuser shares: the step's inputs, its plan (weighted GRPO loss terms), the
:class:`Fuser` protocol, and the two losses a plan defines.

A fusion method turns one step's two reward streams into a *plan*: loss terms
:math:`(c_k, A_k, R_k)`, each ``c_k * grpo_loss(A_k over rows R_k)``, so that the fused loss is

.. math:: L = \sum_k c_k\, L_{\text{agg}}(R_k; A_k),

with :math:`L_{\text{agg}}` the configured aggregation, a mean over the term's own rows.

**Effective advantages.** On-policy (probability ratio 1, no clipping active: one optimisation
pass per batch) the clipped surrogate's gradient is linear in the advantage, and a term's
aggregation divides by its own count :math:`Z_k` (tokens for ``token_mean``, non-empty rollouts
for ``sequence_mean``). So the whole plan is one GRPO loss over all rows with

.. math:: \tilde A_i = \sum_k c_k \frac{Z_{\text{all}}}{Z_k}\,\mathbb 1[i\in R_k]\,A_{k,i},

which for rectified fusion is :math:`\lambda A^C_i + \mathbb 1[i\in\mathcal A]\frac{Z_{\text{all}}}{Z_{\mathcal A}}(A^R_i - \lambda A^C_i)`
and for a convex combination :math:`w_S (Z_{\text{all}}/Z_S) A_i` on stream :math:`S`'s rows. The
KL penalty is aggregated per term as well; its exact on-policy counterpart weighs row
:math:`i`'s KL by :math:`\tilde w_i = \sum_k c_k (Z_{\text{all}}/Z_k)\mathbb 1[i\in R_k]`
(:func:`effective_advantage_loss`). Off-policy (a later epoch, ratio :math:`\ne 1`, clipping
active) the terms' clipping differs from one loss's, and :func:`multi_term_loss` is the exact one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from wmrl_core.grpo import LossAggregation, aggregate, clipped_surrogate, grpo_loss, kl_k3

__all__ = [
    "LossTerm",
    "FusionInputs",
    "FusionPlan",
    "Fuser",
    "loss_normalizers",
    "effective_advantages",
    "effective_advantage_loss",
    "multi_term_loss",
]


@dataclass(frozen=True)
class LossTerm:
    """``coef * grpo_loss(advantages, rows)``: one term of a fused loss.

    :param coef: the term's weight :math:`c_k` (may be negative: rectified's correction).
    :param advantages: (N,) advantages; only ``rows`` are read.
    :param rows: (N,) bool, the rows the term averages over.
    """

    coef: float
    advantages: np.ndarray
    rows: np.ndarray


@dataclass(frozen=True)
class FusionInputs:
    """One step, as a fuser sees it (built by :func:`wmrl_core.fusion.engine.fuse_step`).

    :param advantages: (N,) group advantages of the stream rewards: real on anchor rows,
        calibrated elsewhere.
    :param calibrated_advantages: (N,) group advantages of the calibrated world-model rewards on
        every row (0 where there is none).
    :param is_anchor: (N,) bool, rows of the groups executed for real.
    :param group_ids: (N,) group of each row.
    :param anchor_share: :math:`k/B`, the share of the step's groups that are anchors.
    :param n_real: anchor rollouts with a real reward.
    :param n_world_model: other rollouts with a (calibrated) world-model reward.
    :param pairs: ``(world_model, real, group_keys)`` of every anchor pair the calibrator holds,
        this step's included (the last ``step_pairs`` of them).
    :param calibrated: whether the world-model rewards were calibrated (else raw).
    :param solutions: the rows' solutions (for fusers that merge equal ones), or ``None``.
    :param group_gradient: :math:`h(A)` over given rows at the step's parameters
        (:class:`~wmrl_core.fusion.gradients.PolicyGradients`), for fusers that weigh by gradients;
        ``None`` where the trainer provides none.
    :param step_pairs: how many of ``pairs`` this step's anchors added (a fuser that must not read
        its own step's anchors leaves them out).
    """

    advantages: np.ndarray
    calibrated_advantages: np.ndarray
    is_anchor: np.ndarray
    group_ids: np.ndarray
    anchor_share: float
    n_real: int
    n_world_model: int
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray]
    calibrated: bool
    solutions: Sequence[Any] | None = None
    group_gradient: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    step_pairs: int = 0


@dataclass(frozen=True)
class FusionPlan:
    """A fuser's answer for one step: the loss terms and its ``fusion/*`` metrics.

    Every fuser reports the same keys (NaN where a quantity does not apply), so that metric
    files of runs with different methods have the same columns.
    """

    terms: tuple[LossTerm, ...]
    w_real: float
    w_world_model: float
    n_effective: float
    rho2: float = float("nan")
    lam: float = float("nan")
    extra: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        return {
            "fusion/w_real": self.w_real,
            "fusion/w_world_model": self.w_world_model,
            "fusion/rho2": self.rho2,
            "fusion/lambda": self.lam,
            "fusion/n_effective": self.n_effective,
            **self.extra,
        }


@runtime_checkable
class Fuser(Protocol):
    """A fusion method: plans a step from what it fitted on earlier steps, then fits on it.

    ``plan`` must not depend on this step's anchors beyond what the method's estimator
    allows (rectified: not at all, so its correction stays zero-mean); ``fit`` adds them for
    later steps. ``state_dict`` / ``load_state_dict`` carry everything ``fit`` learned, so that a
    resumed run continues exactly.
    """

    def plan(self, step: FusionInputs) -> FusionPlan: ...

    def fit(self, step: FusionInputs) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def loss_normalizers(token_counts: np.ndarray, rows: np.ndarray, aggregation: LossAggregation) -> float:
    """:math:`Z_R`: tokens of ``rows`` (``token_mean``) or its rows with at least one token
    (``sequence_mean``), the divisor of a GRPO loss over ``rows``."""
    counts = np.asarray(token_counts, dtype=np.float64)[np.asarray(rows, dtype=bool)]
    if aggregation == "token_mean":
        return float(counts.sum())
    if aggregation == "sequence_mean":
        return float(np.sum(counts > 0))
    raise ValueError(f"unknown loss aggregation {aggregation!r}; use 'token_mean' or 'sequence_mean'")


def effective_advantages(
    terms: Sequence[LossTerm], token_counts: np.ndarray, aggregation: LossAggregation
) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\tilde A_i = \sum_k c_k (Z_{\text{all}}/Z_k)\mathbb 1[i\in R_k] A_{k,i}` and the row
    weights :math:`\tilde w_i = \sum_k c_k (Z_{\text{all}}/Z_k)\mathbb 1[i\in R_k]` (module
    docstring); a term over no tokens contributes nothing, as its GRPO loss is 0.

    :param token_counts: (N,) tokens (unmasked positions) of each row.
    :return: float64 (N,) effective advantages and (N,) row weights.
    """
    counts = np.asarray(token_counts, dtype=np.float64)
    everything = np.ones(counts.shape, dtype=bool)
    z_all = loss_normalizers(counts, everything, aggregation)
    adv, weight = np.zeros_like(counts), np.zeros_like(counts)
    for term in terms:
        rows = np.asarray(term.rows, dtype=bool) & (counts > 0)
        z = loss_normalizers(counts, rows, aggregation)
        if z <= 0 or term.coef == 0:
            continue
        scale = term.coef * z_all / z
        adv += np.where(rows, scale * np.asarray(term.advantages, dtype=np.float64), 0.0)
        weight += np.where(rows, scale, 0.0)
    return adv, weight


def effective_advantage_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    row_weights: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float,
    kl_coef: float = 0.0,
    ref_log_probs: torch.Tensor | None = None,
    aggregation: LossAggregation = "token_mean",
) -> torch.Tensor:
    r""":math:`L = \operatorname{agg}(\ell^{clip}(\tilde A)) + \beta\,\operatorname{agg}(\tilde w\, k^{KL})` over all rows.

    On-policy its gradient equals :func:`multi_term_loss`'s (module docstring). With
    :math:`\tilde w = 1` it is ``grpo_loss`` with :math:`\tilde A`, what a trainer that only
    accepts advantages computes (KL then uniform over rows).
    """
    loss = aggregate(clipped_surrogate(log_probs, old_log_probs, advantages, clip_eps), mask, aggregation)
    if kl_coef:
        if ref_log_probs is None:
            raise ValueError("kl_coef > 0 needs ref_log_probs; pass the reference policy's log-probs")
        weighted = kl_k3(log_probs, ref_log_probs) * row_weights.to(log_probs.dtype).unsqueeze(-1)
        loss = loss + kl_coef * aggregate(weighted, mask, aggregation)
    return loss


def multi_term_loss(
    terms: Sequence[LossTerm],
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    mask: torch.Tensor,
    **grpo_kwargs: Any,
) -> torch.Tensor:
    r""":math:`L = \sum_k c_k\,\text{grpo\_loss}(A_k;\ \text{mask}\cdot R_k)`: the exact fused loss at any ratio.

    :param grpo_kwargs: ``clip_eps``, ``kl_coef``, ``ref_log_probs``, ``aggregation`` of ``grpo_loss``.
    """
    device, dtype = log_probs.device, log_probs.dtype  # float32 policies: the float32 advantages GRPO always used
    loss: torch.Tensor | None = None
    for term in terms:
        rows = torch.as_tensor(np.asarray(term.rows, dtype=np.float32), device=device).unsqueeze(-1)
        adv = torch.as_tensor(np.asarray(term.advantages), dtype=dtype, device=device)
        part = term.coef * grpo_loss(log_probs, old_log_probs, adv, mask * rows, **grpo_kwargs)
        loss = part if loss is None else loss + part
    if loss is None:  # no term: a zero that keeps the graph
        return log_probs.sum() * 0.0
    return loss

r"""GRPO's maths as small pure functions (one test each in ``tests/test_grpo.py``).

Notation: ``N`` rollouts in groups of ``G`` (one group per task), ``T`` tokens (or actions)
per rollout, ``m_{i,t}`` the mask of existing tokens.

* Group-normalized advantage (Shao et al., 2024):
  :math:`A_i = (r_i - \bar r_g) / (\sigma_g + \epsilon)`, where :math:`\bar r_g` and
  :math:`\sigma_g` are the mean and population standard deviation of the finite rewards of
  rollout *i*'s group. A group with zero spread carries no preference: its advantages are 0.
* Clipped surrogate (PPO): with :math:`\rho_{i,t} = \exp(\log\pi_\theta - \log\pi_{old})`,
  :math:`\ell_{i,t} = -\min(\rho_{i,t} A_i, \operatorname{clip}(\rho_{i,t}, 1-\varepsilon, 1+\varepsilon) A_i)`.
* KL penalty to a reference policy, the non-negative "k3" estimator (Schulman, 2020):
  :math:`k_{i,t} = e^{\log\pi_{ref}-\log\pi_\theta} - (\log\pi_{ref}-\log\pi_\theta) - 1`.
* Entropy bonus (PPO's entropy term): with :math:`H_{i,t} = -\sum_a \pi_\theta(a \mid s_{i,t}) \log \pi_\theta(a \mid s_{i,t})`
  the exact entropy of the distribution token *t* of rollout *i* was drawn from,
  :math:`L_H = -\beta_H \operatorname{agg}(H)`; adding it to the loss keeps the policy from
  collapsing onto one answer when rewards carry little signal.
* Uninformative groups: a group whose advantages are all 0 (every rollout scored alike, e.g. all
  failed) adds nothing to the gradient but still counts in the loss's normalizer and can fill a
  minibatch; DAPO's dynamic sampling and SimpleVLA-RL drop such groups before the update.
* Aggregation of per-token terms into one loss:
  ``token_mean``: :math:`\sum_{i,t} m\ell / \sum_{i,t} m` (long answers weigh more, as in DAPO);
  ``sequence_mean``: :math:`\frac1N\sum_i \sum_t m\ell / \sum_t m` (the original GRPO).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from wmrl_core.config_choices import LossAggregation

__all__ = [
    "informative_rows",
    "minibatch_rows",
    "pooled_within_group_sd",
    "group_advantages",
    "clipped_surrogate",
    "kl_k3",
    "aggregate",
    "grpo_loss",
    "entropy_bonus",
    "rollout_entropy",
]


def pooled_within_group_sd(values: Sequence[float] | np.ndarray, group_ids: Sequence[int] | np.ndarray) -> float:
    r""":math:`\hat\sigma_W = \sqrt{\sum_g\sum_{i\in g}(v_i - \bar v_g)^2 / \sum_g (n_g - 1)}`, the pooled
    within-group standard deviation over groups with at least two finite values; NaN without any."""
    v, g = np.asarray(values, dtype=np.float64), np.asarray(group_ids)
    if v.shape != g.shape or v.ndim != 1:
        raise ValueError(f"values {v.shape} and group_ids {g.shape} must be 1-D of equal length")
    squares, dof = 0.0, 0
    for gid in np.unique(g):
        x = v[(g == gid) & np.isfinite(v)]
        if x.size >= 2:
            squares += float(np.sum((x - x.mean()) ** 2))
            dof += x.size - 1
    return math.sqrt(squares / dof) if dof else math.nan


def group_advantages(
    rewards: Sequence[float] | np.ndarray,
    group_ids: Sequence[int] | np.ndarray,
    *,
    scale: bool = True,
    eps: float = 1e-6,
) -> np.ndarray:
    """Advantages :math:`A_i = (r_i - \\bar r_g) / (\\sigma_g + \\epsilon)` per group.

    :param rewards: (N,) rewards; NaN marks "no reward" and gets advantage 0 (the rollout is
        not pushed either way) and is left out of its group's mean and spread.
    :param group_ids: (N,) group of each rollout.
    :param scale: divide by the group's standard deviation (``False``: mean-centering only,
        as in Dr. GRPO).
    :param eps: a group whose standard deviation is at most ``eps`` counts as tied and gets advantage 0,
        scaled or not: differences that small are float rounding (of a calibration, say), not a ranking.
    :return: (N,) float64 advantages; never NaN.
    """
    r = np.asarray(rewards, dtype=np.float64)
    g = np.asarray(group_ids)
    if r.shape != g.shape or r.ndim != 1:
        raise ValueError(f"rewards {r.shape} and group_ids {g.shape} must be 1-D of equal length")
    adv = np.zeros_like(r)
    for gid in np.unique(g):
        idx = np.flatnonzero((g == gid) & np.isfinite(r))
        if idx.size < 2:
            continue
        centered = r[idx] - r[idx].mean()
        std = r[idx].std()
        if std <= eps:
            continue  # no spread beyond rounding: no preference inside the group
        adv[idx] = centered / (std + eps) if scale else centered
    return adv


def clipped_surrogate(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    clip_eps: float,
) -> torch.Tensor:
    """Per-token PPO loss :math:`-\\min(\\rho A, \\operatorname{clip}(\\rho, 1\\pm\\varepsilon) A)`.

    :param log_probs: (N, T) log-probabilities under the current policy (differentiable).
    :param old_log_probs: (N, T) log-probabilities at sampling time.
    :param advantages: (N,) advantages, broadcast over tokens.
    :param clip_eps: clip range :math:`\\varepsilon` (> 0).
    :return: (N, T) per-token losses (not yet masked).
    """
    if not clip_eps > 0:  # written so that NaN fails too
        raise ValueError(f"clip_eps must be > 0, got {clip_eps}")
    ratio = torch.exp(log_probs - old_log_probs.detach())
    adv = advantages.to(log_probs.dtype).unsqueeze(-1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    return -torch.minimum(unclipped, clipped)


def kl_k3(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """Per-token KL estimate :math:`e^{d} - d - 1` with :math:`d = \\log\\pi_{ref} - \\log\\pi_\\theta` (>= 0)."""
    d = ref_log_probs.detach() - log_probs
    return torch.exp(d) - d - 1.0


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: LossAggregation = "token_mean") -> torch.Tensor:
    """Reduce (N, T) per-token terms to a scalar; rows with an empty mask count for nothing.

    ``token_mean`` = :math:`\\sum m\\ell / \\sum m`; ``sequence_mean`` = mean over rows of
    :math:`\\sum_t m\\ell / \\sum_t m`. An empty selection gives 0 (keeps the graph).
    """
    mask = mask.to(per_token.dtype)
    if mode == "token_mean":
        return (per_token * mask).sum() / mask.sum().clamp_min(1.0)
    if mode == "sequence_mean":
        lengths = mask.sum(dim=-1)
        rows = lengths > 0
        per_row = (per_token * mask).sum(dim=-1) / lengths.clamp_min(1.0)
        return per_row[rows].sum() / rows.sum().clamp_min(1)
    raise ValueError(f"unknown loss aggregation {mode!r}; use 'token_mean' or 'sequence_mean'")


def grpo_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    kl_coef: float = 0.0,
    ref_log_probs: torch.Tensor | None = None,
    aggregation: LossAggregation = "token_mean",
) -> torch.Tensor:
    """:math:`L = \\operatorname{agg}(\\ell^{clip} + \\beta\\, k^{KL})` over the rows selected by ``mask``."""
    per_token = clipped_surrogate(log_probs, old_log_probs, advantages, clip_eps)
    if kl_coef:
        if ref_log_probs is None:
            raise ValueError("kl_coef > 0 needs ref_log_probs; pass the reference policy's log-probs")
        per_token = per_token + kl_coef * kl_k3(log_probs, ref_log_probs)
    return aggregate(per_token, mask, aggregation)


def entropy_bonus(
    entropy: torch.Tensor,
    mask: torch.Tensor,
    coef: float,
    aggregation: LossAggregation = "token_mean",
) -> torch.Tensor:
    """Loss term :math:`L_H = -\\beta_H \\operatorname{agg}(H)` that rewards spread-out policies.

    :param entropy: (N, T) exact per-token entropies :math:`H_{i,t}` in nats (differentiable).
    :param mask: (N, T) mask of existing tokens.
    :param coef: :math:`\\beta_H \\ge 0`; 0 returns a zero that keeps the graph.
    :param aggregation: as in :func:`aggregate` (the policy loss's own, so ``coef`` weighs the
        entropy of one token against the surrogate of one token).
    :return: scalar, to be added to the policy loss (minimising it raises the entropy).
    """
    if not coef >= 0:  # written so that NaN fails too
        raise ValueError(f"entropy coefficient must be >= 0, got {coef}")
    return -coef * aggregate(entropy, mask, aggregation)


def informative_rows(advantages: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
    """(N,) bool: the rows of groups with at least one non-zero advantage (the module docstring's
    uninformative groups are the rest)."""
    advantages, group_ids = np.asarray(advantages, dtype=np.float64), np.asarray(group_ids)
    if advantages.shape != group_ids.shape:
        raise ValueError(f"advantages {advantages.shape} and group_ids {group_ids.shape} must have one entry per row")
    moving = np.unique(group_ids[np.abs(advantages) > 0])
    return np.isin(group_ids, moving)


def minibatch_rows(
    group_ids: np.ndarray, minibatches: int, seed: Sequence[int], keep: np.ndarray | None = None
) -> list[np.ndarray | None]:
    """Row selections of one epoch's minibatches: the step's groups shuffled and dealt into ``minibatches``
    shares of whole groups (sizes differ by at most one group), each a float (N,) mask of its rows.

    One minibatch is the whole batch (``[None]``, no shuffling: the update is what it was without
    minibatches). The shuffle is drawn from its own generator seeded by ``seed`` (e.g. run seed, step,
    epoch), so it draws nothing from the run's random streams and a resumed run deals the same minibatches.

    :param keep: (N,) bool, the rows that may be dealt (e.g. :func:`informative_rows`); the others are
        in no minibatch. When fewer groups are kept than ``minibatches``, each kept group is a minibatch
        of its own; when none is, there is no minibatch (``[]``).
    :raises ValueError: if ``minibatches`` is below 1 or above the number of groups.
    """
    group_ids = np.asarray(group_ids)
    groups = np.unique(group_ids)
    if not 1 <= minibatches <= max(len(groups), 1):
        raise ValueError(
            f"grpo.minibatches={minibatches} must be between 1 and the step's {len(groups)} groups; "
            "lower grpo.minibatches or raise rollout.batch_tasks"
        )
    if keep is not None and not np.asarray(keep, dtype=bool).all():
        groups = np.unique(group_ids[np.asarray(keep, dtype=bool)])
        if len(groups) == 0:
            return []
        minibatches = min(minibatches, len(groups))
    elif minibatches == 1:
        return [None]
    shuffled = np.random.default_rng(list(seed)).permutation(groups)
    return [np.isin(group_ids, share).astype(np.float32) for share in np.array_split(shuffled, minibatches)]


def rollout_entropy(entropy: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy of each rollout, :math:`H_i = \\sum_t m_{i,t} H_{i,t}` in nats.

    By the chain rule its expectation over rollouts is the entropy of the policy's whole
    answer (for the program policy: of the joint distribution over all decisions).

    :param entropy: (N, T) per-token entropies.
    :param mask: (N, T) mask of existing tokens.
    :return: (N,) per-rollout entropies.
    """
    return (entropy * mask.to(entropy.dtype)).sum(dim=-1)

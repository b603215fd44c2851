r"""The engine between rewards and loss, as one function: :func:`fuse_step`.

In: a step's raw world-model rewards, the anchors' real rewards, group ids, which groups are
anchors, each row's token count, and the carried state (the calibrator and the fuser). Out:
per-row effective advantages (and KL row weights), the plan's loss terms for the exact
multi-term loss, the new state and the step's metrics. WMRL's own trainer
(:func:`wmrl_core.step.update_step`) calls it; so can any trainer that takes advantages
(TRL's ``GRPOTrainer``, verl's advantage estimators): on-policy the GRPO loss with the effective
advantages has the fused loss's gradient (:mod:`wmrl_core.fusion.base`).

Order within a step: calibrate this step's world-model rewards with the map fitted on earlier
steps' anchor pairs, then add this step's pairs (no anchor both fits the map and is judged by
it); group advantages per stream (anchors: real rewards; the rest: calibrated ones); the fuser
plans the loss from what it fitted on earlier steps, then fits on this step's anchors.

The inputs are not mutated: the calibrator and fuser come back as new objects.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from wmrl_core.calibration import RewardCalibrator
from wmrl_core.config_choices import ADVANTAGE_SCALES
from wmrl_core.fusion.base import (
    Fuser,
    FusionInputs,
    LossTerm,
    effective_advantage_loss,
    effective_advantages,
    multi_term_loss,
)
from wmrl_core.fusion.gradients import GroupGradient
from wmrl_core.fusion.inverse_variance import cross_fitted_calibration
from wmrl_core.grpo import LossAggregation, group_advantages
from wmrl_core.metrics import nanmean

__all__ = [
    "ADVANTAGE_SCALES",
    "calibrated_advantages",
    "FusionSettings",
    "FusedStep",
    "fuse_step",
    "fused_loss",
    "tied_group_share",
    "within_group_error",
]


@dataclass(frozen=True)
class FusionSettings:
    """How :func:`fuse_step` treats a step.

    :param aggregation: the GRPO loss's aggregation (``token_mean`` or ``sequence_mean``).
    :param scale_advantages: divide advantages by the group's standard deviation.
    :param anchored: anchors and world-model rewards are mixed (``mode=wmrl``): the calibrator
        learns from the anchors and calibration metrics are reported.
    :param calibrate: apply the calibrator to the world-model rewards (``calibration.enabled``).
    :param advantage_scale: with ``scale_advantages``, what the calibrated stream's advantages are
        divided by: ``own`` (each group's own spread, as GRPO does) or ``real`` (the real rewards'
        pooled within-group spread on earlier anchors, :func:`calibrated_advantages`).
    """

    aggregation: LossAggregation = "token_mean"
    scale_advantages: bool = True
    anchored: bool = True
    calibrate: bool = True
    advantage_scale: str = "own"

    @classmethod
    def from_config(cls, cfg: Any) -> FusionSettings:
        """The settings of a :class:`~wmrl_core.config.TrainConfig`."""
        anchored = cfg.mode == "wmrl"
        return cls(
            aggregation=cfg.grpo.loss_aggregation,
            scale_advantages=cfg.grpo.scale_advantages,
            anchored=anchored,
            calibrate=anchored and cfg.calibration.enabled,
            advantage_scale=cfg.calibration.advantage_scale,
        )


@dataclass
class FusedStep:
    """What :func:`fuse_step` returns.

    :param advantages: (N,) effective advantages :math:`\tilde A`.
    :param row_weights: (N,) the KL weight of each row in the exact fused loss.
    :param terms: the plan's loss terms (:func:`~wmrl_core.fusion.base.multi_term_loss`).
    :param calibrator: the calibrator with this step's anchor pairs added.
    :param fuser: the fuser fitted on this step's anchors.
    :param record: the step's ``reward/*``, ``fusion/*``, ``calibration/*`` and ``anchors/groups``
        metrics.
    :param anchor_pairs: this step's anchor pairs (raw, calibrated, real) for
        ``anchor_pairs.jsonl`` when anchored with anchors, else ``None``.
    :param rewards: (N,) the reward each row trains on: real on anchor rows, calibrated
        world-model reward elsewhere, NaN where there is none; ``record["reward/train_mean"]``
        is its NaN-skipping mean.
    """

    advantages: np.ndarray
    row_weights: np.ndarray
    terms: tuple[LossTerm, ...]
    calibrator: RewardCalibrator
    fuser: Fuser
    record: dict[str, Any]
    anchor_pairs: dict[str, Any] | None
    rewards: np.ndarray | None = None


def tied_group_share(values: np.ndarray, group_ids: np.ndarray, rows: np.ndarray) -> float:
    """Share of the groups among ``rows`` (with >= 2 finite values) whose values are all equal:
    groups that calibration left without any GRPO advantage."""
    tied = total = 0
    for g in np.unique(group_ids[rows]):
        v = values[(group_ids == g) & rows]
        v = v[np.isfinite(v)]
        if v.size >= 2:
            total += 1
            tied += int(np.ptp(v) <= 1e-12)
    return tied / total if total else math.nan


def within_group_error(predicted: np.ndarray, real: np.ndarray, group_ids: np.ndarray) -> float:
    """RMS of (predicted - real) after removing each group's mean from both: how far the
    within-group differences GRPO sees are from the real ones (bias and noise together)."""
    errors = []
    for g in np.unique(group_ids):
        idx = np.flatnonzero((group_ids == g) & np.isfinite(predicted) & np.isfinite(real))
        if idx.size >= 2:
            errors.append((predicted[idx] - predicted[idx].mean()) - (real[idx] - real[idx].mean()))
    return float(np.sqrt(np.mean(np.concatenate(errors) ** 2))) if errors else math.nan


def calibrated_advantages(
    calibrated: np.ndarray, group_ids: np.ndarray, *, scale: bool, real_sd: float, advantage_scale: str = "own"
) -> np.ndarray:
    r"""The calibrated stream's group advantages: :math:`(c_i - \bar c_g)/\hat\sigma` with
    :math:`\hat\sigma` the group's own spread (``own``, GRPO's rule) or ``real_sd``, the real rewards'
    pooled within-group spread (``real``). Dividing by its own spread re-inflates a calibration
    that has learnt the world model is weak (a nearly flat map) to unit-size advantages; on the
    real scale a weak world model's advantages stay small. ``real`` falls back to ``own`` while
    ``real_sd`` is unknown (NaN or 0: no anchor group with spread yet)."""
    if advantage_scale not in ADVANTAGE_SCALES:
        raise ValueError(f"advantage_scale={advantage_scale!r} is unknown; use one of {', '.join(ADVANTAGE_SCALES)}")
    if not scale or advantage_scale == "own" or not (np.isfinite(real_sd) and real_sd > 0):
        return group_advantages(calibrated, group_ids, scale=scale)
    return group_advantages(calibrated, group_ids, scale=False) / real_sd


def _rewarded(rewards: np.ndarray, rows: np.ndarray) -> int:
    """Sample size of a stream: its rollouts that have a reward. A group whose rewards are all
    equal still counts: it is a (zero) gradient estimate, not a missing one, and counting it
    keeps the weights from jumping whenever one small anchor group happens to agree."""
    return int(np.sum(np.isfinite(rewards[rows])))


def _calibration_record(calibrator: RewardCalibrator) -> dict[str, Any]:
    residual_var = raw_residual_var = math.nan
    if calibrator.n_pairs_ >= 2:
        cross = cross_fitted_calibration(calibrator.x_, calibrator.y_, calibrator.groups_)
        residual_var = float(np.var(calibrator.y_ - cross))
        raw_residual_var = float(np.var(calibrator.y_ - calibrator.x_))
    return {
        "calibration/residual_var": residual_var,
        "calibration/raw_residual_var": raw_residual_var,
        "calibration/n_pairs": calibrator.n_pairs_,
    }


def _calibrate_then_learn(
    calibrator: RewardCalibrator,
    wm: np.ndarray,
    real: np.ndarray,
    group_ids: np.ndarray,
    anchor_idx: np.ndarray,
    n_groups: int,
    settings: FusionSettings,
    step: int,
) -> tuple[np.ndarray, float, dict[str, Any] | None, int]:
    """This step's calibrated rewards and the real rewards' within-group spread, both from earlier
    steps' anchors only; then ``calibrator`` learns this step's anchor pairs (updated in place).

    :return: ``(calibrated, real_sd, anchor_pairs, step_pairs)``: the pairs' log record (``None``
        without anchors) and how many of the calibrator's pairs are this step's.
    """
    calibrated = calibrator.transform(wm, group_ids) if settings.calibrate and calibrator.n_pairs_ else wm.copy()
    real_sd = calibrator.real_within_group_sd() if calibrator.n_pairs_ else math.nan
    if not (settings.anchored and anchor_idx.size):
        return calibrated, real_sd, None, 0
    group_keys = step * n_groups + group_ids  # unique across steps
    calibrator.update(wm[anchor_idx], real[anchor_idx], group_keys[anchor_idx])
    added = int(np.sum(np.isfinite(wm[anchor_idx]) & np.isfinite(real[anchor_idx])))
    anchor_pairs = {
        "step": step,
        "group": group_ids[anchor_idx].tolist(),
        "world_model": wm[anchor_idx].tolist(),
        "calibrated": calibrated[anchor_idx].tolist(),
        "real": real[anchor_idx].tolist(),
    }
    return calibrated, real_sd, anchor_pairs, min(added, calibrator.n_pairs_)  # the last pairs it holds


def _reward_and_calibration_record(
    wm: np.ndarray,
    real: np.ndarray,
    calibrated: np.ndarray,
    rewards: np.ndarray,
    group_ids: np.ndarray,
    is_anchor: np.ndarray,
    calibrator: RewardCalibrator,
    settings: FusionSettings,
) -> dict[str, Any]:
    """The step's reward means and what calibration did to the world model's within-group ranking."""
    anchored = settings.anchored
    return {
        "reward/real_mean": nanmean(real),
        "reward/world_model_mean": nanmean(wm),
        "reward/calibrated_mean": nanmean(calibrated) if anchored else math.nan,
        "reward/train_mean": nanmean(rewards),
        **_calibration_record(calibrator),
        "calibration/tied_group_share": tied_group_share(calibrated, group_ids, ~is_anchor) if anchored else math.nan,
        "calibration/within_group_error_raw": within_group_error(wm, real, group_ids),
        "calibration/within_group_error_calibrated": (
            within_group_error(calibrated, real, group_ids) if anchored else math.nan
        ),
    }


def fuse_step(
    *,
    world_model_rewards: np.ndarray,
    real_rewards: np.ndarray,
    group_ids: np.ndarray,
    anchor_groups: np.ndarray,
    token_counts: np.ndarray,
    calibrator: RewardCalibrator,
    fuser: Fuser,
    settings: FusionSettings,
    step: int,
    solutions: Sequence[Any] | None = None,
    group_gradient: GroupGradient | None = None,
) -> FusedStep:
    """Calibrate, group advantages per stream, fuse; see the module docstring.

    :param world_model_rewards: (N,) raw world-model rewards, NaN where there is none.
    :param real_rewards: (N,) real rewards of the anchor rows, NaN elsewhere.
    :param group_ids: (N,) ints in ``[0, B)``, the group of each row.
    :param anchor_groups: (B,) bool, the groups executed for real (chosen independently of
        their content, e.g. by :class:`~wmrl_core.anchors.AnchorSampler`).
    :param token_counts: (N,) tokens (unmasked positions) per row, for the loss normalizers.
    :param step: the step number; keys this step's groups apart from earlier ones in the calibrator.
    :param solutions: the rows' solutions, for fusers that merge equal ones (``None``: none merged).
    :param group_gradient: per-group policy gradients at the step's parameters, for fusers that
        weigh by gradients (:class:`~wmrl_core.fusion.gradients.PolicyGradients`; evaluated lazily).
    """
    wm = np.asarray(world_model_rewards, dtype=np.float64)
    real = np.asarray(real_rewards, dtype=np.float64)
    group_ids, anchor_groups = np.asarray(group_ids), np.asarray(anchor_groups, dtype=bool)
    if not (wm.shape == real.shape == group_ids.shape == np.shape(token_counts)) or wm.ndim != 1:
        raise ValueError(
            f"rewards, group ids and token counts must be 1-D of equal length, got {wm.shape}, {real.shape}, "
            f"{group_ids.shape}, {np.shape(token_counts)}"
        )
    calibrator, fuser = copy.deepcopy(calibrator), copy.deepcopy(fuser)
    is_anchor = anchor_groups[group_ids]
    anchor_idx = np.flatnonzero(is_anchor)

    calibrated, real_sd, anchor_pairs, step_pairs = _calibrate_then_learn(
        calibrator, wm, real, group_ids, anchor_idx, len(anchor_groups), settings, step
    )
    rewards = np.where(is_anchor, real, calibrated)
    calibrated_adv = calibrated_advantages(
        calibrated,
        group_ids,
        scale=settings.scale_advantages,
        real_sd=real_sd,
        advantage_scale=settings.advantage_scale if settings.anchored else "own",
    )
    real_adv = group_advantages(np.where(is_anchor, real, np.nan), group_ids, scale=settings.scale_advantages)
    inputs = FusionInputs(
        advantages=np.where(is_anchor, real_adv, calibrated_adv),
        calibrated_advantages=calibrated_adv,
        is_anchor=is_anchor,
        group_ids=group_ids,
        anchor_share=float(anchor_groups.mean()) if anchor_groups.size else 0.0,
        n_real=_rewarded(rewards, is_anchor),
        n_world_model=_rewarded(rewards, ~is_anchor),
        pairs=(calibrator.x_, calibrator.y_, calibrator.groups_),
        calibrated=settings.calibrate,
        solutions=solutions,
        group_gradient=group_gradient,
        step_pairs=step_pairs,
    )
    plan = fuser.plan(inputs)
    fuser.fit(inputs)
    advantages, row_weights = effective_advantages(plan.terms, np.asarray(token_counts), settings.aggregation)

    record = {
        **_reward_and_calibration_record(wm, real, calibrated, rewards, group_ids, is_anchor, calibrator, settings),
        **plan.metrics(),
        "fusion/n_real": inputs.n_real,
        "fusion/n_world_model": inputs.n_world_model,
        "calibration/real_within_group_sd": real_sd,
        "anchors/groups": int(anchor_groups.sum()),
    }
    return FusedStep(advantages, row_weights, plan.terms, calibrator, fuser, record, anchor_pairs, rewards)


def fused_loss(
    fused: FusedStep,
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    mask: torch.Tensor,
    *,
    on_policy: bool,
    **grpo_kwargs: Any,
) -> torch.Tensor:
    """The step's fused loss: one GRPO loss on the effective advantages when ``on_policy`` (the
    probability ratio is 1: one optimisation pass per batch), else the exact multi-term loss."""
    if not on_policy:
        return multi_term_loss(fused.terms, log_probs, old_log_probs, mask, **grpo_kwargs)
    device, dtype = log_probs.device, log_probs.dtype
    adv = torch.as_tensor(fused.advantages, dtype=dtype, device=device)
    weights = torch.as_tensor(fused.row_weights, dtype=dtype, device=device)
    return effective_advantage_loss(log_probs, old_log_probs, adv, weights, mask, **grpo_kwargs)

"""One step of the trainer as a unit: scored rollouts in, one optimizer step, a metrics record out.

:func:`update_step` is steps 5-9 of the loop in :mod:`wmrl_core.trainer`: calibrate the
world-model rewards with the map fitted on earlier steps' anchor pairs (then add this step's
pairs), group advantages per stream, the fusion weights (``rectified`` lambda or
inverse-variance), the fused GRPO loss, ``grpo.epochs`` optimizer steps and the metrics
record. It needs no environment and no world model, only the policy, so it is tested with a
hand-written policy of a few parameters (tests/test_step.py). :class:`TrainState` is
everything a run carries from one step to the next (and checkpoints).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from wmrl_core.anchors import AnchorSampler
from wmrl_core.config import TrainConfig
from wmrl_core.debias import IsotonicDebiaser
from wmrl_core.faults import StepFaults
from wmrl_core.fusion import InverseVarianceFuser, cross_fitted_calibration
from wmrl_core.grpo import LossAggregation, entropy_bonus, group_advantages, grpo_loss, rollout_entropy
from wmrl_core.ledger import ComputeLedger
from wmrl_core.metrics import nanmean
from wmrl_core.rectified import RectifiedFuser, rectified_loss, solution_keys
from wmrl_core.types import Rollouts

__all__ = ["TrainState", "ScoredStep", "StepUpdate", "update_step"]


@dataclass
class TrainState:
    """What a run carries from step to step; all of it is checkpointed (see ``trainer.train``).

    :param optimizer: Adam over the policy's trainable parameters.
    :param debiaser: the isotonic map from world-model to real rewards, fitted on anchor pairs.
    :param fuser: inverse-variance fusion weights (``denoise.method=inverse_variance``).
    :param rectified: the power-tuned lambda of rectified fusion (``denoise.method=rectified``).
    :param ledger: compute charged per stage, in seconds.
    :param anchor_sampler: which groups are executed for real (seeded per step, stateless).
    :param task_rng: draws the step's tasks.
    :param faults: counts the world-model and reward-extractor faults of a step (dropped, never 0)
        and bounds a world model's call by ``world_model_timeout_s``.
    :param reference: frozen copy of the initial policy for the KL term, when the policy has no
        ``reference_log_probs`` of its own; else ``None``.
    """

    optimizer: torch.optim.Optimizer
    debiaser: IsotonicDebiaser
    fuser: InverseVarianceFuser
    rectified: RectifiedFuser
    ledger: ComputeLedger
    anchor_sampler: AnchorSampler
    task_rng: np.random.Generator
    faults: StepFaults
    reference: Any = None

    @classmethod
    def create(cls, cfg: TrainConfig, policy: Any) -> TrainState:
        """The state of a fresh run of ``cfg`` training ``policy``."""
        optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=cfg.grpo.lr)
        reference = None
        if cfg.grpo.kl_coef and not callable(getattr(policy, "reference_log_probs", None)):
            reference = copy.deepcopy(policy).requires_grad_(False)
        fraction = {"real": 1.0, "world_model": 0.0, "wmrl": cfg.anchors.fraction}[cfg.mode]
        anchor_sampler = AnchorSampler(
            fraction=fraction, min_groups=0 if cfg.mode == "world_model" else cfg.anchors.min_groups, seed=cfg.seed
        )
        debiaser = IsotonicDebiaser(window=cfg.debias.window, calibrator=cfg.debias.calibrator, slope=cfg.debias.slope)
        fuser = InverseVarianceFuser(min_pairs=cfg.denoise.min_pairs)
        rectified = RectifiedFuser(window=cfg.denoise.lambda_window)
        ledger = ComputeLedger()
        task_rng = np.random.default_rng([cfg.seed, 0x7A5])
        faults = StepFaults(world_model_timeout_s=cfg.world_model_timeout_s)
        return cls(
            optimizer=optimizer,
            debiaser=debiaser,
            fuser=fuser,
            rectified=rectified,
            ledger=ledger,
            anchor_sampler=anchor_sampler,
            task_rng=task_rng,
            faults=faults,
            reference=reference,
        )


@dataclass
class ScoredStep:
    """One step's rollouts with their rewards (steps 1-4 of the loop).

    :param rollouts: the B * G rollouts.
    :param anchor_groups: bool (B,), the groups executed for real.
    :param wm_rewards: (N,) world-model rewards, NaN where there is none (no world model).
    :param real_rewards: (N,) real rewards of the anchor rollouts, NaN elsewhere.
    """

    rollouts: Rollouts
    anchor_groups: np.ndarray
    wm_rewards: np.ndarray
    real_rewards: np.ndarray

    @property
    def group_ids(self) -> np.ndarray:
        return np.asarray(self.rollouts.group_ids)

    @property
    def is_anchor(self) -> np.ndarray:
        return self.anchor_groups[self.group_ids]


@dataclass
class StepUpdate:
    """What :func:`update_step` returns.

    :param record: the step's metrics (``loss``, ``fusion/*``, ``reward/*``, ledger totals ...).
    :param anchor_pairs: this step's anchor pairs for ``anchor_pairs.jsonl`` (``wmrl`` mode with
        anchors), else ``None``.
    """

    record: dict[str, Any]
    anchor_pairs: dict[str, Any] | None


def _tied_group_share(values: np.ndarray, group_ids: np.ndarray, rows: np.ndarray) -> float:
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


def _within_group_error(predicted: np.ndarray, real: np.ndarray, group_ids: np.ndarray) -> float:
    """RMS of (predicted - real) after removing each group's mean from both: how far the
    within-group differences GRPO sees are from the real ones (bias and noise together)."""
    errors = []
    for g in np.unique(group_ids):
        idx = np.flatnonzero((group_ids == g) & np.isfinite(predicted) & np.isfinite(real))
        if idx.size >= 2:
            errors.append((predicted[idx] - predicted[idx].mean()) - (real[idx] - real[idx].mean()))
    return float(np.sqrt(np.mean(np.concatenate(errors) ** 2))) if errors else math.nan


def _rollouts_with_reward(rewards: np.ndarray, rows: np.ndarray) -> int:
    """Sample size of a stream: its rollouts that have a reward. A group whose rewards are all
    equal still counts: it is a (zero) gradient estimate, not a missing one, and counting it
    keeps the weights from jumping whenever one small anchor group happens to agree."""
    return int(np.sum(np.isfinite(rewards[rows])))


def update_step(policy: Any, cfg: TrainConfig, state: TrainState, scored: ScoredStep, step: int) -> StepUpdate:
    """Calibrate, fuse, take ``cfg.grpo.epochs`` optimizer steps on ``policy``; return the record.

    The fused loss is, for ``denoise.method=rectified`` in ``wmrl`` mode,
    ``L(anchors; real) + lambda [L(all; calibrated) - L(anchors; calibrated)]`` with lambda from
    earlier steps' anchors; otherwise ``w_real L(anchors; real) + w_wm L(rest; calibrated)`` with
    inverse-variance weights (``wmrl``) or the streams' shares of rollouts with a reward.
    Mutates ``state`` (debiaser, fusion windows, optimizer) and the policy's parameters.
    """
    rollouts, anchor_groups = scored.rollouts, scored.anchor_groups
    wm_rewards, real_rewards = scored.wm_rewards, scored.real_rewards
    group_ids, is_anchor = scored.group_ids, scored.is_anchor
    anchor_idx = np.flatnonzero(is_anchor)
    B = len(anchor_groups)
    debiaser, fuser, rectified = state.debiaser, state.fuser, state.rectified
    use_rectified = cfg.mode == "wmrl" and cfg.denoise.enabled and cfg.denoise.method == "rectified"
    aggregation = cast(LossAggregation, cfg.grpo.loss_aggregation)  # validated by TrainConfig

    # 5. online debiasing: calibrate with the map fitted on earlier steps' anchor pairs (so
    # this step's anchors are never used both to fit the map and to judge it), then add them
    group_keys = step * B + group_ids  # unique across steps
    calibrated = wm_rewards.copy()
    if cfg.mode == "wmrl" and cfg.debias.enabled and debiaser.n_pairs_:
        calibrated = debiaser.transform(wm_rewards)
    anchor_pairs = None
    if cfg.mode == "wmrl" and anchor_idx.size:
        debiaser.update(wm_rewards[anchor_idx], real_rewards[anchor_idx], group_keys[anchor_idx])
        anchor_pairs = {
            "step": step,
            "world_model": wm_rewards[anchor_idx].tolist(),
            "calibrated": calibrated[anchor_idx].tolist(),
            "real": real_rewards[anchor_idx].tolist(),
        }

    # 6. rewards per stream: anchors carry real rewards, the rest world-model rewards
    rewards = np.where(is_anchor, real_rewards, calibrated)
    advantages = group_advantages(rewards, group_ids, scale=cfg.grpo.scale_advantages)
    n_real = _rollouts_with_reward(rewards, is_anchor)
    n_wm = _rollouts_with_reward(rewards, ~is_anchor)

    # 7. fusion weights
    rho2 = lam = math.nan
    n_effective = float(n_real)
    if use_rectified:  # lambda from earlier steps' anchors, then this step's join the window
        lam = rectified.lam()
        cal_advantages = group_advantages(calibrated, group_ids, scale=cfg.grpo.scale_advantages)
        n_effective = rectified.effective_samples(n_real, anchor_share=float(anchor_groups.mean()))
        keys = (
            solution_keys(group_ids[anchor_idx], [rollouts.solutions[i] for i in anchor_idx])
            if cfg.denoise.lambda_moments == "solution"
            else None
        )
        rectified.update(advantages[anchor_idx], cal_advantages[anchor_idx], keys, group_ids[anchor_idx])
        w_real, w_wm = 1.0, lam
    elif cfg.mode == "wmrl" and cfg.denoise.enabled:
        rho2 = fuser.estimate_rho2(debiaser.x_, debiaser.y_, debiaser.groups_, calibrate=cfg.debias.enabled)
        weights = fuser.weights(n_real, n_wm, rho2)
        w_real, w_wm = weights.w_real, weights.w_world_model
        n_effective = n_real + (0.0 if math.isnan(rho2) else rho2) * n_wm
    else:  # pool the streams by their share of informative rollouts
        total = max(n_real + n_wm, 1)
        w_real, w_wm = (
            (n_real / total, n_wm / total) if n_real + n_wm else (float(is_anchor.any()), float(not is_anchor.any()))
        )

    # 8. GRPO update on the fused loss
    device = rollouts.old_log_probs.device  # the policy's device (GPU for LLM policies)
    adv_t = torch.as_tensor(advantages, dtype=torch.float32, device=device)
    real_rows = torch.as_tensor(is_anchor, dtype=torch.float32, device=device).unsqueeze(-1)
    if use_rectified:
        cal_adv_t = torch.as_tensor(cal_advantages, dtype=torch.float32, device=device)
    mask = rollouts.mask.to(device)
    ref_lp = None
    if cfg.grpo.kl_coef:
        with torch.no_grad():
            ref_lp = (
                policy.reference_log_probs(rollouts) if state.reference is None else state.reference.log_probs(rollouts)
            )
    entropy_mean = math.nan  # of the policy that sampled this step's rollouts
    if callable(getattr(policy, "entropy", None)):
        with torch.no_grad():
            entropy_mean = float(rollout_entropy(policy.entropy(rollouts), mask).mean())
    for _ in range(cfg.grpo.epochs):
        log_probs = policy.log_probs(rollouts)
        kwargs: dict[str, Any] = dict(
            clip_eps=cfg.grpo.clip_eps, kl_coef=cfg.grpo.kl_coef, ref_log_probs=ref_lp, aggregation=aggregation
        )
        if use_rectified:  # L(anchors; real) + lambda [L(all; calibrated) - L(anchors; calibrated)]
            real_term = grpo_loss(log_probs, rollouts.old_log_probs, adv_t, mask * real_rows, **kwargs)
            loss = (
                real_term
                if lam == 0
                else rectified_loss(
                    real_term,
                    grpo_loss(log_probs, rollouts.old_log_probs, cal_adv_t, mask, **kwargs),
                    grpo_loss(log_probs, rollouts.old_log_probs, cal_adv_t, mask * real_rows, **kwargs),
                    lam,
                )
            )
        else:
            loss = w_real * grpo_loss(
                log_probs, rollouts.old_log_probs, adv_t, mask * real_rows, **kwargs
            ) + w_wm * grpo_loss(log_probs, rollouts.old_log_probs, adv_t, mask * (1 - real_rows), **kwargs)
        if cfg.grpo.entropy_coef:
            loss = loss + entropy_bonus(policy.entropy(rollouts), mask, cfg.grpo.entropy_coef, aggregation)
        state.optimizer.zero_grad()
        loss.backward()
        grad_norm = (
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.grpo.max_grad_norm)
            if cfg.grpo.max_grad_norm
            else torch.tensor(math.nan)
        )
        state.optimizer.step()
    if callable(getattr(policy, "after_update", None)):
        policy.after_update()

    # 9. metrics
    residual_var = raw_residual_var = math.nan
    if debiaser.n_pairs_ >= 2:
        cross = cross_fitted_calibration(debiaser.x_, debiaser.y_, debiaser.groups_)
        residual_var = float(np.var(debiaser.y_ - cross))
        raw_residual_var = float(np.var(debiaser.y_ - debiaser.x_))
    record = {
        "step": step,
        "reward/real_mean": nanmean(real_rewards),
        "reward/world_model_mean": nanmean(wm_rewards),
        "reward/calibrated_mean": nanmean(calibrated) if cfg.mode == "wmrl" else math.nan,
        "reward/train_mean": nanmean(rewards),
        "debias/residual_var": residual_var,
        "debias/raw_residual_var": raw_residual_var,
        "debias/n_pairs": debiaser.n_pairs_,
        "fusion/w_real": w_real,
        "fusion/w_world_model": w_wm,
        "fusion/rho2": rho2,
        "fusion/n_real": n_real,
        "fusion/n_world_model": n_wm,
        "fusion/lambda": lam,
        "fusion/n_effective": n_effective,
        "calibration/tied_group_share": (
            _tied_group_share(calibrated, group_ids, ~is_anchor) if cfg.mode == "wmrl" else math.nan
        ),
        "calibration/within_group_error_raw": _within_group_error(wm_rewards, real_rewards, group_ids),
        "calibration/within_group_error_calibrated": (
            _within_group_error(calibrated, real_rewards, group_ids) if cfg.mode == "wmrl" else math.nan
        ),
        "anchors/groups": int(anchor_groups.sum()),
        "loss": float(loss.detach()),
        "grad_norm": float(grad_norm),
        "policy/entropy": entropy_mean,
        **state.ledger.metrics(),
    }
    return StepUpdate(record=record, anchor_pairs=anchor_pairs)

"""One step of the trainer as a unit: scored rollouts in, one optimizer step, a metrics record out.

:func:`update_step` is steps 6-8 of the loop (numbered in :mod:`wmrl_core.trainer`): the engine
(:func:`wmrl_core.fusion.fuse_step`: calibration, advantages per stream, the fuser's plan and
its effective advantages), the fused GRPO loss, ``grpo.epochs`` × ``grpo.minibatches`` optimizer steps and the metrics
record. It needs no environment and no world model, only the policy, so it is tested with a
hand-written policy of a few parameters (tests/test_step.py). :class:`TrainState` is
everything a run carries from one step to the next (and checkpoints).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from wmrl_core.anchors import AnchorSampler
from wmrl_core.calibration import RewardCalibrator
from wmrl_core.checkpoint import CheckpointError, current_keys, rng_state, set_rng_state
from wmrl_core.config import TrainConfig
from wmrl_core.contracts import (
    HasEntropy,
    HasOptimizerParamGroups,
    HasReferenceLogProbs,
    ReportsUpdateMetrics,
    Stateful,
    SyncsAfterUpdate,
)
from wmrl_core.errors import ComponentError
from wmrl_core.faults import StepFaults
from wmrl_core.fusion import Fuser, FusionSettings, PolicyGradients, build_fuser, fuse_step, fused_loss
from wmrl_core.fusion.value import value_record
from wmrl_core.grpo import entropy_bonus, informative_rows, minibatch_rows, rollout_entropy
from wmrl_core.ledger import ComputeLedger
from wmrl_core.registry import FuserTable
from wmrl_core.types import Rollouts

__all__ = [
    "TrainState",
    "ScoredStep",
    "StepUpdate",
    "update_step",
    "fusion_method",
    "ratio_diagnostics",
    "anchor_group_record",
]


def optimizer_param_groups(policy: Any, lr: float) -> list[dict[str, Any]]:
    """Adam's parameter groups: the policy's own ``optimizer_param_groups(lr)`` (e.g. a separate rate
    for an exploration parameter), else one group of every trainable parameter at ``lr``. A policy's
    groups must cover each trainable parameter exactly once."""
    trainable = [p for p in policy.parameters() if p.requires_grad]
    if not isinstance(policy, HasOptimizerParamGroups):
        return [{"params": trainable, "lr": lr}]
    groups = list(policy.optimizer_param_groups(lr))
    listed = [id(p) for group in groups for p in group["params"]]
    ids = {id(p) for p in trainable}
    if len(listed) != len(set(listed)) or set(listed) != ids:
        raise ComponentError(
            f"{type(policy).__name__}.optimizer_param_groups() must list each trainable parameter exactly once "
            f"({len(listed)} listed, {len(set(listed))} distinct, {len(trainable)} trainable)"
        )
    return groups


def fusion_method(cfg: TrainConfig) -> str:
    """The fusion a run trains with: ``fusion.method`` in ``wmrl`` mode; the pooled streams when
    fusion is switched off or one stream is all there is (``real``, ``world_model``)."""
    return cfg.fusion.method if cfg.mode == "wmrl" and cfg.fusion.enabled else "pooled"


@dataclass
class TrainState:
    """What a run carries from step to step; :meth:`state_dict` is its checkpoint.

    :param optimizer: Adam over the policy's trainable parameters.
    :param calibrator: the monotone map from world-model to real rewards, fitted on anchor pairs.
    :param fuser: the fusion method's state (:func:`fusion_method`; ``wmrl_core/fusion/``).
    :param ledger: compute charged per stage, in seconds.
    :param anchor_sampler: which groups are executed for real (seeded per step, stateless).
    :param task_rng: draws the step's tasks.
    :param faults: counts the world-model and reward-extractor faults of a step (dropped, never 0)
        and bounds a world model's call by ``world_model_timeout_s``.
    :param reference: frozen copy of the initial policy for the KL term, when the policy has no
        ``reference_log_probs`` of its own; else ``None``.
    :param policy: the policy being trained (its parameters are part of the checkpoint).
    :param environment: the run's environment; checkpointed when it has ``state_dict`` and
        ``load_state_dict`` (e.g. a curriculum), else ``None``.
    :param world_model: the run's world model, checkpointed likewise (one that learns from anchors).
    """

    optimizer: torch.optim.Optimizer
    calibrator: RewardCalibrator
    fuser: Fuser
    ledger: ComputeLedger
    anchor_sampler: AnchorSampler
    task_rng: np.random.Generator
    faults: StepFaults
    reference: Any = None
    policy: Any = None
    environment: Any = None
    world_model: Any = None

    REQUIRED_KEYS = ("policy", "optimizer", "calibrator", "ledger", "task_rng", "rng")
    """Entries every checkpoint of ``wmrl train`` has (under an earlier name in older ones:
    :data:`~wmrl_core.checkpoint.LEGACY_KEYS`); ``fuser``, ``environment``, ``world_model`` and
    ``reference`` are ``None`` or absent where there is nothing."""

    @classmethod
    def create(
        cls,
        cfg: TrainConfig,
        policy: Any,
        *,
        environment: Any = None,
        world_model: Any = None,
        fusers: FuserTable | None = None,
    ) -> TrainState:
        """The state of a fresh run of ``cfg`` training ``policy`` (on ``environment`` with ``world_model``);
        its fuser is made from ``fusers`` (the run's registry's; default: the installed plugins')."""
        optimizer = torch.optim.Adam(optimizer_param_groups(policy, cfg.grpo.lr), lr=cfg.grpo.lr)
        reference = None
        if cfg.grpo.kl_coef and not isinstance(policy, HasReferenceLogProbs):
            reference = copy.deepcopy(policy).requires_grad_(False)
        fraction = {"real": 1.0, "world_model": 0.0, "wmrl": cfg.anchors.fraction}[cfg.mode]
        anchor_sampler = AnchorSampler(
            fraction=fraction, min_groups=0 if cfg.mode == "world_model" else cfg.anchors.min_groups, seed=cfg.seed
        )
        fuser = build_fuser(fusion_method(cfg), cfg.fusion, fusers)
        validation = getattr(world_model, "validation", None) if cfg.mode == "wmrl" else None
        set_prior = getattr(fuser, "set_validation_prior", None)  # the fusers that gate on evidence
        if validation is not None and callable(set_prior):
            set_prior(validation)
        return cls(
            optimizer=optimizer,
            calibrator=RewardCalibrator.from_config(cfg.calibration),
            fuser=fuser,
            ledger=ComputeLedger(),
            anchor_sampler=anchor_sampler,
            task_rng=np.random.default_rng([cfg.seed, 0x7A5]),
            faults=StepFaults(world_model_timeout_s=cfg.world_model_timeout_s, heartbeat_s=cfg.heartbeat_s),
            reference=reference,
            policy=policy,
            environment=environment,
            world_model=world_model,
        )

    def state_dict(self) -> dict[str, Any]:
        """Everything an exact continuation needs: the policy, optimizer, calibrator, fuser, ledger
        and KL reference, the task draws' generator, the global torch/numpy/python RNGs, and the
        environment's and world model's own state where they have one (else ``None``)."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "calibrator": self.calibrator.state_dict(),
            "fuser": self.fuser.state_dict(),
            "ledger": self.ledger.state_dict(),
            "task_rng": self.task_rng.bit_generator.state,
            "rng": rng_state(),
            "environment": self.environment.state_dict() if _stateful(self.environment) else None,
            "world_model": self.world_model.state_dict() if _stateful(self.world_model) else None,
            "reference": self.reference.state_dict() if self.reference is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (a :meth:`state_dict`, e.g. a loaded checkpoint); sets the
        global RNGs last, so that nothing loaded before draws from them.

        :raises CheckpointError: when ``state`` lacks an entry of :data:`REQUIRED_KEYS`.
        """
        state = current_keys(state)
        missing = [key for key in self.REQUIRED_KEYS if key not in state]
        if missing:
            raise CheckpointError(
                f"the checkpoint (step {state.get('step', '?')}) lacks {', '.join(missing)}: it was not written by "
                f"`wmrl train`. Start the run fresh (resume=false) or point run_dir at a run of `wmrl train`"
            )
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.calibrator.load_state_dict(state["calibrator"])
        if state.get("fuser") is not None:
            self.fuser.load_state_dict(state["fuser"])
        self.ledger.load_state_dict(state["ledger"])
        self.task_rng.bit_generator.state = state["task_rng"]
        for name in ("environment", "world_model"):
            if state.get(name) is not None and _stateful(getattr(self, name)):
                getattr(self, name).load_state_dict(state[name])
        if self.reference is not None:
            self.reference.load_state_dict(state["reference"])
        set_rng_state(state["rng"])


def _stateful(obj: Any) -> bool:
    return isinstance(obj, Stateful)


@dataclass
class ScoredStep:
    """One step's rollouts with their rewards (steps 1-5 of the loop).

    :param rollouts: the B * G rollouts.
    :param anchor_groups: bool (B,), the groups executed for real.
    :param wm_rewards: (N,) world-model rewards, NaN where there is none (no world model).
    :param real_rewards: (N,) real rewards of the anchor rollouts, NaN elsewhere.
    :param anchor_statuses: how many of the anchor rollouts' outcomes had each status.
    """

    rollouts: Rollouts
    anchor_groups: np.ndarray
    wm_rewards: np.ndarray
    real_rewards: np.ndarray
    anchor_statuses: dict[str, int] = field(default_factory=dict)

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


def _reference_log_probs_and_entropy(
    policy: Any, cfg: TrainConfig, state: TrainState, rollouts: Rollouts, mask: torch.Tensor
) -> tuple[torch.Tensor | None, float]:
    """The KL reference's log-probs (``None`` without a KL term) and the mean rollout entropy
    of the policy that sampled the step (NaN for a policy without ``entropy``), both without grad."""
    ref_lp, entropy_mean = None, math.nan
    with torch.no_grad():
        if cfg.grpo.kl_coef:
            ref = state.reference
            ref_lp = policy.reference_log_probs(rollouts) if ref is None else ref.log_probs(rollouts)
        if isinstance(policy, HasEntropy):
            entropy_mean = float(rollout_entropy(policy.entropy(rollouts), mask).mean())
    return ref_lp, entropy_mean


def _refuse_non_finite_log_probs(log_probs: torch.Tensor, mask: torch.Tensor, step: int) -> None:
    """A policy whose ``log_probs`` turns NaN or infinite after its first (checked) call stops the run
    before the update, which would otherwise turn every parameter into NaN."""
    sampled = mask > 0
    bad = sampled & ~torch.isfinite(log_probs.detach())
    if bad.any():
        raise ComponentError(
            f"policy: log_probs() returned NaN or inf at {int(bad.sum())} of {int(sampled.sum())} sampled tokens at "
            f"step {step}; no optimizer step was taken on it (the last checkpoint is untouched). Look for NaN "
            f"parameters, a log of 0 or a softmax over -inf in log_probs()"
        )


def _epoch_loss(
    policy: Any,
    cfg: TrainConfig,
    fused: Any,
    rollouts: Rollouts,
    mask: torch.Tensor,
    on_policy: bool,
    kwargs: dict[str, Any],
    step: int,
) -> torch.Tensor:
    """One epoch's loss: the fused GRPO loss plus the entropy bonus; refused before ``backward`` when
    the policy's log-probs or the loss are not finite (a NaN step spreads into every parameter)."""
    log_probs = policy.log_probs(rollouts)
    _refuse_non_finite_log_probs(log_probs, mask, step)
    loss = fused_loss(fused, log_probs, rollouts.old_log_probs, mask, on_policy=on_policy, **kwargs)
    if cfg.grpo.entropy_coef:
        loss = loss + entropy_bonus(policy.entropy(rollouts), mask, cfg.grpo.entropy_coef, kwargs["aggregation"])
    if not torch.isfinite(loss.detach()):
        raise ComponentError(
            f"the loss of step {step} is {float(loss.detach())} although log_probs() is finite: look at the "
            f"policy's entropy() (grpo.entropy_coef={cfg.grpo.entropy_coef}) and old_log_probs; no optimizer step "
            f"was taken on it (the last checkpoint is untouched)"
        )
    return loss


def ratio_diagnostics(
    new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, mask: torch.Tensor, clip_eps: float
) -> dict[str, float]:
    """How far an update moved the policy on the step's own tokens. With ``r = exp(new - old)``, the
    ratio of the updated policy to the one that sampled the token, over the sampled tokens (mask 1):
    ``policy/approx_kl`` = mean of ``(r - 1) - log r`` (an unbiased estimate of KL(old || new) in nats
    per token, >= 0) and ``policy/clip_fraction`` = the share with ``|r - 1| > clip_eps`` (outside the
    clip range). NaN where no token was sampled."""
    log_r = (new_log_probs.detach().double() - old_log_probs.detach().double().to(new_log_probs.device))[
        mask.to(new_log_probs.device) > 0
    ]
    if not log_r.numel():
        return {"policy/approx_kl": math.nan, "policy/clip_fraction": math.nan}
    r = log_r.exp()
    return {
        "policy/approx_kl": float(((r - 1) - log_r).mean()),
        "policy/clip_fraction": float(((r - 1).abs() > clip_eps).double().mean()),
    }


def anchor_group_record(real_rewards: np.ndarray, group_ids: np.ndarray, anchor_groups: np.ndarray) -> dict[str, Any]:
    """The anchor groups' real rewards (the executed groups whose real rewards the update uses):
    ``rollout/real_reward_sum_per_group``, one sum of finite rewards per anchor group in group order
    (its number of successes for a 0/1 success reward), and ``rollout/all_equal_group_share``, the
    share of anchor groups whose finite real rewards are all equal (or fewer than two): their real
    advantages are all 0. ``[]`` and NaN without anchor groups."""
    sums, equal = [], 0
    for g in np.flatnonzero(anchor_groups):
        r = real_rewards[group_ids == g]
        r = r[np.isfinite(r)]
        sums.append(float(r.sum()))
        equal += int(r.size < 2 or r.max() == r.min())
    share = equal / len(sums) if sums else math.nan
    return {"rollout/real_reward_sum_per_group": sums, "rollout/all_equal_group_share": share}


def _update_diagnostics(policy: Any, cfg: TrainConfig, scored: ScoredStep, mask: torch.Tensor) -> dict[str, Any]:
    """After the update: :func:`anchor_group_record`, and unless ``logging.update_diagnostics`` is off,
    :func:`ratio_diagnostics` from one more ``log_probs`` call (no grad; the RNG forked, so the run's
    draws are the same as without it) and the policy's optional
    ``update_metrics(rollouts, old_log_probs, new_log_probs)`` as ``policy/<name>``."""
    rollouts = scored.rollouts
    old = rollouts.old_log_probs
    groups = anchor_group_record(scored.real_rewards, scored.group_ids, scored.anchor_groups)
    if not cfg.logging.update_diagnostics:
        return groups
    with torch.no_grad(), torch.random.fork_rng(devices=[old.device] if old.device.type == "cuda" else []):
        new = policy.log_probs(rollouts)
        own = policy.update_metrics(rollouts, old, new) if isinstance(policy, ReportsUpdateMetrics) else {}
    return {
        **ratio_diagnostics(new, old, mask, cfg.grpo.clip_eps),
        **{f"policy/{name}": float(value) for name, value in own.items()},
        **groups,
    }


def _share_of_groups(rows: np.ndarray, scored: ScoredStep) -> float:
    """The share of the step's groups whose rows ``rows`` selects."""
    groups = np.asarray(scored.group_ids)
    return float(len(np.unique(groups[rows])) / max(len(np.unique(groups)), 1))


def _optimize(
    policy: Any,
    cfg: TrainConfig,
    state: TrainState,
    fused: Any,
    scored: ScoredStep,
    mask: torch.Tensor,
    kwargs: dict[str, Any],
    step: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``grpo.epochs`` passes of ``grpo.minibatches`` optimizer steps each (:func:`~wmrl_core.grpo.minibatch_rows`)
    over the groups ``grpo.drop_uninformative_groups`` keeps; returns the last step's loss and pre-clip
    gradient norm (NaN without clipping, or without an optimizer step)."""
    loss, grad_norm = torch.tensor(math.nan), torch.tensor(math.nan)
    keep = informative_rows(fused.advantages, scored.group_ids) if cfg.grpo.drop_uninformative_groups else None
    for epoch in range(cfg.grpo.epochs):
        for rows in minibatch_rows(scored.group_ids, cfg.grpo.minibatches, seed=(cfg.seed, step, epoch), keep=keep):
            # the effective-advantage loss equals the exact one on the whole batch at ratio 1 only
            on_policy = cfg.fusion.loss == "effective" and epoch == 0 and rows is None
            selected = mask if rows is None else mask * torch.as_tensor(rows, device=mask.device).unsqueeze(-1)
            loss = _epoch_loss(policy, cfg, fused, scored.rollouts, selected, on_policy, kwargs, step)
            state.optimizer.zero_grad()
            loss.backward()
            grad_norm = (
                torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.grpo.max_grad_norm)
                if cfg.grpo.max_grad_norm
                else torch.tensor(math.nan)
            )
            state.optimizer.step()
    return loss, grad_norm


def update_step(policy: Any, cfg: TrainConfig, state: TrainState, scored: ScoredStep, step: int) -> StepUpdate:
    """Fuse (:func:`~wmrl_core.fusion.fuse_step`), take ``grpo.epochs`` × ``grpo.minibatches`` optimizer steps.

    The loss is the plan's exact multi-term sum (``wmrl_core/fusion/base.py``), or with ``fusion.loss=effective``
    on the first, on-policy pass one GRPO loss on the effective advantages (the same gradient); then the
    diagnostics of the update (:func:`_update_diagnostics`). Replaces
    ``state.calibrator`` and ``state.fuser`` by their updated copies; mutates the optimizer and the policy.
    """
    rollouts = scored.rollouts
    device = rollouts.old_log_probs.device  # the policy's device (GPU for LLM policies)
    mask = rollouts.mask.to(device)
    fused = fuse_step(
        world_model_rewards=scored.wm_rewards,
        real_rewards=scored.real_rewards,
        group_ids=scored.group_ids,
        anchor_groups=scored.anchor_groups,
        token_counts=mask.sum(dim=-1).cpu().numpy(),
        calibrator=state.calibrator,
        fuser=state.fuser,
        settings=FusionSettings.from_config(cfg),
        step=step,
        solutions=rollouts.solutions,
        group_gradient=PolicyGradients(
            policy, rollouts, mask, cfg.grpo.loss_aggregation, sketch_dim=cfg.fusion.gradient_sketch_dim, seed=cfg.seed
        ),
    )
    state.calibrator, state.fuser = fused.calibrator, fused.fuser
    ref_lp, entropy_mean = _reference_log_probs_and_entropy(policy, cfg, state, rollouts, mask)
    kwargs: dict[str, Any] = dict(
        clip_eps=cfg.grpo.clip_eps,
        kl_coef=cfg.grpo.kl_coef,
        ref_log_probs=ref_lp,
        aggregation=cfg.grpo.loss_aggregation,
    )
    loss, grad_norm = _optimize(policy, cfg, state, fused, scored, mask, kwargs, step)
    if isinstance(policy, SyncsAfterUpdate):
        policy.after_update()
    record = {
        "step": step,
        **fused.record,
        "loss": float(loss.detach()),
        "grad_norm": float(grad_norm),
        "grpo/informative_group_share": _share_of_groups(informative_rows(fused.advantages, scored.group_ids), scored),
        "policy/entropy": entropy_mean,
        **_update_diagnostics(policy, cfg, scored, mask),
        **value_record(fused.record, state.ledger, n_rollouts=len(scored.group_ids)),
        **state.ledger.metrics(),
    }
    return StepUpdate(record=record, anchor_pairs=fused.anchor_pairs)

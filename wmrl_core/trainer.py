"""The WMRL training loop, top to bottom.

Per step: sample B tasks -> the policy generates G rollouts per task -> the anchor sampler
marks some groups -> the world model scores every group in one batched call -> real
execution scores the anchor groups -> rewards from the reward extractor -> world-model
rewards are calibrated by the map fitted on earlier steps' anchor pairs, then this step's
pairs are added -> group advantages per stream -> the fuser (``rectified`` or
``inverse_variance``) combines the real and world-model GRPO losses -> one optimizer step. ``mode`` switches the same loop between ``real`` (GRPO, every
group executed), ``world_model`` (no execution, raw predictions) and ``wmrl``.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from wmrl_core import checkers
from wmrl_core.anchors import AnchorSampler
from wmrl_core.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from wmrl_core.components import Components, make_components
from wmrl_core.config import TrainConfig, to_yaml
from wmrl_core.debias import IsotonicDebiaser
from wmrl_core.fusion import InverseVarianceFuser, cross_fitted_calibration
from wmrl_core.errors import ConfigError
from wmrl_core.grpo import entropy_bonus, group_advantages, grpo_loss, rollout_entropy
from wmrl_core.ledger import ComputeLedger
from wmrl_core.metrics import MetricsWriter, read_metrics
from wmrl_core.plots import plot_run
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.progress import TrainingProgress
from wmrl_core.rectified import RectifiedFuser, rectified_loss
from wmrl_core.types import Outcome, Task, as_outcome

__all__ = ["train", "extract_rewards", "evaluate"]


def extract_rewards(reward_fn: Any, tasks: Sequence[Task], outcomes: Sequence[Outcome | float]) -> np.ndarray:
    """Rewards as float64; ``None`` and non-finite values become NaN (never 0)."""
    values = []
    for task, outcome in zip(tasks, outcomes, strict=True):
        r = reward_fn(task, as_outcome(outcome))
        values.append(float(r) if r is not None and math.isfinite(r) else math.nan)
    return np.asarray(values, dtype=np.float64)


def _nanmean(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else math.nan


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


@torch.no_grad()
def evaluate(c: Components, tasks: Sequence[Task], samples_per_task: int, seed: int) -> dict[str, float]:
    """Mean reward of the current policy on ``tasks``: the known truth when the environment
    has ``true_reward`` (free), else real execution (charged to ``eval/execution_s``, not to
    training compute). Sampling uses its own seed so evaluation leaves training's RNG alone."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        rollouts = c.policy.generate(list(tasks), samples_per_task)
    if callable(getattr(c.environment, "true_reward", None)):
        truth = [c.environment.true_reward(t, s) for t, s in zip(rollouts.tasks, rollouts.solutions)]
        return {"eval/true_reward": float(np.mean(truth))}
    start = time.perf_counter()
    outcomes = c.environment.execute(rollouts.tasks, rollouts.solutions)
    rewards = extract_rewards(c.reward, rollouts.tasks, outcomes)
    return {"eval/reward": _nanmean(rewards), "eval/execution_s": time.perf_counter() - start,
            "eval/ok_fraction": float(np.mean([as_outcome(o).ok for o in outcomes]))}


def _eval_tasks(c: Components, split: str) -> list[Task]:
    try:
        tasks = c.environment.tasks(split)
    except (ValueError, KeyError):
        tasks = []
    return tasks or c.environment.tasks("train")


def _stateful(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


def train(cfg: TrainConfig, *, plugin_manager=None) -> dict[str, Any]:
    """Run (or resume) training as configured; returns the summary also written to ``summary.json``."""
    pm = plugin_manager or get_plugin_manager()
    registry = build_registry(pm)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)

    c = make_components(cfg, registry, pm)
    has_entropy = callable(getattr(c.policy, "entropy", None))
    if cfg.grpo.entropy_coef and not has_entropy:
        c.close()
        raise ConfigError(f"grpo.entropy_coef={cfg.grpo.entropy_coef} needs a policy with an `entropy(rollouts)` method, and "
                          f"policy {cfg.policy.name!r} has none: set grpo.entropy_coef=0 (grpo.kl_coef regularises any policy)")
    optimizer = torch.optim.Adam([p for p in c.policy.parameters() if p.requires_grad], lr=cfg.grpo.lr)
    reference = None
    if cfg.grpo.kl_coef and not callable(getattr(c.policy, "reference_log_probs", None)):
        reference = copy.deepcopy(c.policy).requires_grad_(False)

    B, G = cfg.rollout.batch_tasks, cfg.rollout.group_size
    fraction = {"real": 1.0, "world_model": 0.0, "wmrl": cfg.anchors.fraction}[cfg.mode]
    anchor_sampler = AnchorSampler(fraction=fraction, min_groups=0 if cfg.mode == "world_model" else cfg.anchors.min_groups,
                                   seed=cfg.seed)
    debiaser = IsotonicDebiaser(window=cfg.debias.window, calibrator=cfg.debias.calibrator, slope=cfg.debias.slope)
    fuser = InverseVarianceFuser(min_pairs=cfg.denoise.min_pairs)
    rectified = RectifiedFuser(window=cfg.denoise.lambda_window)
    use_rectified = cfg.mode == "wmrl" and cfg.denoise.enabled and cfg.denoise.method == "rectified"
    ledger = ComputeLedger()
    task_rng = np.random.default_rng([cfg.seed, 0x7A5])
    train_tasks = c.environment.tasks(cfg.rollout.task_split)
    eval_tasks = _eval_tasks(c, cfg.eval.split)

    start_step = 0
    if cfg.resume and (run_dir / "checkpoints" / "last.pt").exists():
        state = load_checkpoint(run_dir / "checkpoints")
        start_step = state["step"]
        c.policy.load_state_dict(state["policy"])
        optimizer.load_state_dict(state["optimizer"])
        debiaser.load_state_dict(state["debiaser"])
        if state.get("rectified") is not None:
            rectified.load_state_dict(state["rectified"])
        ledger.load_state_dict(state["ledger"])
        task_rng.bit_generator.state = state["task_rng"]
        for name in ("environment", "world_model"):
            if state.get(name) is not None and _stateful(getattr(c, name)):
                getattr(c, name).load_state_dict(state[name])
        if reference is not None:
            reference.load_state_dict(state["reference"])
        set_rng_state(state["rng"])
    (run_dir / "config.yaml").write_text(to_yaml(cfg))
    writer = MetricsWriter(run_dir, tensorboard=cfg.logging.tensorboard, wandb_project=cfg.logging.wandb_project,
                           config=json.loads(json.dumps(vars(cfg), default=lambda o: vars(o))),
                           truncate_after_step=start_step if cfg.resume else None)
    if not cfg.resume:
        (run_dir / "anchor_pairs.jsonl").write_text("")

    def checkpoint(step: int) -> None:
        save_checkpoint(run_dir / "checkpoints", step, {
            "policy": c.policy.state_dict(), "optimizer": optimizer.state_dict(), "debiaser": debiaser.state_dict(),
            "rectified": rectified.state_dict(),
            "ledger": ledger.state_dict(), "task_rng": task_rng.bit_generator.state, "rng": rng_state(),
            "environment": c.environment.state_dict() if _stateful(c.environment) else None,
            "world_model": c.world_model.state_dict() if _stateful(c.world_model) else None,
            "reference": reference.state_dict() if reference is not None else None,
        })

    def should_eval(step: int) -> bool:
        return cfg.eval.every > 0 and (step == 0 or step % cfg.eval.every == 0 or step == cfg.steps)

    last: dict[str, Any] = {}
    progress = TrainingProgress(total=cfg.steps, start=start_step, enabled=cfg.logging.progress, label=f"{cfg.mode}")
    started = time.perf_counter()
    try:
        if start_step == 0:
            record = {"step": 0, **ledger.metrics()}
            if should_eval(0):
                record.update(evaluate(c, eval_tasks, cfg.eval.samples_per_task, seed=cfg.seed * 100003))
            writer.write(record)
            last = record
        for step in range(start_step + 1, cfg.steps + 1):
            ledger.new_step()
            # 1. tasks and rollouts: B groups of G
            picks = task_rng.choice(len(train_tasks), size=B, replace=B > len(train_tasks))
            tasks = [train_tasks[i] for i in picks]
            with ledger.measure("generation", n_items=B * G, cost=getattr(c.policy, "cost", None)):
                rollouts = c.policy.generate(tasks, G)
            checkers.check_rollouts(rollouts, B, G)
            group_ids = np.asarray(rollouts.group_ids)
            n = len(rollouts)

            # 2. anchors: whole groups executed for real
            anchor_groups = anchor_sampler.sample(B, step)
            is_anchor = anchor_groups[group_ids]
            anchor_idx = np.flatnonzero(is_anchor)

            # 3. the world model scores every group in one batched call
            wm_rewards = np.full(n, np.nan)
            if c.world_model is not None:
                with ledger.measure("world_model", n_items=n, cost=getattr(c.world_model, "cost", None)):
                    predictions = c.world_model.predict(rollouts.tasks, rollouts.solutions)
                if len(predictions) != n:
                    raise checkers.ContractError(f"world model returned {len(predictions)} predictions for {n} solutions")
                wm_rewards = extract_rewards(c.reward, rollouts.tasks, predictions)

            # 4. real execution of the anchor groups
            real_rewards = np.full(n, np.nan)
            if anchor_idx.size:
                anchor_tasks = [rollouts.tasks[i] for i in anchor_idx]
                with ledger.measure("execution", n_items=anchor_idx.size, cost=getattr(c.environment, "cost", None)):
                    outcomes = c.environment.execute(anchor_tasks, [rollouts.solutions[i] for i in anchor_idx])
                real_rewards[anchor_idx] = extract_rewards(c.reward, anchor_tasks, outcomes)

            # 5. online debiasing: calibrate with the map fitted on earlier steps' anchor pairs (so
            # this step's anchors are never used both to fit the map and to judge it), then add them
            group_keys = step * B + group_ids  # unique across steps
            calibrated = wm_rewards.copy()
            if cfg.mode == "wmrl" and cfg.debias.enabled and debiaser.n_pairs_:
                calibrated = debiaser.transform(wm_rewards)
            if cfg.mode == "wmrl" and anchor_idx.size:
                debiaser.update(wm_rewards[anchor_idx], real_rewards[anchor_idx], group_keys[anchor_idx])
                with (run_dir / "anchor_pairs.jsonl").open("a") as f:
                    f.write(json.dumps({"step": step, "world_model": wm_rewards[anchor_idx].tolist(),
                                        "calibrated": calibrated[anchor_idx].tolist(),
                                        "real": real_rewards[anchor_idx].tolist()}) + "\n")

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
                rectified.update(advantages[anchor_idx], cal_advantages[anchor_idx])
                w_real, w_wm = 1.0, lam
            elif cfg.mode == "wmrl" and cfg.denoise.enabled:
                rho2 = fuser.estimate_rho2(debiaser.x_, debiaser.y_, debiaser.groups_, calibrate=cfg.debias.enabled)
                weights = fuser.weights(n_real, n_wm, rho2)
                w_real, w_wm = weights.w_real, weights.w_world_model
                n_effective = n_real + (0.0 if math.isnan(rho2) else rho2) * n_wm
            else:  # pool the streams by their share of informative rollouts
                total = max(n_real + n_wm, 1)
                w_real, w_wm = (n_real / total, n_wm / total) if n_real + n_wm else (float(is_anchor.any()), float(not is_anchor.any()))

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
                    ref_lp = (c.policy.reference_log_probs(rollouts) if reference is None else reference.log_probs(rollouts))
            entropy_mean = math.nan  # of the policy that sampled this step's rollouts
            if has_entropy:
                with torch.no_grad():
                    entropy_mean = float(rollout_entropy(c.policy.entropy(rollouts), mask).mean())
            for _ in range(cfg.grpo.epochs):
                log_probs = c.policy.log_probs(rollouts)
                kwargs = dict(clip_eps=cfg.grpo.clip_eps, kl_coef=cfg.grpo.kl_coef, ref_log_probs=ref_lp,
                              aggregation=cfg.grpo.loss_aggregation)
                if use_rectified:  # L(anchors; real) + lambda [L(all; calibrated) - L(anchors; calibrated)]
                    real_term = grpo_loss(log_probs, rollouts.old_log_probs, adv_t, mask * real_rows, **kwargs)
                    loss = real_term if lam == 0 else rectified_loss(
                        real_term, grpo_loss(log_probs, rollouts.old_log_probs, cal_adv_t, mask, **kwargs),
                        grpo_loss(log_probs, rollouts.old_log_probs, cal_adv_t, mask * real_rows, **kwargs), lam)
                else:
                    loss = (w_real * grpo_loss(log_probs, rollouts.old_log_probs, adv_t, mask * real_rows, **kwargs)
                            + w_wm * grpo_loss(log_probs, rollouts.old_log_probs, adv_t, mask * (1 - real_rows), **kwargs))
                if cfg.grpo.entropy_coef:
                    loss = loss + entropy_bonus(c.policy.entropy(rollouts), mask, cfg.grpo.entropy_coef,
                                                cfg.grpo.loss_aggregation)
                optimizer.zero_grad()
                loss.backward()
                grad_norm = (torch.nn.utils.clip_grad_norm_(c.policy.parameters(), cfg.grpo.max_grad_norm)
                             if cfg.grpo.max_grad_norm else torch.tensor(math.nan))
                optimizer.step()
            if callable(getattr(c.policy, "after_update", None)):
                c.policy.after_update()

            # 9. metrics, evaluation, checkpoint
            residual_var = raw_residual_var = math.nan
            if debiaser.n_pairs_ >= 2:
                cross = cross_fitted_calibration(debiaser.x_, debiaser.y_, debiaser.groups_)
                residual_var = float(np.var(debiaser.y_ - cross))
                raw_residual_var = float(np.var(debiaser.y_ - debiaser.x_))
            record = {
                "step": step,
                "reward/real_mean": _nanmean(real_rewards),
                "reward/world_model_mean": _nanmean(wm_rewards),
                "reward/calibrated_mean": _nanmean(calibrated) if cfg.mode == "wmrl" else math.nan,
                "reward/train_mean": _nanmean(rewards),
                "debias/residual_var": residual_var,
                "debias/raw_residual_var": raw_residual_var,
                "debias/n_pairs": debiaser.n_pairs_,
                "fusion/w_real": w_real, "fusion/w_world_model": w_wm, "fusion/rho2": rho2,
                "fusion/n_real": n_real, "fusion/n_world_model": n_wm,
                "fusion/lambda": lam, "fusion/n_effective": n_effective,
                "calibration/tied_group_share": (_tied_group_share(calibrated, group_ids, ~is_anchor)
                                                 if cfg.mode == "wmrl" else math.nan),
                "calibration/within_group_error_raw": _within_group_error(wm_rewards, real_rewards, group_ids),
                "calibration/within_group_error_calibrated": (_within_group_error(calibrated, real_rewards, group_ids)
                                                              if cfg.mode == "wmrl" else math.nan),
                "anchors/groups": int(anchor_groups.sum()),
                "loss": float(loss.detach()), "grad_norm": float(grad_norm),
                "policy/entropy": entropy_mean,
                **ledger.metrics(),
            }
            if should_eval(step):
                record.update(evaluate(c, eval_tasks, cfg.eval.samples_per_task, seed=cfg.seed * 100003 + step))
            writer.write(record)
            last = record
            if (cfg.checkpoint.every and step % cfg.checkpoint.every == 0) or step == cfg.steps:
                checkpoint(step)
            progress.update(step, record)
    finally:
        progress.close()
        writer.close()
        c.close()

    evals = [r for r in read_metrics(run_dir) if any(k.startswith("eval/") for k in r)]
    plot_run(run_dir)
    summary = {"mode": cfg.mode, "steps": cfg.steps, "seed": cfg.seed, "run_dir": str(run_dir),
               "eval_first": {k: v for k, v in evals[0].items() if k.startswith("eval/") or k == "step"} if evals else None,
               "eval_last": {k: v for k, v in evals[-1].items() if k.startswith("eval/") or k == "step"} if evals else None,
               "components": {"environment": cfg.environment.name, "policy": cfg.policy.name,
                              "world_model": cfg.world_model.name if cfg.world_model else None, "reward": c.reward_name},
               "wall_s_this_invocation": time.perf_counter() - started, "final": last}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    return summary

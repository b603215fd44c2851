r"""How far each fusion's gradient is from the true one, at a policy a run passed through.

For the tabular softmax policy of the synthetic bandit the GRPO gradient of one group is known
in closed form: with :math:`\pi_t` the policy of the group's task, advantages :math:`A_i` that sum
to zero within the group and arms :math:`y_i`,

.. math:: h_g = \frac1G\sum_i A_i\,(e_{y_i} - \pi_t) = \frac1G\sum_i A_i\,e_{y_i}

in the parameter block of task :math:`t` (the :math:`\pi_t` term cancels). So at a checkpoint
(policy and calibrator of a step) many batches of :math:`B` groups can be drawn and each
estimator's gradient computed exactly, against the target :math:`g^* = E[h^R]` (GRPO with every
group executed, estimated from all simulated groups):

* ``anchors``: :math:`\bar h^R_{\mathcal A}`; ``world_model``: :math:`\bar h^C_{\mathcal U}`;
* ``inverse_variance``: :math:`w_R\bar h^R_{\mathcal A} + w_W\bar h^C_{\mathcal U}` with the run's
  :math:`\hat\rho^2` at that step;
* ``rectified``: :math:`\bar h^R_{\mathcal A} + \lambda(\bar h^C_{\text{all}} - \bar h^C_{\mathcal A})` at
  the given :math:`\lambda` and at :math:`\lambda^* = -E[(\bar h^R_{\mathcal A}-g^*)\cdot d]/E\|d\|^2`,
  :math:`d = \bar h^C_{\text{all}} - \bar h^C_{\mathcal A}` (the trace-optimal :math:`\lambda`, from the simulation).
* ``shrinkage toward inverse variance / calibrated``: the rectified update at :math:`\lambda^*`
  moved toward :math:`\hat g_T` (the inverse-variance update, or :math:`\bar h^C_{\text{all}}`) by
  :math:`\alpha`: the run's own and the trace-optimal :math:`\alpha^*` (:func:`optimal_step`), the
  best of the family.
* ``rectified, oracle world model``: :math:`\bar h^R_{\mathcal A} + \bar m_{\text{all}} - \bar m_{\mathcal A}`
  with :math:`m_g = E[h^R_g \mid \text{task}, y_{g,1..G}]`, the real gradient averaged over
  ``oracle_draws`` fresh executions of the same solutions: the best correction any world model
  can give (a control variate cannot beat the conditional expectation), so its error is the
  smallest an *unbiased* fusion of these anchors reaches. What is left is the anchors'
  execution noise, :math:`E\|\bar h^R_{\mathcal A} - \bar m_{\mathcal A}\|^2`, plus the batch's own sampling error.

Reported per estimator: :math:`E\|\hat g - g^*\|^2/\|g^*\|^2` (relative mean squared error) and its
bias part :math:`\|E\hat g - g^*\|^2/\|g^*\|^2`. Tasks are drawn i.i.d., so the first :math:`k` groups
of a batch are a uniform choice of anchors. Run as
``python -m experiments.synthetic.gradient_error RUN_DIR --steps 20,40``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wmrl_core.calibration import RewardCalibrator
from wmrl_core.checkpoint import current_keys
from wmrl_core.config import load_config
from wmrl_core.fusion import InverseVarianceFuser, inverse_variance_weights
from wmrl_core.metrics import read_metrics
from wmrl_core.synthetic.bandit import SyntheticBanditEnvironment
from wmrl_core.synthetic.world_model import SyntheticWorldModel

__all__ = [
    "group_gradients",
    "simulate_group_gradients",
    "lambda_estimates",
    "optimal_step",
    "relative_errors",
    "fusion_gradient_errors",
    "snapshot_report",
]


def group_gradients(
    advantages: np.ndarray, arms: np.ndarray, tasks: np.ndarray, num_tasks: int, num_arms: int
) -> np.ndarray:
    """:math:`h_g = \\frac1G\\sum_i A_i e_{y_i}` in task :math:`t_g`'s block: advantages and arms
    ``(..., B, G)``, tasks ``(..., B)``; returns ``(..., B, num_tasks, num_arms)``."""
    per_arm = np.einsum("...g,...gk->...k", advantages, np.eye(num_arms)[arms]) / arms.shape[-1]
    return per_arm[..., None, :] * np.eye(num_tasks)[tasks][..., None]


def optimal_step(error: np.ndarray, direction: np.ndarray) -> float:
    r""":math:`c^* = -E\langle e, d\rangle / E\lVert d\rVert^2` over the first axis: the trace-optimal
    multiple of ``direction`` to add to an estimate whose error is ``error`` (rectified's
    :math:`\lambda^*` with :math:`d = \bar h^C_{\text{all}} - \bar h^C_{\mathcal A}`, shrinkage's
    :math:`\alpha^*` with :math:`d` the target minus the rectified update)."""
    axes = tuple(range(1, error.ndim))
    return -float(np.mean(np.sum(error * direction, axis=axes)) / np.mean(np.sum(direction**2, axis=axes)))


def relative_errors(estimates: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """:math:`(E\\|\\hat g - g^*\\|^2, \\|E\\hat g - g^*\\|^2)/\\|g^*\\|^2` over the first axis of ``estimates``."""
    norm = float(np.sum(target**2))
    axes = tuple(range(1, estimates.ndim))
    mse = float(np.mean(np.sum((estimates - target) ** 2, axis=axes)))
    bias2 = float(np.sum((estimates.mean(axis=0) - target) ** 2))
    return mse / norm, bias2 / norm


def _z(rewards: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    centred = rewards - rewards.mean(-1, keepdims=True)
    return centred / (centred.std(-1, keepdims=True) + eps)  # grpo.group_advantages, vectorised


def simulate_group_gradients(
    env: SyntheticBanditEnvironment,
    world_model: SyntheticWorldModel,
    probs: np.ndarray,
    calibrator: RewardCalibrator,
    replications: int,
    batch_tasks: int,
    group_size: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``replications`` batches of ``batch_tasks`` groups drawn from policy ``probs``: their tasks
    (S, B), arms (S, B, G) and exact real- and calibrated-advantage group gradients (S, B, T, K)."""
    T, K = probs.shape
    S, B, G = replications, batch_tasks, group_size
    tasks = rng.integers(0, T, size=(S, B))
    arms = (rng.random((S, B, G, 1)) > np.cumsum(probs[tasks], -1)[:, :, None, :]).sum(-1).clip(max=K - 1)
    task_list = env.tasks()
    flat_tasks = [task_list[t] for t in np.repeat(tasks.ravel(), G)]
    real = np.array([o.score for o in env.execute(flat_tasks, arms.ravel().tolist())]).reshape(S, B, G)
    predicted = np.array(world_model.predict(flat_tasks, arms.ravel().tolist()))
    calibrated = (calibrator.transform(predicted) if calibrator.n_pairs_ else predicted).reshape(S, B, G)
    return tasks, arms, group_gradients(_z(real), arms, tasks, T, K), group_gradients(_z(calibrated), arms, tasks, T, K)


def fusion_gradient_errors(
    env: SyntheticBanditEnvironment,
    world_model: SyntheticWorldModel,
    probs: np.ndarray,
    calibrator: RewardCalibrator,
    *,
    rho2: float,
    lams: tuple[float, ...] = (0.5, 1.0),
    batch_tasks: int = 20,
    group_size: int = 8,
    anchors: int = 2,
    replications: int = 4000,
    seed: int = 0,
    oracle_draws: int = 0,
    alphas: tuple[float, ...] = (),
) -> dict[str, tuple[float, float]]:
    """Relative MSE and bias² of each estimator (module docstring) at policy ``probs`` (tasks × arms)."""
    rng = np.random.default_rng(seed)
    T, K = probs.shape
    S, B, G = replications, batch_tasks, group_size
    tasks, arms, h_r, h_c = simulate_group_gradients(env, world_model, probs, calibrator, S, B, G, rng)
    task_list = env.tasks()
    target = h_r.mean(axis=(0, 1))
    h_r_anchor, h_c_anchor = h_r[:, :anchors].mean(1), h_c[:, :anchors].mean(1)
    h_c_all, h_c_rest = h_c.mean(1), h_c[:, anchors:].mean(1)
    w_r, w_w = inverse_variance_weights(anchors * G, (B - anchors) * G, rho2)
    d = h_c_all - h_c_anchor
    lam_star = optimal_step(h_r_anchor - target, d)
    inverse_variance = w_r * h_r_anchor + w_w * h_c_rest
    out = {
        "anchors": relative_errors(h_r_anchor, target),
        "world_model": relative_errors(h_c_rest, target),
        f"inverse_variance (w_W={w_w:.2f})": relative_errors(inverse_variance, target),
    }
    for lam in (*lams, lam_star):
        label = f"rectified (λ*={lam:.2f})" if lam is lam_star else f"rectified (λ={lam:.2f})"
        out[label] = relative_errors(h_r_anchor + lam * d, target)
    rectified = h_r_anchor + lam_star * d
    for name, toward in (("inverse variance", inverse_variance), ("calibrated", h_c_all)):
        for alpha in (*alphas, None):
            a = float(np.clip(optimal_step(rectified - target, toward - rectified), 0, 1)) if alpha is None else alpha
            label = f"shrinkage toward {name} (λ*, {'α*' if alpha is None else 'α'}={a:.2f})"
            out[label] = relative_errors(rectified + a * (toward - rectified), target)
    if oracle_draws:
        mu = np.array([[env.true_reward(t, k) for k in range(K)] for t in task_list])[tasks[..., None], arms]
        m = np.zeros_like(h_r)
        for _ in range(oracle_draws):
            redrawn = mu + env.execution_noise * rng.standard_normal(mu.shape)
            m += group_gradients(_z(redrawn), arms, tasks, T, K) / oracle_draws
        out["rectified, oracle world model"] = relative_errors(h_r_anchor + m.mean(1) - m[:, :anchors].mean(1), target)
    return out


def _run(run_dir: Path) -> tuple[Any, SyntheticBanditEnvironment, SyntheticWorldModel]:
    """A synthetic run's config, bandit and world model, rebuilt from its ``config.yaml``."""
    cfg = load_config(run_dir / "config.yaml")
    if cfg.world_model is None:
        raise ValueError(f"{run_dir} is a run without a world model (mode=real): nothing to compare the anchors with")
    env = SyntheticBanditEnvironment(**dict(cfg.environment.kwargs))
    return cfg, env, SyntheticWorldModel(env, **dict(cfg.world_model.kwargs))


def _snapshot(run_dir: Path, step: int) -> tuple[dict[str, Any], np.ndarray, RewardCalibrator]:
    """The checkpoint of ``step``, its policy's probabilities (tasks x arms) and its calibrator."""
    ckpt = current_keys(torch.load(run_dir / "checkpoints" / f"step_{step:06d}.pt", weights_only=False))
    calibrator = RewardCalibrator()
    calibrator.load_state_dict(ckpt["calibrator"])
    return ckpt, torch.softmax(ckpt["policy"]["logits"], dim=-1).numpy(), calibrator


def snapshot_report(run_dir: str | Path, steps: list[int], replications: int = 4000, oracle_draws: int = 0) -> str:
    """A markdown table of :func:`fusion_gradient_errors` at the checkpoints ``steps`` of a
    synthetic run (``checkpoint.every`` must have saved them); :math:`\\hat\\rho^2` and
    :math:`\\hat\\lambda` are the run's own at each step (in a rectified run, :math:`\\hat\\rho^2` is
    what inverse variance would estimate from the same anchor pairs)."""
    run_dir = Path(run_dir)
    cfg, env, wm = _run(run_dir)
    records = {r["step"]: r for r in read_metrics(run_dir)}
    lines = [
        f"Gradient error at checkpoints of `{run_dir}` ({replications} batches of B = {cfg.rollout.batch_tasks} groups each):",
        "",
        "| step | eval true reward | run's ρ̂² / λ̂ | estimator | relative MSE | of which bias² |",
        "|---|---|---|---|---|---|",
    ]
    for step in steps:
        _, probs, calibrator = _snapshot(run_dir, step)
        rec = records.get(step, {})
        rho2 = rec.get("fusion/rho2")
        if rho2 is None or not math.isfinite(rho2):  # a rectified run: what inverse variance would use
            rho2 = InverseVarianceFuser().estimate_rho2(calibrator.x_, calibrator.y_, calibrator.groups_)
        lam = rec.get("fusion/lambda")
        lam_text = "-" if lam is None or not math.isfinite(lam) else f"{lam:.2f}"
        alpha = rec.get("fusion/alpha")
        alphas = (alpha,) if alpha is not None and math.isfinite(alpha) else ()
        errors = fusion_gradient_errors(
            env,
            wm,
            probs,
            calibrator,
            rho2=rho2,
            batch_tasks=cfg.rollout.batch_tasks,
            group_size=cfg.rollout.group_size,
            anchors=max(cfg.anchors.min_groups, round(cfg.anchors.fraction * cfg.rollout.batch_tasks)),
            replications=replications,
            oracle_draws=oracle_draws,
            alphas=alphas,
        )
        for i, (name, (mse, bias2)) in enumerate(errors.items()):
            head = (
                f"| {step} | {rec.get('eval/true_reward', math.nan):.3f} | {rho2:.2f} / {lam_text} |"
                if i == 0
                else "| | | |"
            )
            lines.append(f"{head} {name} | {mse:.2f} | {bias2:.3f} |")
    return "\n".join(lines)


def lambda_estimates(run_dir: str | Path, steps: list[int], replications: int = 4000) -> list[dict[str, float]]:
    r"""At each checkpoint of a run trained with ``fusion.kwargs.lambda_moments=gradient`` (whose fuser keeps
    both the advantage moments and the groups' gradient vectors): the exact trace-optimal
    :math:`\lambda^*` (:func:`fusion_gradient_errors`' simulation) beside the window's slope from the
    advantage (solution) moments and from the per-group gradients, unclipped and as used
    (:math:`\tilde\lambda`: the test and the shrinkage)."""
    from wmrl_core.fusion.rectified import RectifiedFuser, rectified_settings

    run_dir = Path(run_dir)
    cfg, env, wm = _run(run_dir)
    rows = []

    def rng(step: int) -> np.random.Generator:
        return np.random.default_rng([step, 0x1A])

    for step in steps:
        ckpt, probs, calibrator = _snapshot(run_dir, step)
        state = ckpt["fuser"].get("rectified", ckpt["fuser"])
        lam = rectified_settings(cfg.fusion)
        fuser = RectifiedFuser(window=lam.lambda_window, moments="gradient", level=lam.lambda_level)
        fuser.load_state_dict(state)
        k = max(cfg.anchors.min_groups, round(cfg.anchors.fraction * cfg.rollout.batch_tasks))
        _, _, h_r, h_c = simulate_group_gradients(
            env, wm, probs, calibrator, replications, cfg.rollout.batch_tasks, cfg.rollout.group_size, rng(step)
        )
        target = h_r.mean(axis=(0, 1))
        lam_star = optimal_step(h_r[:, :k].mean(1) - target, h_c.mean(1) - h_c[:, :k].mean(1))
        row = {"step": step, "lambda_star": lam_star}
        for moments in ("solution", "gradient"):
            row[f"slope_{moments}"] = fuser.slope(moments)[0]
            row[f"lambda_{moments}"] = fuser.lam(moments)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--steps", default="20,40", help="comma-separated checkpoint steps")
    parser.add_argument("--replications", type=int, default=4000)
    parser.add_argument(
        "--oracle-draws", type=int, default=0, help="re-executions per batch for the oracle world model's row (0: none)"
    )
    parser.add_argument(
        "--lambdas",
        action="store_true",
        help="instead: exact lambda* against the run's advantage- and gradient-moment lambda "
        "(a run with fusion.kwargs.lambda_moments=gradient)",
    )
    args = parser.parse_args(argv)
    if args.lambdas:
        rows = lambda_estimates(args.run_dir, [int(s) for s in args.steps.split(",")], args.replications)
        print("| step | exact λ* | slope, advantage moments | slope, gradients | λ̃ advantage | λ̃ gradients |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['step']} | {r['lambda_star']:.3f} | {r['slope_solution']:.3f} | {r['slope_gradient']:.3f} "
                f"| {r['lambda_solution']:.3f} | {r['lambda_gradient']:.3f} |"
            )
        return
    print(snapshot_report(args.run_dir, [int(s) for s in args.steps.split(",")], args.replications, args.oracle_draws))


if __name__ == "__main__":
    main()

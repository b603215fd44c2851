r"""λ tuned on gradients, on the program policy: the rectified fuser's
power-tuned λ from advantage moments and from per-group gradients, against the trace-optimal λ*
at one fixed policy of the main job.

At a fixed policy (the initial one of ``--seed``, or ``--checkpoint``) of the main job's config
(``configs/autoresearch/quickstart.yaml``: the program policy, tasks of the R families, the
world model fitted on W only), ``--groups`` N groups of G rollouts are sampled, tasks drawn
i.i.d. from the training tasks. *Every* rollout is executed in the Docker sandbox (through the
execution cache ``--cache``), every rollout is scored by the world model, and the world-model
rewards are calibrated **cross-fitted**: the groups are split in two halves by index parity and
each half is calibrated by the configured calibrator fitted on the other half's (world model,
real) pairs, so no group is judged by a map fitted on it (identity when
``calibration.enabled=false``). GRPO advantages per group give each group's gradients
:math:`h^R_g` (real advantages) and :math:`h^C_g` (calibrated ones), whole and count-sketched to
``--sketch-dim`` (:class:`wmrl_core.fusion.gradients.PolicyGradients`, as the trainer builds it).

**Target.** The trace-optimal scalar of the rectified update over i.i.d. groups
(:mod:`wmrl_core.fusion.rectified`),

.. math:: \lambda^* = \frac{\sum_g\langle h^R_g - \bar h^R,\ h^C_g - \bar h^C\rangle}{\sum_g\lVert h^C_g - \bar h^C\rVert^2},

here its plug-in estimate over the N groups (unclipped), with a percentile bootstrap interval
over groups.

**Estimators.** On many random k-subsets of the N groups (a window of k anchor groups), a
:class:`~wmrl_core.fusion.rectified.RectifiedFuser` with the config's level and minimum is fed the
subset exactly as ``fit`` feeds it anchors, and reads its slope (unclipped) and its
:math:`\tilde\lambda` (the test against the null and the shrinkage) from the advantage
(solution) moments, the cheap default; from the whole gradients; and from the sketched ones.
Reported per estimator and k: mean, sd, and mean :math:`|\text{estimate} - \lambda^*|`.

    wmrl experiment lambda-estimates --groups 40 --out /tmp/lambda
    wmrl experiment lambda-estimates --checkpoint runs/autoresearch/wmrl-seed0/checkpoints/step_000016.pt

The report (``lambda_estimates.md``) is rendered from the JSON record written beside it
(:func:`markdown`; the study's ``page.py`` renders it again from a committed record).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from wmrl_autoresearch.experiments import config_path

from wmrl_core import checkers
from wmrl_core.calibration import RewardCalibrator
from wmrl_core.checkpoint import load_checkpoint
from wmrl_core.components import make_components
from wmrl_core.config import load_config
from wmrl_core.errors import ConfigError
from wmrl_core.fusion import PolicyGradients
from wmrl_core.fusion.rectified import (
    RectifiedFuser,
    gradient_slope_terms,
    rectified_settings,
    solution_keys,
    solution_moments,
)
from wmrl_core.grpo import group_advantages
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.trainer import component_call, execute, extract_rewards, split_tasks

__all__ = [
    "GroupSample",
    "trace_optimal_lambda",
    "weighted_centred_ratio",
    "bootstrap_lambda_interval",
    "cross_fitted_rewards",
    "window_estimates",
    "subset_estimates",
    "error_summary",
    "main",
]

CONFIG = config_path("quickstart.yaml")
ESTIMATORS = {"solution": "advantage (solution) moments", "gradient": "whole gradients", "sketch": "sketched gradients"}
"""Estimator key -> what the report calls it."""
COMMON = ["logging.progress=false", "logging.tensorboard=false", "eval.every=0"]
CHUNK_GROUPS = 5
"""Groups executed per call (a progress line, and the cache flushed, after each)."""


@dataclass(frozen=True)
class GroupSample:
    """One group at the fixed policy: its rollouts' advantages, solution keys and gradients.

    :param real_advantages: (G,) GRPO advantages from real rewards.
    :param calibrated_advantages: (G,) from the cross-fitted calibrated world-model rewards.
    :param keys: (G,) ints, equal for rollouts with equal programs (:func:`solution_keys`).
    :param h_real: :math:`h^R_g` (whole); ``h_calibrated``: :math:`h^C_g`.
    :param sketch_real: the count sketch of :math:`h^R_g`; ``sketch_calibrated``: of :math:`h^C_g`.
    """

    real_advantages: np.ndarray
    calibrated_advantages: np.ndarray
    keys: np.ndarray
    h_real: np.ndarray
    h_calibrated: np.ndarray
    sketch_real: np.ndarray
    sketch_calibrated: np.ndarray


# ------------------------------------------------------------------ the maths


def trace_optimal_lambda(h_real: np.ndarray, h_calibrated: np.ndarray) -> float:
    r""":math:`\lambda^* = \sum_g\langle h^R_g - \bar h^R, h^C_g - \bar h^C\rangle / \sum_g\lVert h^C_g - \bar h^C\rVert^2`
    over the rows (groups) of two (groups, dim) arrays (:func:`gradient_slope_terms`), unclipped;
    NaN when the calibrated gradients do not vary.

    :raises ValueError: for fewer than two groups (no spread to centre) or mismatched shapes."""
    r_g, c_g = gradient_slope_terms(h_real, h_calibrated)
    if r_g.size < 2:
        raise ValueError(f"lambda* needs at least two groups, got {r_g.size}")
    return float(r_g.sum() / c_g.sum()) if c_g.sum() > 1e-300 else float("nan")


def weighted_centred_ratio(gram_rc: np.ndarray, gram_cc: np.ndarray, weights: np.ndarray) -> float:
    r""":func:`trace_optimal_lambda` of the groups repeated ``weights`` times, from their Gram
    matrices :math:`K^{RC}_{gh} = \langle h^R_g, h^C_h\rangle`, :math:`K^{CC}_{gh} = \langle h^C_g, h^C_h\rangle`:
    with :math:`n = \sum_g w_g`,

    .. math:: \lambda = \frac{\sum_g w_g K^{RC}_{gg} - w^\top K^{RC} w / n}{\sum_g w_g K^{CC}_{gg} - w^\top K^{CC} w / n}

    (:math:`\sum_g w_g\langle h_g - \bar h, k_g - \bar k\rangle = \sum_g w_g\langle h_g, k_g\rangle - n\langle\bar h, \bar k\rangle`).
    NaN when the denominator vanishes."""
    k_rc, k_cc, w = (np.asarray(a, dtype=np.float64) for a in (gram_rc, gram_cc, weights))
    if k_rc.shape != k_cc.shape or k_rc.ndim != 2 or k_rc.shape[0] != k_rc.shape[1] or w.shape != k_rc.shape[:1]:
        raise ValueError(
            f"need two square (n, n) Gram matrices and (n,) weights, got {k_rc.shape}, {k_cc.shape}, {w.shape}"
        )
    if np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be non-negative with a positive sum")
    n = w.sum()
    num = w @ np.diag(k_rc) - w @ k_rc @ w / n
    den = w @ np.diag(k_cc) - w @ k_cc @ w / n
    return float(num / den) if den > 1e-300 else float("nan")


def bootstrap_lambda_interval(
    h_real: np.ndarray,
    h_calibrated: np.ndarray,
    *,
    replications: int,
    rng: np.random.Generator,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`trace_optimal_lambda` over groups (rows resampled
    with replacement; :func:`weighted_centred_ratio` of the resampling counts). Resamples whose
    calibrated gradients do not vary are dropped; (NaN, NaN) when none is left."""
    h_r, h_c = (np.asarray(a, dtype=np.float64) for a in (h_real, h_calibrated))
    if h_r.shape != h_c.shape or h_r.ndim != 2 or h_r.shape[0] < 2:
        raise ValueError(f"need two (groups >= 2, dim) arrays of one shape, got {h_r.shape} and {h_c.shape}")
    if replications < 1 or not 0 < confidence < 1:
        raise ValueError(f"need replications >= 1 and confidence in (0, 1), got {replications}, {confidence}")
    n = h_r.shape[0]
    k_rc, k_cc = h_r @ h_c.T, h_c @ h_c.T
    counts = [np.bincount(rng.integers(n, size=n), minlength=n) for _ in range(replications)]
    values = np.array([weighted_centred_ratio(k_rc, k_cc, w) for w in counts])
    values = values[np.isfinite(values)]
    if not values.size:
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2
    return float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))


def cross_fitted_rewards(
    world_model: np.ndarray,
    real: np.ndarray,
    group_ids: np.ndarray,
    make_calibrator: Callable[[], RewardCalibrator],
) -> np.ndarray:
    """Calibrated world-model rewards, two-fold by group parity: the rows of the groups with
    even (odd) id are mapped by a calibrator (``make_calibrator()``) fitted on the pairs of the
    odd (even) groups; a fold whose other half has no finite pair keeps its raw rewards (the
    calibrator's identity before data). NaN stays NaN."""
    wm, y, g = (np.asarray(a) for a in (world_model, real, group_ids))
    if not (wm.shape == y.shape == g.shape) or wm.ndim != 1:
        raise ValueError(f"rewards and group ids must be 1-D of equal length, got {wm.shape}, {y.shape}, {g.shape}")
    out = np.full(wm.shape, np.nan)
    for fold in (0, 1):
        test, fit = (g % 2) == fold, (g % 2) != fold
        calibrator = make_calibrator()
        calibrator.update(wm[fit].astype(np.float64), y[fit].astype(np.float64), g[fit].astype(np.int64))
        out[test] = calibrator.transform(wm[test].astype(np.float64))
    return out


def window_estimates(groups: Sequence[GroupSample], *, level: float | None, min_groups: int) -> dict[str, float]:
    r"""What a :class:`RectifiedFuser` reads from a window holding exactly ``groups`` as anchor
    groups (fed as :meth:`RectifiedFuser.update` is fed by ``fit``): per estimator of
    :data:`ESTIMATORS`, ``slope_<e>`` (the unclipped :math:`\sum r_g/\sum c_g`) and ``lambda_<e>``
    (:math:`\tilde\lambda`: 0 unless the advantage slope passes the test at ``level``, then shrunk).
    ``sketch`` is the gradient estimator on the sketched vectors."""
    if len(groups) < 2:
        raise ValueError(f"a window needs at least two groups, got {len(groups)}")
    window = len(groups)
    size = max(int(g.keys.max()) + 1 for g in groups)
    real = np.concatenate([g.real_advantages for g in groups])
    calibrated = np.concatenate([g.calibrated_advantages for g in groups])
    ids = np.concatenate([np.full(g.keys.size, i) for i, g in enumerate(groups)])
    keys = np.concatenate([i * size + g.keys for i, g in enumerate(groups)])
    out: dict[str, float] = {}
    for vectors_of, names in (
        (lambda g: (g.h_real, g.h_calibrated), ("solution", "gradient")),
        (lambda g: (g.sketch_real, g.sketch_calibrated), ("sketch",)),
    ):
        fuser = RectifiedFuser(window=window, moments="gradient", level=level, min_groups=min(min_groups, window))
        fuser.update(real, calibrated, keys, ids, {i: vectors_of(g) for i, g in enumerate(groups)})
        for name in names:
            moments = "solution" if name == "solution" else "gradient"
            out[f"slope_{name}"] = fuser.slope(moments)[0]
            out[f"lambda_{name}"] = fuser.lam(moments)
    return out


def subset_estimates(
    groups: Sequence[GroupSample],
    k: int,
    n_subsets: int,
    rng: np.random.Generator,
    *,
    level: float | None,
    min_groups: int,
) -> dict[str, np.ndarray]:
    """:func:`window_estimates` on ``n_subsets`` subsets of ``k`` of the ``groups``, each drawn
    uniformly without replacement (a window of k anchor groups); one array per key."""
    if not 2 <= k <= len(groups):
        raise ValueError(f"k must be in [2, {len(groups)}] (the groups sampled), got {k}")
    if n_subsets < 1:
        raise ValueError(f"n_subsets must be >= 1, got {n_subsets}")
    rows = [
        window_estimates(
            [groups[i] for i in rng.choice(len(groups), size=k, replace=False)], level=level, min_groups=min_groups
        )
        for _ in range(n_subsets)
    ]
    return {key: np.array([r[key] for r in rows]) for key in rows[0]}


def error_summary(values: np.ndarray, target: float) -> dict[str, float]:
    """``mean``, ``sd`` (ddof 1; 0 for one value) and ``mean_abs_error`` :math:`\\overline{|v - \\lambda^*|}` of ``values``."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or not v.size:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {v.shape}")
    return {
        "mean": float(v.mean()),
        "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0,
        "mean_abs_error": float(np.mean(np.abs(v - target))),
    }


# ------------------------------------------------------------------ sampling at the fixed policy


def _policy_state(path: Path) -> dict[str, Any]:
    """The policy's state in a ``wmrl train`` checkpoint file, or the newest one in a folder."""
    state = load_checkpoint(path) if path.is_dir() else torch.load(path, weights_only=False)
    if isinstance(state, dict) and "policy" in state:
        return state["policy"]
    raise ValueError(f"{path} is not a `wmrl train` checkpoint (no 'policy' entry); pass a step_NNNNNN.pt of a run")


def _execute_all(c: Any, tasks: list, solutions: list, group_size: int) -> tuple[list[Any], float]:
    """Every rollout executed, ``CHUNK_GROUPS`` groups a call, with a progress line after each."""
    outcomes: list[Any] = []
    started, total, step = time.perf_counter(), len(solutions), CHUNK_GROUPS * group_size
    for first in range(0, total, step):
        outcomes += execute(c, tasks[first : first + step], solutions[first : first + step], "(lambda-estimates)")
        print(
            f"[execute] {len(outcomes)}/{total} executions, {getattr(c.environment, 'replayed', 0)} replayed from the "
            f"cache [{time.perf_counter() - started:.0f} s]",
            flush=True,
        )
    return outcomes, time.perf_counter() - started


def group_samples(
    policy: Any, rollouts: Any, real: np.ndarray, calibrated: np.ndarray, cfg: Any, sketch_dim: int
) -> list[GroupSample]:
    """Each group's GRPO advantages of both streams (``grpo.scale_advantages``), solution keys and
    gradients :math:`h^R_g, h^C_g`, whole and sketched, by :class:`PolicyGradients` as the trainer
    builds it (the run's loss aggregation; the sketch seeded by the run's seed)."""
    group_ids = np.asarray(rollouts.group_ids)
    a_real = group_advantages(real, group_ids, scale=cfg.grpo.scale_advantages)
    a_cal = group_advantages(calibrated, group_ids, scale=cfg.grpo.scale_advantages)
    mask, aggregation = rollouts.mask, cfg.grpo.loss_aggregation
    whole = PolicyGradients(policy, rollouts, mask, aggregation, sketch_dim=None, seed=cfg.seed)
    sketched = PolicyGradients(policy, rollouts, mask, aggregation, sketch_dim=sketch_dim, seed=cfg.seed)
    samples = []
    for g in np.unique(group_ids):
        rows = group_ids == g
        idx = np.flatnonzero(rows)
        samples.append(
            GroupSample(
                real_advantages=a_real[idx],
                calibrated_advantages=a_cal[idx],
                keys=solution_keys(np.zeros(idx.size, dtype=np.int64), [rollouts.solutions[i] for i in idx]),
                h_real=whole(a_real, rows),
                h_calibrated=whole(a_cal, rows),
                sketch_real=sketched(a_real, rows),
                sketch_calibrated=sketched(a_cal, rows),
            )
        )
    return samples


def sample_groups(cfg: Any, args: argparse.Namespace) -> tuple[list[GroupSample], dict[str, Any]]:
    """N groups at the fixed policy: executed, predicted, calibrated, their gradients."""
    pm = get_plugin_manager()
    c = make_components(cfg, build_registry(pm), pm)
    try:
        if c.world_model is None:
            raise ConfigError("the config builds no world model: set mode=wmrl and a world_model section")
        if args.checkpoint is not None:
            c.policy.load_state_dict(_policy_state(args.checkpoint))
        train = split_tasks(c, cfg.rollout.task_split, "rollout.task_split")
        picks = np.random.default_rng([cfg.seed, 0x1A3B]).choice(len(train), size=args.groups, replace=True)
        tasks, G = [train[i] for i in picks], cfg.rollout.group_size
        with torch.random.fork_rng():
            torch.manual_seed(cfg.seed * 1_000_003 + 0x1A3)
            rollouts = c.policy.generate(tasks, G)
        checkers.check_rollouts(rollouts, args.groups, G, c.who("policy"))
        group_ids = np.asarray(rollouts.group_ids)
        with component_call(c.who("world_model"), "predict", "(lambda-estimates)"):
            predictions = c.world_model.predict(rollouts.tasks, rollouts.solutions)
        predictions = checkers.check_outcomes(c.who("world_model"), "predict", predictions, len(rollouts))
        wm = extract_rewards(c.reward, rollouts.tasks, predictions)
        outcomes, execution_s = _execute_all(c, list(rollouts.tasks), list(rollouts.solutions), G)
        real = extract_rewards(c.reward, rollouts.tasks, outcomes)
        replayed = int(getattr(c.environment, "replayed", 0))
    finally:
        c.close()  # the sandboxes go; what follows needs only the policy

    cal = cfg.calibration
    if cal.enabled:
        calibrated = cross_fitted_rewards(wm, real, group_ids, lambda: RewardCalibrator.from_config(cal))
    else:
        calibrated = wm.copy()
    samples = group_samples(c.policy, rollouts, real, calibrated, cfg, args.sketch_dim)
    records = []
    for g in range(args.groups):
        idx = np.flatnonzero(group_ids == g)
        keys = samples[g].keys
        records.append(
            {
                "task": tasks[g].id,
                "distinct_programs": int(np.unique(keys).size),
                "real": [None if np.isnan(v) else float(v) for v in real[idx]],
                "world_model": [None if np.isnan(v) else float(v) for v in wm[idx]],
                "calibrated": [None if np.isnan(v) else float(v) for v in calibrated[idx]],
                "statuses": [str(outcomes[i].status) for i in idx],
            }
        )
    info = {
        "groups": records,
        "executions": len(rollouts),
        "replayed": replayed,
        "execution_s": execution_s,
        "parameters": int(sum(p.numel() for p in c.policy.parameters() if p.requires_grad)),
        "nonzero_gradient_coordinates": int(
            np.count_nonzero(np.any([(s.h_real != 0) | (s.h_calibrated != 0) for s in samples], axis=0))
        ),
        "calibration": (
            f"cross-fitted {cal.calibrator} (two folds by group parity, each fitted on the other)"
            if cal.enabled
            else "identity (calibration.enabled=false)"
        ),
    }
    return samples, info


# ------------------------------------------------------------------ analysis and report


def analyse(samples: list[GroupSample], cfg: Any, args: argparse.Namespace) -> dict[str, Any]:
    """λ* with its bootstrap interval; every estimator on all N groups and on k-subsets."""
    h_r, h_c = np.stack([s.h_real for s in samples]), np.stack([s.h_calibrated for s in samples])
    rng = np.random.default_rng([cfg.seed, 0x5B])
    lam_star = trace_optimal_lambda(h_r, h_c)
    lo, hi = bootstrap_lambda_interval(h_r, h_c, replications=args.bootstrap, rng=rng)
    lam = rectified_settings(cfg.fusion)
    settings = {"level": lam.lambda_level, "min_groups": lam.lambda_min_groups}
    per_k = {}
    for k in args.k:
        est = subset_estimates(samples, k, args.subsets, rng, **settings)
        per_k[str(k)] = {key: error_summary(values, lam_star) for key, values in est.items()}
    return {
        "lambda_star": lam_star,
        "lambda_star_ci95": [lo, hi],
        "all_groups": window_estimates(samples, **settings),
        "informative_groups": int(
            sum(solution_moments(s.real_advantages, s.calibrated_advantages, s.keys)[2] > 1e-12 for s in samples)
        ),
        "per_k": per_k,
    }


def markdown(result: dict[str, Any]) -> str:
    a, s = result["analysis"], result["settings"]
    n = s["groups"]
    lines = [
        "# λ from advantage moments and from per-group gradients against λ*, program policy",
        "",
        f"Made by `{result['command']}`.",
        "",
        f"Policy: {s['policy']}; {n} groups of G = {s['group_size']} (tasks drawn i.i.d. from the training split), "
        f"every rollout executed ({result['executions']} executions, {result['replayed']} replayed from the cache, "
        f"{result['execution_s']:.0f} s); world-model rewards calibrated: {result['calibration']}. "
        f"{a['informative_groups']} of {n} groups have calibrated spread. Whole gradients: "
        f"{result['parameters']:,} parameters ({result['nonzero_gradient_coordinates']:,} with a non-zero gradient); "
        f"sketch dimension {s['sketch_dim']}.",
        "",
        f"**λ\\* = {a['lambda_star']:.3f}** (plug-in over the {n} groups, whole gradients; 95% bootstrap interval over "
        f"groups {a['lambda_star_ci95'][0]:.3f} to {a['lambda_star_ci95'][1]:.3f}). On all {n} groups: slope from "
        f"advantage moments {a['all_groups']['slope_solution']:.3f}, from sketched gradients "
        f"{a['all_groups']['slope_sketch']:.3f}.",
        "",
        f"Estimators on {s['subsets']} random k-subsets of the {n} groups (a window of k anchor groups; level "
        f"{s['level']}, at least {s['min_groups']} informative groups):",
        "",
        "| k | estimator | slope mean | slope sd | mean abs(slope − λ*) | λ̃ mean | λ̃ sd | mean abs(λ̃ − λ*) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, row in a["per_k"].items():
        for key, label in ESTIMATORS.items():
            sl, lam = row[f"slope_{key}"], row[f"lambda_{key}"]
            lines.append(
                f"| {k} | {label} | {sl['mean']:.3f} | {sl['sd']:.3f} | {sl['mean_abs_error']:.3f} "
                f"| {lam['mean']:.3f} | {lam['sd']:.3f} | {lam['mean_abs_error']:.3f} |"
            )
    lines += [
        "",
        "What it does not show:",
        "",
        f"* λ* is the plug-in estimate over these {n} groups, not the population value; its interval is a bootstrap "
        "over groups. One policy, one seed.",
        "* The k-subsets are drawn from the same groups that give λ*, so the errors at k near N understate those of "
        "an independent window (at k = N they are the all-groups values against λ*).",
        "* The fuser's window holds k *informative* groups and the uninformative ones between them; here k groups are "
        "drawn uniformly, informative or not. λ̃ is clipped to [0, 1] and shrunk, so its error includes that by design.",
        "* The calibrator is cross-fitted at this policy, not the run's, fitted on earlier steps' anchors.",
        "* Whether a better λ makes training faster is not measured.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, prog: str = "wmrl experiment lambda-estimates") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=CONFIG, help="the main job's config")
    parser.add_argument("--override", nargs="*", default=[], help="extra key=value overrides of the config")
    parser.add_argument("--seed", type=int, default=None, help="the policy's seed and the draws' (default: config)")
    parser.add_argument("--checkpoint", type=Path, default=None, help="a `wmrl train` checkpoint (default: initial)")
    parser.add_argument("--groups", type=int, default=40, help="N: groups sampled, every rollout executed")
    parser.add_argument("--k", type=int, nargs="+", default=None, help="window sizes (default: lambda_window and 5)")
    parser.add_argument("--subsets", type=int, default=1000, help="random k-subsets per k")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples of lambda*")
    parser.add_argument("--sketch-dim", type=int, default=1024, help="the count sketch's dimension")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path("runs/lambda_estimates/execution_cache.jsonl"),
        help="the execution cache (environment.cache): a repeated (task, program) replays its execution",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/lambda_estimates"), help="where the report goes")
    args = parser.parse_args(argv)
    if args.groups < 2 or args.sketch_dim < 1:
        parser.error(f"--groups must be >= 2 and --sketch-dim >= 1, got {args.groups}, {args.sketch_dim}")
    overrides = [*COMMON, f"environment.cache={args.cache}", *args.override]
    cfg = load_config(args.config, [*overrides, *([f"seed={args.seed}"] if args.seed is not None else [])])
    lam = rectified_settings(cfg.fusion)
    args.k = args.k or [lam.lambda_window, 5]
    bad = [k for k in args.k if not 2 <= k <= args.groups]
    if bad:
        parser.error(f"--k {bad}: each k must be in [2, --groups={args.groups}]")
    torch.set_num_threads(1)  # a small network on a shared machine
    started = time.perf_counter()
    samples, info = sample_groups(cfg, args)
    result = {
        "command": shlex.join([*prog.split(), *(sys.argv[1:] if argv is None else argv)]),
        "settings": {
            "config": str(args.config),
            "overrides": overrides,
            "seed": cfg.seed,
            "policy": f"checkpoint {args.checkpoint}" if args.checkpoint else f"the initial policy of seed {cfg.seed}",
            "groups": args.groups,
            "group_size": cfg.rollout.group_size,
            "k": args.k,
            "subsets": args.subsets,
            "bootstrap": args.bootstrap,
            "sketch_dim": args.sketch_dim,
            "level": lam.lambda_level,
            "min_groups": lam.lambda_min_groups,
        },
        **info,
    }
    result["analysis"] = analyse(samples, cfg, args)
    result["wall_s"] = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lambda_estimates.json").write_text(json.dumps(result, indent=2))
    text = markdown(result)
    (args.out / "lambda_estimates.md").write_text(text)
    print(text, flush=True)
    print(
        f"[done] {result['wall_s']:.0f} s, {result['execution_s'] / args.groups:.1f} s of execution per group",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How much of a GRPO step's gradient is signal? A probe at the shipped small VLA,
to size the episodes a step needs.

For each exploration setting, ``G`` groups of ``8`` episodes are sampled from training init states of
tasks 4 and 6 and simulated; each group's GRPO gradient (sparse success, advantages scaled per group,
``sequence_mean``, on-policy: ratio 1) is computed once. Two disjoint halves of the groups give two
independent estimates ``g_A``, ``g_B`` of the same expected gradient ``mu``; over random splits

    E[cos(g_A, g_B)] ~ |mu|^2 / (|mu|^2 + tr(Sigma) / n)          (n groups per half)

so ``rho = c / (1 - c)`` estimates the signal-to-noise ratio ``n |mu|^2 / tr(Sigma)`` at ``n`` groups,
and ``n * (c* / (1 - c*)) / rho`` the groups a half needs for a cosine ``c*`` (0.5: signal as large
as noise). Reported for all weights, the network alone and ``log_std`` alone.

    python -m experiments.libero_grpo.gradient_snr --settings step:1 chunk:1.6 --groups 32 --seed 5300
    python -m experiments.libero_grpo.gradient_snr --smoke      # every path, tiny, in seconds of simulation
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "plugins/libero/checkpoints/small_vla_dagger_t0-9_h1024.pt"
TASKS = [4, 6]


def group_gradients(policy: Any, rollouts: Any, rewards: np.ndarray) -> list[dict[str, torch.Tensor]]:
    """Each group's GRPO gradient, split into ``network`` and ``log_std`` (flat float32 vectors):
    ``-(1/N) sum_i A_i (1/T_i) sum_t grad log pi(a_it)`` over the group's rows, advantages
    ``(r - mean) / (std + 1e-6)`` within the group (all equal: zero)."""
    from wmrl_core.grpo import group_advantages

    adv = torch.as_tensor(group_advantages(rewards, rollouts.group_ids, scale=True), dtype=torch.float32)
    mask = rollouts.mask
    log_std = policy.model.log_std
    network = [p for p in policy.parameters() if p.requires_grad and p is not log_std]
    n_rows = len(rollouts)
    out = []
    for g in np.unique(rollouts.group_ids):
        rows = np.flatnonzero(rollouts.group_ids == g)
        policy.zero_grad()
        if float(adv[rows].abs().sum()) == 0.0:
            out.append({"network": None, "log_std": None})
            continue
        lp = policy.log_probs(_subset(rollouts, rows))
        m = mask[rows]
        per_row = (lp * m).sum(-1) / m.sum(-1).clamp_min(1.0)
        loss = -(adv[rows] * per_row).sum() / n_rows
        loss.backward()
        out.append(
            {
                "network": torch.cat([p.grad.reshape(-1) for p in network if p.grad is not None]).clone(),
                "log_std": log_std.grad.reshape(-1).clone(),
            }
        )
    return out


def _subset(rollouts: Any, rows: np.ndarray) -> Any:
    from wmrl_core.types import Rollouts

    return Rollouts(
        [rollouts.tasks[i] for i in rows],
        [rollouts.solutions[i] for i in rows],
        rollouts.group_ids[rows],
        rollouts.old_log_probs[rows],
        rollouts.mask[rows],
        extra=None,
    )


def split_cosines(grads: list[dict[str, Any]], part: str, splits: int, seed: int) -> dict[str, float]:
    """Mean cosine between the two halves' summed gradients over ``splits`` random halvings, and
    what it implies (see the module docstring)."""
    rng = np.random.default_rng(seed)
    dims = next((g[part].numel() for g in grads if g[part] is not None), 0)
    vectors = torch.stack([g[part] if g[part] is not None else torch.zeros(dims) for g in grads])
    n = len(grads) // 2
    cosines = []
    for _ in range(splits):
        order = rng.permutation(len(grads))
        a, b = vectors[order[:n]].sum(0), vectors[order[n : 2 * n]].sum(0)
        denom = float(a.norm() * b.norm())
        cosines.append(float(a @ b) / denom if denom > 0 else math.nan)
    finite = [c for c in cosines if math.isfinite(c)]
    if not finite:  # no group had a gradient (every group all-equal): nothing to measure
        return {
            "cosine": math.nan,
            "cosine_sd_over_splits": math.nan,
            "snr_at_half": math.nan,
            "groups_per_half_for_cos_0.5": math.nan,
        }
    c = float(np.mean(finite))
    rho = c / (1 - c) if c < 1 else math.inf
    return {
        "cosine": c,
        "cosine_sd_over_splits": float(np.std(finite)),
        "snr_at_half": rho,
        "groups_per_half_for_cos_0.5": n / rho if rho > 0 else math.inf,
    }


def probe(setting: str, groups: int, group_size: int, seed: int, env: Any, max_steps: int) -> dict[str, Any]:
    """Sample, simulate and measure one exploration setting ``noise:temperature``."""
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    noise, temperature = setting.split(":")
    torch.manual_seed(seed)
    policy = SmallVLAPolicy(
        env, checkpoint=str(CHECKPOINT), noise=noise, temperature=float(temperature), probe_size=0, max_steps=max_steps
    )
    inits = np.random.default_rng(seed).choice(40, size=-(-groups // len(TASKS)), replace=False)
    tasks = [t for t in env.tasks("train") if t.data["init_state"] in set(inits.tolist())][:groups]
    rollouts = policy.generate(tasks, group_size)
    started = time.time()
    outcomes = env.execute(rollouts.tasks, rollouts.solutions)
    wall = time.time() - started
    rewards = np.array([o.score if o.status == "ok" else np.nan for o in outcomes], dtype=float)
    grads = group_gradients(policy, rollouts, rewards)
    per_group = [rewards[rollouts.group_ids == g] for g in np.unique(rollouts.group_ids)]
    result = {
        "setting": setting,
        "groups": len(per_group),
        "group_size": group_size,
        "success": float(np.nanmean(rewards)),
        "all_equal_group_share": float(np.mean([np.nanstd(r) == 0 for r in per_group])),
        "simulation_wall_s": wall,
        "cpu_s_per_episode": float(np.mean([o.info.get("cost_s", math.nan) for o in outcomes])),
        **{part: split_cosines(grads, part, splits=200, seed=seed) for part in ("network", "log_std")},
    }
    print(json.dumps(result), flush=True)
    return result


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    from wmrl_libero.environment import LiberoEnvironment

    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", nargs="+", default=["step:1", "chunk:1.6"], help="noise:temperature each")
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=5300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "runs/libero_gradient_snr.json")
    ap.add_argument("--smoke", action="store_true", help="2 groups of 2, 40-step episodes (checks every path)")
    args = ap.parse_args(argv)
    groups, size, steps = (2, 2, 40) if args.smoke else (args.groups, args.group_size, 520)
    env = LiberoEnvironment(
        task_indices=TASKS,
        num_workers=args.workers,
        envs_per_worker=2,
        trajectory_states=0,
        max_episode_steps=steps,
    )
    try:
        results = [probe(s, groups, size, args.seed, env, steps) for s in args.settings]
    finally:
        env.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seed": args.seed, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

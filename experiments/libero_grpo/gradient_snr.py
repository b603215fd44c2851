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
    python -m experiments.libero_grpo.gradient_snr --report docs/results/libero/gradient_snr \
        --from experiments/libero_grpo/gradient_snr_seed5300.json experiments/libero_grpo/gradient_snr_seed5301.json
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


PAGE_FILES = ("README.md", "gradient_snr.png")


def _groups_text(value: float) -> str:
    return "none measurable" if not math.isfinite(value) or value <= 0 else f"{value:.0f}"


def page(records: list[dict[str, Any]]) -> str:
    """The results page: every setting of every probe round, one row each."""
    from wmrl_core.experiments.report import markdown_table, number

    rows = [
        [
            str(record["seed"]),
            f"`{r['setting']}`",
            number(r["success"]),
            f"{r['all_equal_group_share']:.0%}",
            f"{number(r['network']['cosine'], 2, signed=True)} ({number(r['network']['cosine_sd_over_splits'], 2)})",
            _groups_text(r["network"]["groups_per_half_for_cos_0.5"]),
            f"{number(r['log_std']['cosine'], 2, signed=True)} ({number(r['log_std']['cosine_sd_over_splits'], 2)})",
            _groups_text(r["log_std"]["groups_per_half_for_cos_0.5"]),
            number(r["cpu_s_per_episode"], 2),
        ]
        for record in records
        for r in record["results"]
    ]
    return "\n".join(
        [
            "# How much of a GRPO step's gradient is signal? LIBERO, the shipped small VLA",
            "",
            "A sizing probe for the GRPO recipe, not a claim that anything learns. Plan, committed before each round: "
            "[`PLAN_GRADIENT_SNR.md`](../../../../experiments/libero_grpo/PLAN_GRADIENT_SNR.md). Built from the "
            "committed JSONs by `python -m experiments.libero_grpo.gradient_snr --report docs/results/libero/gradient_snr "
            "--from experiments/libero_grpo/gradient_snr_seed5300.json experiments/libero_grpo/gradient_snr_seed5301.json`; "
            "a round runs with `python -m experiments.libero_grpo.gradient_snr --settings ... --groups 32 --seed S "
            "--out ...`. Machine: 2-core x86_64 CPU, physics only.",
            "",
            "Each setting (`noise:temperature`: a noise draw per action, `step`, or one per 4-action chunk, `chunk`, "
            "with the behaviour-cloning sigma multiplied by the temperature) samples 32 groups of 8 episodes from "
            "training init states of LIBERO-10 tasks 4 and 6 and simulates them; each group's GRPO gradient (sparse "
            "success, advantages scaled per group, `sequence_mean`, ratio 1) is computed once. The cosine between "
            "two disjoint halves of 16 groups, averaged over 200 random halvings (sd over halvings in brackets), "
            "estimates `|mu|^2 / (|mu|^2 + tr(Sigma)/16)`; from it, the groups a half would need for a cosine of 0.5 "
            "(signal as large as noise). The network's weights and the action `log_std` separately.",
            "",
            markdown_table(
                [
                    "seed",
                    "setting",
                    "success",
                    "all-equal groups",
                    "network: cosine (sd)",
                    "groups/half for 0.5",
                    "log_std: cosine (sd)",
                    "groups/half for 0.5",
                    "CPU-s/episode",
                ],
                rows,
                align="llrrrrrrr",
            ),
            "",
            "![cosine between halves, per setting](gradient_snr.png)",
            "",
            "What it does not show: each cosine is that of one parameter point (the base policy) and one seed; after "
            "updates the ratio changes. The split-to-split sd is not a seed-to-seed interval. A setting's gradient "
            "estimates the gradient of success *under that exploration*; how much of it carries over to the policy "
            "evaluated at its own sigma is what a training run measures.",
            "",
        ]
    )


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """Cosine between halves per setting (error bars: sd over halvings), network and ``log_std``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [(record["seed"], r) for record in records for r in record["results"]]
    labels = [f"{r['setting']}\n(seed {seed}, success {r['success']:.2f})" for seed, r in results]
    x = np.arange(len(results))
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(results)), 3.6))
    for offset, part in ((-0.15, "network"), (0.15, "log_std")):
        ax.errorbar(
            x + offset,
            [r[part]["cosine"] for _, r in results],
            yerr=[r[part]["cosine_sd_over_splits"] for _, r in results],
            fmt="o",
            capsize=3,
            label=part,
        )
    ax.axhline(0, color="gray", lw=0.8)
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("cosine between halves (16 groups each)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(paths: list[Path], out: Path) -> int:
    records = [json.loads(p.read_text()) for p in paths]
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text(page(records))
    plot(records, out / "gradient_snr.png")
    return 0


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
    ap.add_argument("--report", type=Path, metavar="DIR", help="no probing: the page in DIR from the --from JSONs")
    ap.add_argument("--from", dest="records", nargs="+", type=Path, default=[], help="probe JSONs for --report")
    args = ap.parse_args(argv)
    if args.report:
        if not args.records:
            ap.error("--report needs --from with at least one probe JSON")
        return report(args.records, args.report)
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

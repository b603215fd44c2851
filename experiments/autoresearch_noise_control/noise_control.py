"""Noise control for the program policy: does the optimiser learn signal, or collapse on noise?

For each learning rate x entropy coefficient (x KL coefficient) and seed, trains the program
policy twice in ``world_model`` mode with the quickstart's batch shapes (no Docker needed):

* ``noise``: rewards from the ``noise`` world model (i.i.d. uniform, no information). A good
  optimiser keeps most of the policy's entropy here; a collapse is an artefact of the
  optimiser, not learning.
* ``learned``: rewards from the shipped learned world model (``program-world-model``). Here
  the training reward should rise.

Each final policy is then measured on fresh samples of every training task: its exact
entropy (nats, summed over decisions) and its mean reward under the learned world model
(the training reward of the ``learned`` runs). Prints a markdown table (mean and 95%
t-interval over seeds) and writes a JSON file and a plot of entropy vs step to ``--out``.
Runs go through :func:`wmrl_core.experiments.runner.run_arms` (one arm per source and cell, seeds
outer), so the grid resumes: finished runs and their measurements are read back from ``--runs``.
The JSON file is every run's record; the study's ``page.py`` renders the table and the plot from it.

    wmrl experiment noise-control                      # the grid in docs/results/autoresearch
    wmrl experiment noise-control --lrs 0.03 --entropy-coefs 0 --seeds 0-0 --out /tmp/nc   # one cell
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from wmrl_autoresearch.experiments import config_path

from wmrl_core.components import make_components
from wmrl_core.experiments import report
from wmrl_core.experiments.runner import ArmRun, run_arms
from wmrl_core.experiments.stats import mean_ci95
from wmrl_core.grpo import rollout_entropy
from wmrl_core.metrics import read_metrics
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.trainer import extract_rewards

CONFIG = config_path("world_model.yaml")
SOURCES = {"noise": "noise", "learned": "program-world-model"}
"""Reward source of a run -> world model that scores its rollouts."""
COMMON = [
    "mode=world_model",
    "eval.every=0",
    "logging.progress=false",
    "logging.tensorboard=false",
    "checkpoint.every=0",
]


def cell_arms(cells: list[tuple[float, float, float]]) -> dict[str, list[str]]:
    """One arm per cell and reward source, named ``<source>-lr<lr>-ent<ent>-kl<kl>`` (the run
    folders are ``<arm>-seed<seed>``), cells outer and sources inner."""
    return {
        f"{source}-lr{lr:g}-ent{ent:g}-kl{kl:g}": [
            f"world_model.name={SOURCES[source]}",
            f"grpo.lr={lr}",
            f"grpo.entropy_coef={ent}",
            f"grpo.kl_coef={kl}",
        ]
        for lr, ent, kl in cells
        for source in SOURCES
    }


@torch.no_grad()
def measure_policy(cfg, policy_state: dict | None, samples_per_task: int = 16) -> dict[str, float]:
    """Exact entropy and learned-world-model reward of a policy (``None``: the initial one) on
    ``samples_per_task`` fresh samples of every training task."""
    cfg = copy.deepcopy(cfg)
    cfg.world_model.name = SOURCES["learned"]
    pm = get_plugin_manager()
    c = make_components(cfg, build_registry(pm), pm)
    try:
        if policy_state is not None:
            c.policy.load_state_dict(policy_state)
        tasks = c.environment.tasks(cfg.rollout.task_split)
        with torch.random.fork_rng():
            torch.manual_seed(10_007 + cfg.seed)
            rollouts = c.policy.generate(tasks, samples_per_task)
        entropy = rollout_entropy(c.policy.entropy(rollouts), rollouts.mask)
        rewards = extract_rewards(c.reward, rollouts.tasks, c.world_model.predict(rollouts.tasks, rollouts.solutions))
        return {"entropy": float(entropy.mean()), "learned_reward": float(np.nanmean(rewards))}
    finally:
        c.close()


def measure_run(run: ArmRun, wall_s: float) -> dict[str, Any]:
    """The measurements of one finished training run: its entropy and reward curves, and the
    initial and final policies' exact entropy and learned-world-model reward."""
    cfg = run.config
    records = [r for r in read_metrics(run.run_dir) if r["step"] > 0]
    final_state = torch.load(run.run_dir / "checkpoints" / "last.pt", weights_only=False)["policy"]
    initial = measure_policy(cfg, None)
    final = measure_policy(cfg, final_state)
    source = run.arm.name.split("-lr")[0]
    result = {
        "source": source,
        "lr": cfg.grpo.lr,
        "entropy_coef": cfg.grpo.entropy_coef,
        "kl_coef": cfg.grpo.kl_coef,
        "seed": run.seed,
        "entropy_curve": [r["policy/entropy"] for r in records],
        "train_reward_curve": [r["reward/train_mean"] for r in records],
        "initial": initial,
        "final": final,
        "entropy_kept": final["entropy"] / initial["entropy"],
        "learned_reward_gain": final["learned_reward"] - initial["learned_reward"],
        "wall_s": wall_s,
    }
    print(
        f"{source:7s} lr={result['lr']:g} ent={result['entropy_coef']:g} kl={result['kl_coef']:g} seed={run.seed}: "
        f"entropy {initial['entropy']:.2f} -> {final['entropy']:.2f} ({result['entropy_kept']:.0%}), learned-WM "
        f"reward {initial['learned_reward']:.3f} -> {final['learned_reward']:.3f} [{wall_s:.0f} s]",
        flush=True,
    )
    return result


def run_grid(args, cells: list[tuple[float, float, float]]) -> list[dict[str, Any]]:
    """Every cell and source for every seed, trained and measured (or read back)."""
    mark = time.perf_counter()

    def on_run(run: ArmRun) -> None:
        nonlocal mark
        mark = time.perf_counter()

    runs = run_arms(
        args.config,
        cell_arms(cells),
        seeds=args.seeds,
        runs_dir=args.runs,
        overrides=[*COMMON, f"steps={args.steps}", *args.override],
        evaluate=lambda run: measure_run(run, time.perf_counter() - mark),
        on_run=on_run,
    )
    return [run.record for run in runs]


def _ci(values: list[float], fmt: str = "{:.3f}") -> str:
    mean, half = mean_ci95(values)
    return f"{fmt.format(mean)} ± {fmt.format(half)}"


def table(results: list[dict[str, Any]], cells: list[tuple[float, float, float]], threshold: float) -> str:
    lines = [
        "| lr | entropy_coef | kl_coef | noise: entropy kept | noise: learned-WM reward gain "
        "| learned: entropy kept | learned: learned-WM reward gain | noise control passes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for lr, ent, kl in cells:
        by = {
            s: [r for r in results if (r["source"], r["lr"], r["entropy_coef"], r["kl_coef"]) == (s, lr, ent, kl)]
            for s in SOURCES
        }
        kept_noise = [r["entropy_kept"] for r in by["noise"]]
        passes = bool(kept_noise) and min(kept_noise) >= threshold
        lines.append(
            f"| {lr:g} | {ent:g} | {kl:g} | {_ci(kept_noise, '{:.2f}')} "
            f"| {_ci([r['learned_reward_gain'] for r in by['noise']])} "
            f"| {_ci([r['entropy_kept'] for r in by['learned']], '{:.2f}')} "
            f"| {_ci([r['learned_reward_gain'] for r in by['learned']])} "
            f"| {'yes' if passes else 'no'} ({sum(k >= threshold for k in kept_noise)}/{len(kept_noise)} seeds) |"
        )
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], cells: list[tuple[float, float, float]], path: Path) -> None:
    """Entropy vs step, mean over seeds: one row per reward source, one column per learning rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lrs = sorted({lr for lr, _, _ in cells})
    fig, axes = plt.subplots(
        len(SOURCES), len(lrs), figsize=(3.6 * len(lrs), 6.5), sharex=True, sharey=True, squeeze=False
    )
    for row, source in enumerate(SOURCES):
        for col, lr in enumerate(lrs):
            ax = axes[row][col]
            for cell_lr, ent, kl in cells:
                curves = [
                    r["entropy_curve"]
                    for r in results
                    if (r["source"], r["lr"], r["entropy_coef"], r["kl_coef"]) == (source, lr, ent, kl)
                ]
                if cell_lr == lr and curves:
                    mean = np.mean(np.asarray(curves, dtype=float), axis=0)
                    ax.plot(np.arange(1, mean.size + 1), mean, marker=".", label=f"ent={ent:g}, kl={kl:g}")
            ax.set_title(f"{'pure noise' if source == 'noise' else 'learned world model'}, lr={lr:g}", fontsize=9)
            ax.grid(alpha=0.3)
            if row == len(SOURCES) - 1:
                ax.set_xlabel("step")
            if col == 0:
                ax.set_ylabel("policy entropy (nats)")
            if row == 0:
                ax.legend(fontsize=7)
    fig.suptitle(
        "program policy entropy per step (mean over seeds; the dashed line is 80% of the initial 9.53)", fontsize=10
    )
    for ax in axes.flat:
        ax.axhline(0.8 * 9.534, color="grey", ls="--", lw=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None, prog: str = "wmrl experiment noise-control") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=CONFIG, help="base config (batch shapes and policy)")
    parser.add_argument("--lrs", type=float, nargs="+", default=[0.003, 0.01, 0.03])
    parser.add_argument("--entropy-coefs", type=float, nargs="+", default=[0.0, 0.01, 0.03, 0.1])
    parser.add_argument("--kl-coefs", type=float, nargs="+", default=[0.0])
    parser.add_argument(
        "--cells",
        nargs="+",
        default=None,
        metavar="LR,ENT,KL",
        help="explicit cells instead of the product of --lrs x --entropy-coefs x --kl-coefs",
    )
    parser.add_argument(
        "--seeds", type=report.seed_list, default=report.seed_list("0-2"), help="seeds, a list or ranges (default 0-2)"
    )
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--threshold", type=float, default=0.8, help="share of initial entropy a noise run must keep")
    parser.add_argument("--runs", type=Path, default=Path("runs/noise_control"), help="run directories (cache)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/autoresearch"), help="table, json and plot")
    parser.add_argument("--override", nargs="*", default=[], help="extra key=value config overrides for every run")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny networks: extra threads only contend on a shared machine

    cells = (
        [tuple(float(x) for x in cell.split(",")) for cell in args.cells]
        if args.cells
        else [(lr, ent, kl) for lr in args.lrs for ent in args.entropy_coefs for kl in args.kl_coefs]
    )
    if any(len(cell) != 3 for cell in cells):
        parser.error(f"--cells takes LR,ENT,KL triples, got {args.cells}")
    results = run_grid(args, cells)
    args.out.mkdir(parents=True, exist_ok=True)
    text = table(results, cells, args.threshold)
    print(text)
    (args.out / "noise_control.json").write_text(json.dumps(results, indent=1))
    plot(results, cells, args.out / "noise_control_entropy.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

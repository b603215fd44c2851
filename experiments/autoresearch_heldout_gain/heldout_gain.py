"""Held-out gain of the AutoResearch main job against its pure-noise control, over seeds.

For each seed, trains the main job's config (``configs/autoresearch/quickstart.yaml`` unless
``--config``) twice, identical in everything but the rewards the update sees:

* ``wmrl``: the config as shipped (learned world model, anchors executed for real).
* ``noise``: the same config, same mode, tasks, anchor groups, calibration, fusion and
  optimiser, but every reward, real or predicted, replaced by an i.i.d. ``U(0, 1)`` draw
  (the reward extractor ``noise-reward``, :mod:`wmrl_core.experiments.noise`). Since that reward
  ignores outcomes, the world model is ``noise`` and the anchors' executions are skipped (environment
  ``autoresearch-unexecuted``: every anchor comes back ``ok``, as nearly all do); neither
  changes what reaches the update. Whatever this arm does to the held-out score is what the
  optimiser does without information, e.g. the drift towards a few programs.

Arms run through :func:`wmrl_core.experiments.runner.run_arms` (seeds outer; the noise arm first
in each seed, it executes nothing in training). Then every final policy is scored on the
held-out split by real execution of ``--samples`` programs per task. The untrained program policy is the uniform distribution
over programs whatever the seed (its output heads start at zero), so one "before" evaluation
serves every seed and arm. Every evaluation draws its programs with the same sampling seed
(common random numbers: the policy samples each decision by inverse CDF from the same uniform
draws, so where two policies agree they sample the same program), and evaluation executions go
through one execution cache (``--cache``): a repeated (task, program) replays its first
execution. So the evaluation is deterministic per (task, program), a program that training
did not change costs nothing to score again, the evaluation noise largely cancels in gains
and differences, and an interrupted evaluation resumes where it stopped.

Reported per seed: ``gain = after - before`` per arm, and ``difference = after(wmrl) -
after(noise)`` (= the difference of the gains: the shared "before" cancels), with the
evaluation's own noise beside it, a bootstrap over the programs of each task (paired across
the two arms by sample index). Across seeds: mean and 95% t-interval. Writes a JSON record
to ``--out``, and the markdown table and the plot rendered from it (:func:`write_page`; the
study's ``page.py`` renders them again from a committed record).

    wmrl experiment heldout-gain                                  # what docs/results/autoresearch shows
    wmrl experiment heldout-gain --seeds 0-0 --samples 1 --override steps=2 --runs /tmp/hg --out /tmp/hg
    wmrl experiment heldout-gain --override world_model.name=NEW   # the same benchmark with another world model

Resumable: training runs resume from their checkpoints, finished runs and evaluations are
read back from ``--runs`` (each arm-seed's training record in its ``record.json``, its
evaluation in ``eval_after.json``). The config is frozen into ``RUNS/config.yaml`` (with the overrides) at the
first start, and a resumed benchmark uses that copy, so editing the shipped config meanwhile
cannot mix two settings in one result; ``--samples`` and ``--max-tasks`` are kept in
``RUNS/settings.json`` and a resumed benchmark with others is refused.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from wmrl_autoresearch.experiments import config_path

from wmrl_core import hookimpl
from wmrl_core.checkpoint import load_checkpoint
from wmrl_core.components import make_components
from wmrl_core.config import load_config
from wmrl_core.experiments import report
from wmrl_core.experiments.runner import ArmRun, check_settings, run_arms
from wmrl_core.experiments.stats import mean_ci95, paired_bootstrap_se
from wmrl_core.metrics import read_metrics
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.trainer import evenly_spaced, extract_rewards
from wmrl_core.types import Outcome, as_outcome

CONFIG = config_path("quickstart.yaml")
ARMS = {
    "noise": ["world_model.name=noise", "reward.name=noise-reward", "environment.name=autoresearch-unexecuted"],
    "wmrl": [],
}
"""Arm -> config overrides on top of the main job's config, in run order within a seed (the noise
arm first: it executes nothing in training)."""
COMMON = ["eval.every=0", "logging.tensorboard=false", "checkpoint.every=2"]
EVAL_SEED = 7_000_003
"""Sampling seed of every evaluation (common random numbers)."""
CHUNK_TASKS = 4
"""Tasks executed per call during evaluation (each call is flushed to the cache)."""


# ------------------------------------------------------------------ the noise arm's environment


def unexecuted_environment(**kwargs: Any):
    """The AutoResearch environment (same tasks and settings) whose ``execute`` runs nothing:
    every outcome is ``ok`` with score 0 and no cost. Only for the noise arm, whose reward
    ignores outcomes."""
    from wmrl_autoresearch.environment import AutoResearchEnvironment

    class UnexecutedEnvironment(AutoResearchEnvironment):
        def execute(self, tasks, solutions):
            return [Outcome("ok", 0.0, {"cost_s": 0.0}) for _ in solutions]

    return UnexecutedEnvironment(**kwargs)


class _NoiseArmPlugin:
    @hookimpl
    def wmrl_register_environments(self, table):
        table.add(
            "autoresearch-unexecuted",
            unexecuted_environment,
            description="control: the autoresearch tasks with execution skipped (wmrl experiment heldout-gain)",
        )


@functools.cache
def plugin_manager():
    """The installed plugins and the noise arm's environment, loaded once per process: an
    experiment runs for hours, and entry points re-read at each evaluation would pick up (and can
    fail on) a package installed while it runs."""
    return get_plugin_manager(extra_plugins=[_NoiseArmPlugin()])


# ------------------------------------------------------------------ training


def train_record(run: ArmRun, wall_s: float) -> dict[str, Any]:
    """What the report keeps of one arm-seed's training: entropy and reward curves, executions."""
    records = [r for r in read_metrics(run.run_dir) if r["step"] > 0]
    last = records[-1]
    result = {
        "arm": run.arm.name,
        "seed": run.seed,
        "steps": run.config.steps,
        "entropy_curve": [r.get("policy/entropy") for r in records],
        "train_reward_curve": [r.get("reward/train_mean") for r in records],
        "executions": last.get("compute/execution_items"),
        "execution_s": last.get("compute/execution_s"),
        "wall_s_last_invocation": wall_s,
    }
    print(
        f"[train] {run.arm.name} seed {run.seed}: entropy {result['entropy_curve'][0]:.2f} -> "
        f"{result['entropy_curve'][-1]:.2f}, {result['executions'] if run.arm.name != 'noise' else 'no'} real "
        f"executions [{wall_s:.0f} s]",
        flush=True,
    )
    return result


# ------------------------------------------------------------------ evaluation


def eval_config(args):
    """The main job's environment and policy, in ``real`` mode (no world model is built), with
    the execution cache ``args.cache`` (``None``: none, every program executed)."""
    cache = "null" if args.cache is None else args.cache
    return load_config(
        args.config,
        [*COMMON, "mode=real", "world_model=null", f"environment.cache={cache}", *args.override],
    )


@torch.no_grad()
def evaluate_policy(args, policy_state: dict | None, sampling_seed: int, path: Path, label: str) -> dict[str, Any]:
    """Real execution of ``--samples`` programs per held-out task; one record per program.

    Programs are drawn in one call (so they depend only on the policy and ``sampling_seed``)
    and executed ``CHUNK_TASKS`` tasks at a time; an interrupted evaluation draws the same
    programs again and replays the executed ones from the cache."""
    if path.exists():
        return json.loads(path.read_text())
    cfg = eval_config(args)
    pm = plugin_manager()
    c = make_components(cfg, build_registry(pm), pm)
    try:
        if policy_state is not None:
            c.policy.load_state_dict(policy_state)
        tasks = evenly_spaced(c.environment.tasks(cfg.eval.split), args.max_tasks)
        k = args.samples
        with torch.random.fork_rng():
            torch.manual_seed(sampling_seed)
            rollouts = c.policy.generate(tasks, k)
        start = time.perf_counter()
        records = []
        for first in range(0, len(tasks), CHUNK_TASKS):
            idx = list(range(first * k, min(first + CHUNK_TASKS, len(tasks)) * k))
            chunk_tasks = [rollouts.tasks[i] for i in idx]
            outcomes = [as_outcome(o) for o in c.environment.execute(chunk_tasks, [rollouts.solutions[i] for i in idx])]
            rewards = extract_rewards(c.reward, chunk_tasks, outcomes)
            for j, (task, outcome, reward) in enumerate(zip(chunk_tasks, outcomes, rewards, strict=True)):
                records.append(
                    {
                        "task": task.id,
                        "sample": (idx[j]) % k,
                        "status": str(outcome.status),
                        "reward": None if math.isnan(reward) else float(reward),
                        "cost_s": outcome.info.get("cost_s"),
                        "container_cpu_s": outcome.info.get("resources", {}).get("container_cpu_s"),
                        "replayed": bool(outcome.info.get("replayed", False)),
                    }
                )
            print(
                f"[eval] {label}: {min(first + CHUNK_TASKS, len(tasks))}/{len(tasks)} tasks "
                f"[{time.perf_counter() - start:.0f} s]",
                flush=True,
            )
    finally:
        c.close()
    result = {
        "label": label,
        "sampling_seed": sampling_seed,
        "samples_per_task": k,
        "tasks": len(tasks),
        "wall_s": time.perf_counter() - start,
        "records": records,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return result


def reward_matrix(evaluation: dict[str, Any]) -> tuple[list[str], np.ndarray]:
    """(task ids, rewards of shape (tasks, samples)); NaN where an execution gave no reward."""
    tasks = sorted({r["task"] for r in evaluation["records"]})
    row = {t: i for i, t in enumerate(tasks)}
    m = np.full((len(tasks), evaluation["samples_per_task"]), np.nan)
    for r in evaluation["records"]:
        m[row[r["task"]], r["sample"]] = np.nan if r["reward"] is None else r["reward"]
    return tasks, m


def summarize_eval(evaluation: dict[str, Any]) -> dict[str, Any]:
    _, m = reward_matrix(evaluation)
    recs = evaluation["records"]
    return {
        "mean": float(np.nanmean(m)),
        "se": paired_bootstrap_se([m], [1.0]),
        "ok_fraction": float(np.mean([r["status"] == "ok" for r in recs])),
        "programs": len(recs),
        "replayed": int(sum(r["replayed"] for r in recs)),
        "cost_s": float(sum(r["cost_s"] or 0.0 for r in recs)),
        "container_cpu_s": float(sum(r.get("container_cpu_s") or 0.0 for r in recs if not r["replayed"])),
    }


# ------------------------------------------------------------------ report


def _ci(values: list[float]) -> str:
    mean, half = mean_ci95(values)
    return f"{mean:+.3f} ± {half:.3f}"


def summarize(before: dict, seeds: list[dict]) -> dict[str, Any]:
    """The report's numbers: the "before" evaluation's summary, one row per seed (both arms'
    evaluations, gains, their difference with its evaluation s.e., the training records) and the
    means with 95% t-intervals over seeds."""
    b = summarize_eval(before)
    rows = []
    for s in seeds:
        w, n = summarize_eval(s["eval"]["wmrl"]), summarize_eval(s["eval"]["noise"])
        _, mw = reward_matrix(s["eval"]["wmrl"])
        _, mn = reward_matrix(s["eval"]["noise"])
        rows.append(
            {
                "seed": s["seed"],
                "after_wmrl": w,
                "after_noise": n,
                "gain_wmrl": w["mean"] - b["mean"],
                "gain_noise": n["mean"] - b["mean"],
                "difference": w["mean"] - n["mean"],
                "difference_se": paired_bootstrap_se([mw, mn], [1.0, -1.0]),
                "entropy_wmrl": s["train"]["wmrl"]["entropy_curve"][-1],
                "entropy_noise": s["train"]["noise"]["entropy_curve"][-1],
                "train": s["train"],
            }
        )
    summary = {}
    if rows:
        summary = {
            "seeds": len(rows),
            "gain_wmrl": mean_ci95([r["gain_wmrl"] for r in rows]),
            "gain_noise": mean_ci95([r["gain_noise"] for r in rows]),
            "difference": mean_ci95([r["difference"] for r in rows]),
            "evaluation_se_of_difference": float(np.sqrt(np.mean([r["difference_se"] ** 2 for r in rows]))),
        }
    return {"before": b, "seeds": rows, "summary": summary}


def table(result: dict[str, Any], samples: int) -> str:
    """The markdown table of :func:`summarize`'s ``result`` (``samples``: programs per task and
    evaluation, the "before" one included, so its programs are ``samples`` per held-out task)."""
    b = result["before"]
    lines = [
        f"Held-out split: {b['programs'] // samples} tasks; before: {b['programs']} programs of the untrained "
        f"(uniform) policy, mean {b['mean']:.3f} (bootstrap s.e. {b['se']:.3f}); after: {samples} programs per task "
        "per arm.",
        "",
        "| seed | after, wmrl | after, noise | gain, wmrl | gain, noise | difference (wmrl - noise) "
        "| evaluation s.e. of the difference | final entropy wmrl / noise (nats) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = result["seeds"]
    for row in rows:
        w, n = row["after_wmrl"], row["after_noise"]
        lines.append(
            f"| {row['seed']} | {w['mean']:.3f} ± {w['se']:.3f} | {n['mean']:.3f} ± {n['se']:.3f} "
            f"| {row['gain_wmrl']:+.3f} | {row['gain_noise']:+.3f} | {row['difference']:+.3f} "
            f"| {row['difference_se']:.3f} | {row['entropy_wmrl']:.2f} / {row['entropy_noise']:.2f} |"
        )
    if rows:
        summary = result["summary"]
        mean, half = summary["difference"]
        lines.append(
            f"| **mean ± 95% t-interval ({len(rows)} seeds)** | | | {_ci([r['gain_wmrl'] for r in rows])} "
            f"| {_ci([r['gain_noise'] for r in rows])} | **{mean:+.3f} ± {half:.3f}** "
            f"| {summary['evaluation_se_of_difference']:.3f} (rms over seeds) | |"
        )
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    """Left: held-out reward before and after per seed and arm (bootstrap s.e. bars); right: the
    difference per seed with its evaluation s.e., and the mean with its 95% t-interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["seeds"]
    b = result["before"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    for i, row in enumerate(rows):
        for dx, arm, color in ((-0.1, "wmrl", "tab:blue"), (0.1, "noise", "tab:grey")):
            a = row[f"after_{arm}"]
            ax.errorbar(i + dx, a["mean"], yerr=a["se"], fmt="o", color=color, label=arm if i == 0 else None)
    ax.axhline(b["mean"], color="black", ls="--", lw=1, label="before (untrained)")
    ax.axhspan(b["mean"] - b["se"], b["mean"] + b["se"], color="black", alpha=0.1)
    ax.set_xticks(range(len(rows)), [f"seed {r['seed']}" for r in rows])
    ax.set_ylabel("held-out mean reward (real execution)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    diffs = [r["difference"] for r in rows]
    bx.errorbar(range(len(rows)), diffs, yerr=[r["difference_se"] for r in rows], fmt="o", color="tab:blue")
    if rows:
        mean, half = result["summary"]["difference"]
        bx.errorbar([len(rows)], [mean], yerr=[half], fmt="s", color="black", capsize=4)
    bx.axhline(0, color="grey", lw=0.8)
    bx.set_xticks(range(len(rows) + 1), [f"seed {r['seed']}" for r in rows] + ["mean (95% CI)"])
    bx.set_ylabel("after(wmrl) - after(noise)")
    bx.grid(alpha=0.3)
    fig.suptitle("AutoResearch held-out gain: WMRL vs the same settings on pure-noise rewards", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


TABLE, RECORD, PLOT = "heldout_gain_table.md", "heldout_gain.json", "heldout_gain.png"
"""The page's files in ``--out``: the table and the plot are rendered from the record (:func:`write_page`)."""


def write_page(result: dict[str, Any], out: Path) -> str:
    """The table and the plot of ``result`` (the record :func:`write_outputs` keeps) in ``out``;
    returns the table."""
    text = table(result, result["settings"]["samples_per_task"])
    out.mkdir(parents=True, exist_ok=True)
    (out / TABLE).write_text(text + "\n")
    plot(result, out / PLOT)
    return text


def write_outputs(args, before: dict, seeds: list[dict]) -> None:
    result = summarize(before, seeds)
    result["settings"] = {
        "config": str(args.config),
        "config_yaml": Path(args.config).read_text(),
        "samples_per_task": args.samples,
        "max_tasks": args.max_tasks,
        "cache": str(args.cache),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / RECORD).write_text(json.dumps(result, indent=1, default=float))
    print(write_page(json.loads((args.out / RECORD).read_text()), args.out), flush=True)


def freeze_config(config: Path, overrides: list[str], frozen: Path) -> Path:
    """``frozen`` holds ``config`` with ``overrides`` applied, written at the first start; a
    resumed benchmark must be given the same ``overrides`` (or none)."""
    from omegaconf import OmegaConf

    merged = OmegaConf.merge(OmegaConf.load(config), OmegaConf.from_dotlist(overrides))
    if frozen.exists():
        if overrides and OmegaConf.load(frozen) != merged:
            raise SystemExit(
                f"{frozen} holds other settings than {config} with {overrides}; resume without overrides "
                f"or give another --runs"
            )
        return frozen
    frozen.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(merged, frozen)
    return frozen


def settings(args) -> dict[str, Any]:
    """What every arm-seed's evaluation shares besides the config (``RUNS/settings.json``)."""
    return {"samples_per_task": args.samples, "max_tasks": args.max_tasks}


def run_seeds(args, before: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Train and evaluate both arms for every seed (``--report-only``: collect the finished ones);
    writes the report after each whole seed. Returns ``[{"seed", "train": {arm: record},
    "eval": {arm: evaluation}}]`` for the seeds whose arms are all finished, stopping at the
    first that is not."""
    started = mark = time.perf_counter()
    found: dict[int, dict[str, ArmRun]] = {}
    seeds: list[dict[str, Any]] = []

    def evaluate(run: ArmRun) -> dict[str, Any]:
        record = train_record(run, time.perf_counter() - mark)
        state = load_checkpoint(run.run_dir / "checkpoints")["policy"]
        label = f"{run.arm.name} seed {run.seed}"
        evaluate_policy(args, state, EVAL_SEED, run.run_dir / "eval_after.json", label)
        return {"train": record}

    def on_run(run: ArmRun) -> None:
        nonlocal mark
        mark = time.perf_counter()
        found.setdefault(run.seed, {})[run.arm.name] = run
        if len(found[run.seed]) < len(ARMS) or len(seeds) != args.seeds.index(run.seed):
            return
        runs = found[run.seed]
        seeds.append(
            {
                "seed": run.seed,
                "train": {arm: runs[arm].record["train"] for arm in ARMS},
                "eval": {arm: json.loads((runs[arm].run_dir / "eval_after.json").read_text()) for arm in ARMS},
            }
        )
        if before is not None and not args.report_only:
            write_outputs(args, before, seeds)
            print(f"[heldout_gain] seed {run.seed} done [{time.perf_counter() - started:.0f} s]", flush=True)

    run_arms(
        args.config,
        ARMS,
        seeds=args.seeds,
        runs_dir=args.runs,
        overrides=COMMON,
        evaluate=evaluate,
        on_run=on_run,
        settings=settings(args),
        report_only=args.report_only,
        plugin_manager=plugin_manager,
        progress=True,
    )
    return seeds


def main(argv: list[str] | None = None, prog: str = "wmrl experiment heldout-gain") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=CONFIG, help="the main job's config")
    parser.add_argument(
        "--seeds", type=report.seed_list, default=report.seed_list("0-2"), help="seeds, a list or ranges (default 0-2)"
    )
    parser.add_argument("--samples", type=int, default=4, help="programs per held-out task and evaluation")
    parser.add_argument(
        "--max-tasks",
        type=int,
        default=None,
        help="evaluate on N held-out tasks, evenly spaced in the split's order (as eval.max_tasks)",
    )
    parser.add_argument("--runs", type=Path, default=Path("runs/heldout_gain"), help="run directories (resumable)")
    parser.add_argument("--cache", type=Path, default=None, help="execution cache (default: RUNS/eval_cache.jsonl)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/autoresearch"), help="table, json and plot")
    parser.add_argument("--report-only", action="store_true", help="report the finished seeds; run nothing")
    parser.add_argument("--override", nargs="*", default=[], help="extra key=value config overrides for every run")
    args = parser.parse_args(argv)
    args.cache = args.cache or args.runs / "eval_cache.jsonl"
    args.config = freeze_config(args.config, args.override, args.runs / "config.yaml")
    args.override = []
    torch.set_num_threads(1)  # tiny networks: extra threads only contend on a shared machine

    before_path = args.runs / "eval_before.json"
    check_settings(args.runs, settings(args))  # before the "before" evaluation, which they also fix
    if args.report_only and not before_path.exists():
        raise SystemExit(f"{before_path} does not exist yet: nothing to report")
    before = evaluate_policy(args, None, EVAL_SEED, before_path, "before")
    seeds = run_seeds(args, before)
    if args.report_only or not seeds:
        write_outputs(args, before, seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

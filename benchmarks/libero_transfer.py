"""The LIBERO-Long transfer experiment: base policy vs four post-training arms, same base checkpoint.

Arms (all from ``--base``; ``configs/libero/libero_long.yaml`` unless ``--config``):

* ``base``: no RL, only evaluated;
* ``real``: GRPO on the simulator's sparse success, every group simulated;
* ``world_model``: GRPO on the imagination world model's raw predictions, no simulator;
* ``wmrl-imagination``: WMRL with the imagination world model, ~10% simulated anchor groups;
* ``wmrl-progress``: WMRL with ``libero-progress`` (the paper's arm): every group simulated,
  the progress of the executed trajectory calibrated and fused against the anchors' success;
* ``noise_control``: ``world_model``'s settings on pure-noise scores (the control of every gain).

Seeds outer, arms inner (machine noise hits every arm alike). Every arm-seed is its own run
directory under ``--out``: training resumes from its checkpoint, evaluations already written
are kept, so an interrupted experiment continues where it stopped; ``--archive`` keeps each
finished arm-seed's results (no checkpoint, a few kB) in a folder that can be committed, so an
experiment longer than one machine's life resumes on the next one. Evaluation samples the
policy (as in training) ``--rollouts`` times from each init state of the training split
(``--train-init``) and of the held-out split (``--heldout-init``, LIBERO's 40-49), before
(the ``base`` arm of the same seed) and after. Reported per arm: success with 95% intervals
(Wilson for the pooled episodes, t over seeds), simulator / world-model / policy seconds from
the training ledger (declared cost) and their wall time, and a plot of held-out success
against simulator seconds; then the analysis fixed before the last seed (``analysis`` in
``wmrl_libero.transfer_report``, which makes the report): which
arms learn beyond the noise control, and whether ``wmrl-imagination`` meets the compute floor.
Writes ``<name>.md``, ``<name>.json``, ``<name>.png`` (success against simulator seconds) and
``<name>_minus_control.png`` (each arm minus the control, per seed) to ``--docs``.

    python benchmarks/libero_transfer.py --base plugins/libero/checkpoints/small_vla_dagger_t0-9.pt \\
        --wm plugins/libero/checkpoints/libero_wm_t0-9.pt --seeds 0,1,2 --tasks 0-9 --out runs/libero_transfer
    ... --quick          # every arm end to end, one task, 2 steps, tiny groups (the CI check)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from wmrl_libero.transfer_report import (
    LEDGER_KEYS,
    analysis,
    anchor_diagnostics,
    markdown,
    plot,
    plot_minus_control,
    score_trend,
    summarize,
)

ROOT = Path(__file__).resolve().parents[1]

ARMS: dict[str, list[str] | None] = {
    "base": None,
    "real": ["mode=real"],
    "world_model": ["mode=world_model"],
    "wmrl-imagination": ["mode=wmrl", "world_model.name=libero-imagination", "anchors.fraction=0.1"],
    "wmrl-progress": ["mode=wmrl", "world_model.name=libero-progress", "anchors.fraction=0.5"],
    # the control of every gain: the world_model arm's settings (imagined episodes, so that the
    # rollouts have log-probs) scored i.i.d. U(0, 1); what this arm "learns" is the optimiser's drift
    "noise_control": ["mode=world_model", "world_model.kwargs.noise_scores=true"],
}
"""Training overrides per arm (``None``: not trained)."""


def parse_ints(text: str) -> list[int]:
    """``"0-3,7"`` -> ``[0, 1, 2, 3, 7]``."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _config(args, arm: str, seed: int, run_dir: Path):
    from wmrl_core.config import load_config

    overrides = [
        *(ARMS[arm] or []),
        f"seed={seed}",
        f"run_dir={run_dir}",
        f"policy.kwargs.checkpoint={args.base}",
        f"world_model.kwargs.checkpoint={args.wm}",
        f"environment.kwargs.task_indices=[{','.join(map(str, args.tasks))}]",
        "resume=true",
        *args.override,
    ]
    if args.steps:
        overrides.append(f"steps={args.steps}")
    return load_config(args.config, overrides)


def train_arm(args, arm: str, seed: int, run_dir: Path) -> dict[str, Any]:
    """Train (or resume, or skip when finished) one arm-seed; returns its ledger totals."""
    from wmrl_core.metrics import read_metrics
    from wmrl_core.trainer import train

    cfg = _config(args, arm, seed, run_dir)
    summary = run_dir / "summary.json"
    if not (summary.exists() and json.loads(summary.read_text())["steps"] == cfg.steps):
        start = time.process_time()
        train(cfg)
        (run_dir / "train_cpu_s.txt").write_text(f"{time.process_time() - start:.1f}\n")
    last = read_metrics(run_dir)[-1]
    return {k: float(last.get(v) or 0.0) for k, v in LEDGER_KEYS.items()}


ARCHIVED_FILES = (
    "config.yaml",
    "summary.json",
    "metrics.jsonl",
    "anchor_pairs.jsonl",
    "train_cpu_s.txt",
    "eval_train.json",
    "eval_heldout.json",
)
"""What of a finished arm-seed survives in ``--archive`` (no checkpoint: a few kB, fit for git)."""

SETTINGS_KEYS = (
    "base",
    "wm",
    "config",
    "suite",
    "tasks",
    "train_init",
    "heldout_init",
    "rollouts",
    "steps",
    "max_episode_steps",
    "quick",
)
"""The arguments every arm-seed of one archive must share (``settings.json``), with the user's
``--override`` list; ``--workers`` is not one (which worker runs an episode does not change it)."""


def experiment_settings(args) -> dict[str, Any]:
    """The settings that make arm-seeds comparable, paths relative to the repository when inside it."""

    def rel(path: str) -> str:
        p = Path(path).resolve()
        return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)

    out = {k: getattr(args, k) for k in SETTINGS_KEYS}
    out.update(base=rel(args.base), wm=rel(args.wm), config=rel(args.config), overrides=list(args.user_override))
    return out


def check_archive_settings(archive: Path, settings: dict[str, Any]) -> None:
    """Write ``archive/settings.json`` the first time; afterwards refuse other settings, so that an
    archive never pools arm-seeds of different experiments."""
    path = archive / "settings.json"
    if not path.exists():
        archive.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2) + "\n")
        return
    stored = json.loads(path.read_text())
    differ = sorted(k for k in set(stored) | set(settings) if stored.get(k) != settings.get(k))
    if differ:
        detail = "; ".join(f"{k}: archived {stored.get(k)!r}, now {settings.get(k)!r}" for k in differ)
        raise SystemExit(
            f"--archive {archive} holds arm-seeds of another experiment ({detail}); "
            "pass the same arguments, or another --archive folder"
        )


def is_finished(run_dir: Path) -> bool:
    """Both evaluations written: the arm-seed is done (training, when it trains, came first)."""
    return all((run_dir / f"eval_{s}.json").exists() for s in ("train", "heldout"))


def archive_run(run_dir: Path, dest: Path) -> None:
    """Copy a finished arm-seed's results (``ARCHIVED_FILES`` present) to ``dest``."""
    if not is_finished(run_dir):
        raise ValueError(f"{run_dir} is not evaluated yet; only finished arm-seeds are archived")
    _copy_results(run_dir, dest)


def restore_run(src: Path, run_dir: Path) -> bool:
    """Put an archived arm-seed back into ``run_dir`` (a wiped machine: the run folder is gone) so
    that training and evaluation are skipped; False when ``src`` holds no finished arm-seed or
    ``run_dir`` is already finished."""
    if not is_finished(src) or is_finished(run_dir):
        return False
    if (run_dir / "checkpoints").exists():
        raise SystemExit(
            f"{run_dir} holds an unfinished run and {src} a finished one of the same arm-seed; "
            f"remove one of them (rm -r {run_dir}, or the archived copy) and run again"
        )
    _copy_results(src, run_dir)
    return True


def _copy_results(src: Path, dest: Path) -> None:
    """Copy the ``ARCHIVED_FILES`` that ``src`` holds into ``dest`` (made if missing)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ARCHIVED_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dest / name)


def _policy(args, run_dir: Path | None):
    """The base policy, with the arm's trained weights when ``run_dir`` holds a checkpoint."""
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.checkpoint import has_checkpoint, load_checkpoint

    policy = SmallVLAPolicy(checkpoint=args.base, max_steps=args.max_episode_steps)
    if run_dir is not None and has_checkpoint(run_dir / "checkpoints"):
        policy.load_state_dict(load_checkpoint(run_dir / "checkpoints")["policy"])
    return policy


def evaluate_arm(args, env, arm: str, seed: int, run_dir: Path) -> dict[str, dict[str, int]]:
    """Success counts ``{split: {"successes", "episodes", "infrastructure_failures"}}``; each
    split's result is written to ``run_dir/eval_<split>.json`` once and reused."""
    import torch

    from wmrl_core.types import Task

    out = {}
    policy = None
    for split, inits in (("train", args.train_init), ("heldout", args.heldout_init)):
        path = run_dir / f"eval_{split}.json"
        if path.exists():
            out[split] = json.loads(path.read_text())
            continue
        policy = policy or _policy(args, None if arm == "base" else run_dir)
        tasks = [
            Task(
                id=f"{args.suite}/{t}/{s}",
                description=_language(env, t),
                data={"suite": args.suite, "task_index": t, "init_state": s},
            )
            for t in args.tasks
            for s in inits
        ]
        with torch.random.fork_rng(), torch.no_grad():
            torch.manual_seed(1_000_003 * seed + (0 if split == "train" else 1))  # same noise for every arm
            rollouts = policy.generate(tasks, args.rollouts)
        env.on_episode = EvaluationProgress(f"seed {seed} {arm} {split}", len(tasks) * args.rollouts)
        try:
            outcomes = env.execute(rollouts.tasks, rollouts.solutions)
        finally:
            env.on_episode = None
        ok = [o for o in outcomes if o.status == "ok"]
        result = {
            "successes": int(sum(o.score for o in ok)),
            "episodes": len(ok),
            "infrastructure_failures": len(outcomes) - len(ok),
        }
        run_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result) + "\n")
        out[split] = result
    return out


class EvaluationProgress:
    """Prints ``label: k/n episodes, s successes, elapsed`` every ``every`` episodes and at the end
    (an evaluation of hundreds of episodes runs for tens of minutes)."""

    def __init__(self, label: str, total: int, every: int = 25):
        self.label, self.total, self.every = label, total, every
        self.done = self.successes = 0
        self.started = time.perf_counter()

    def __call__(self, result) -> None:
        self.done += 1
        self.successes += int(result.status == "ok" and result.success)
        if self.done % self.every == 0 or self.done == self.total:
            elapsed = time.perf_counter() - self.started
            print(
                f"{self.label}: {self.done}/{self.total} episodes, {self.successes} successes, {elapsed:.0f} s",
                flush=True,
            )


def _language(env, task_index: int) -> str:
    return next(t.description for t in env.tasks("heldout") if t.data["task_index"] == task_index)


def _without_note(argv: list[str]) -> list[str]:
    """The command line without ``--note TEXT`` (the note is printed above it)."""
    out, skip = [], False
    for a in argv:
        if skip or a == "--note":
            skip = not skip
            continue
        out.append(a)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(ROOT / "configs/libero/libero_long.yaml"))
    p.add_argument("--base", required=True, help="base policy checkpoint (small VLA .pt)")
    p.add_argument(
        "--wm",
        default=str(ROOT / "plugins/libero/checkpoints/libero_wm_t0-9.pt"),
        help="`wmrl-libero train-wm` checkpoint (dynamics + scorer); default: the shipped one, tasks 0-9",
    )
    p.add_argument("--arms", default=",".join(ARMS), help=f"subset of {', '.join(ARMS)}")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--suite", default="libero_10")
    p.add_argument("--tasks", default="0-9", help="LIBERO-10 tasks the base policy covers (the shipped one: 0-9)")
    p.add_argument("--train-init", default="0-9", help="training-split init states evaluated")
    p.add_argument("--heldout-init", default="40-49")
    p.add_argument("--rollouts", type=int, default=4, help="sampled rollouts per init state in evaluation")
    p.add_argument("--steps", type=int, default=0, help="training steps (0: the config's)")
    p.add_argument("--max-episode-steps", type=int, default=520)
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="simulator worker processes of the evaluation and of every trained arm (more than the cores "
        "keeps them busy: the workers step in lockstep)",
    )
    p.add_argument("--override", action="append", default=[], help="config override for every trained arm")
    p.add_argument("--out", default="runs/libero_transfer")
    p.add_argument(
        "--archive",
        default="",
        help="folder (e.g. in git) that keeps each finished arm-seed's results without checkpoints: "
        "restored into --out when missing there, so a run spanning machines resumes",
    )
    p.add_argument("--docs", default=str(ROOT / "docs/results/libero"))
    p.add_argument("--name", default="transfer", help="file stem of the report in --docs")
    p.add_argument("--label", default="", help="e.g. 'pilot': said in the report's title and note")
    p.add_argument("--note", default="", help="a paragraph at the top of the report")
    p.add_argument("--quick", action="store_true", help="every arm end to end at a tiny budget (CI)")
    p.add_argument(
        "--report-only", action="store_true", help="report the arm-seeds already evaluated; train and simulate nothing"
    )
    args = p.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    unknown = set(args.arms) - set(ARMS)
    if unknown:
        p.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    args.user_override = list(args.override)
    args.seeds, args.tasks = parse_ints(args.seeds), parse_ints(args.tasks)
    args.train_init, args.heldout_init = parse_ints(args.train_init), parse_ints(args.heldout_init)
    if args.quick:  # one group of 2 per step, short episodes, 2 steps, one rollout per init state
        args.steps = args.steps or 2
        args.max_episode_steps = min(args.max_episode_steps, 40)
        args.rollouts = 1
        args.override = [
            "rollout.batch_tasks=2",
            "rollout.group_size=2",
            "checkpoint.every=1",
            *args.override,
        ]
    args.override = [
        f"environment.kwargs.num_workers={args.workers}",
        f"environment.kwargs.max_episode_steps={args.max_episode_steps}",
        f"policy.kwargs.max_steps={args.max_episode_steps}",
        *args.override,
    ]
    archive = Path(args.archive) if args.archive else None
    if archive is not None:
        check_archive_settings(archive, experiment_settings(args))
    from wmrl_libero.environment import LiberoEnvironment

    out = Path(args.out)
    started = time.perf_counter()
    env = LiberoEnvironment(
        args.suite,
        task_indices=args.tasks,
        num_workers=args.workers,
        max_episode_steps=args.max_episode_steps,
        trajectory_states=0,
    )
    results: dict[str, list[dict[str, Any]]] = {arm: [] for arm in args.arms}
    try:
        for seed in args.seeds:
            for arm in args.arms:
                run_dir = out / f"{arm}-seed{seed}"
                if archive is not None and restore_run(archive / run_dir.name, run_dir):
                    print(f"seed {seed} {arm}: restored from {archive / run_dir.name}", flush=True)
                if args.report_only and not is_finished(run_dir):
                    print(f"seed {seed} {arm}: not evaluated yet, left out of the report", flush=True)
                    continue
                ledger = dict.fromkeys(LEDGER_KEYS, 0.0)
                cpu = 0.0
                if ARMS[arm] is not None:
                    ledger = train_arm(args, arm, seed, run_dir)
                    cpu_file = run_dir / "train_cpu_s.txt"
                    cpu = float(cpu_file.read_text()) if cpu_file.exists() else math.nan
                evaluation = evaluate_arm(args, env, arm, seed, run_dir)
                if archive is not None:
                    archive_run(run_dir, archive / run_dir.name)
                anchors, trend = None, score_trend(run_dir) if ARMS[arm] is not None else {}
                if ARMS[arm] is not None and "mode=wmrl" in ARMS[arm]:
                    group_size = int(_config(args, arm, seed, run_dir).rollout.group_size)
                    anchors = anchor_diagnostics(run_dir, group_size)
                results[arm].append(
                    {
                        "seed": seed,
                        "eval": evaluation,
                        "ledger": ledger,
                        "train_cpu_s": cpu,
                        "anchors": anchors,
                        "score_trend": trend,
                    }
                )
                print(f"seed {seed} {arm}: {json.dumps(evaluation)} ledger {json.dumps(ledger)}", flush=True)
    finally:
        env.close()
    summary = summarize(results)
    meta = {
        "label": args.label,
        "note": args.note
        or (
            f"**{args.label.upper()}**: not the full experiment; too few seeds, steps and episodes for a claim."
            if args.label
            else ""
        ),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "command": "python benchmarks/libero_transfer.py " + " ".join(_without_note(argv or sys.argv[1:])),
        "tasks": args.tasks,
        "train_init": args.train_init,
        "heldout_init": args.heldout_init,
        "rollouts": args.rollouts,
        "seeds": args.seeds,
        "steps": args.steps or "config",
        "wall_s": time.perf_counter() - started,
        "report_only": bool(args.report_only),
    }
    docs = Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)
    report = {"meta": meta, "arms": summary, "analysis": analysis(summary)}
    (docs / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (docs / f"{args.name}.md").write_text(markdown(summary, meta))
    title = f"LIBERO-Long transfer{' (' + args.label + ')' if args.label else ''}"
    plot(summary, docs / f"{args.name}.png", title)
    if "noise_control" in summary:
        plot_minus_control(summary, docs / f"{args.name}_minus_control.png", f"{title}: per seed, 95% t over seeds")
    print((docs / f"{args.name}.md").read_text())
    return summary


if __name__ == "__main__":
    main()

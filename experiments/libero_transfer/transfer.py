"""The LIBERO-Long transfer experiment: base policy vs four post-training arms, same base checkpoint.

Arms (all from ``--base``; ``configs/libero/libero_long.yaml`` unless ``--config``):

* ``base``: no RL, only evaluated;
* ``real``: GRPO on the simulator's sparse success, every group simulated;
* ``world_model``: GRPO on the imagination world model's raw predictions, no simulator;
* ``wmrl-imagination``: WMRL with the imagination world model, ~10% simulated anchor groups;
* ``wmrl-progress``: WMRL with ``libero-progress`` (the paper's arm): every group simulated,
  the progress of the executed trajectory calibrated and fused against the anchors' success;
* ``noise_control``: ``world_model``'s settings on pure-noise scores (the control of every gain).

Arms run through :func:`wmrl_core.experiments.runner.run_arms`: seeds outer, arms inner (machine
noise hits every arm alike). Every arm-seed is its own run directory under ``--out``: training
resumes from its checkpoint, evaluations already written are kept, so an interrupted experiment
continues where it stopped; ``--archive`` keeps each finished arm-seed's results (no checkpoint,
a few kB) in a folder that can be committed, so an experiment longer than one machine's life
resumes on the next one, and refuses arm-seeds of an experiment with other settings. Evaluation samples the
policy (as in training) ``--rollouts`` times from each init state of the training split
(``--train-init``) and of the held-out split (``--heldout-init``, LIBERO's 40-49), before
(the ``base`` arm of the same seed) and after. Reported per arm: success with 95% intervals
(Wilson for the pooled episodes, t over seeds), simulator / world-model / policy seconds from
the training ledger (declared cost) and their wall time, and a plot of held-out success
against simulator seconds; then the analysis fixed before the last seed (``analysis`` in
:mod:`experiments.libero_transfer.report`, which makes the report): which
arms learn beyond the noise control, and whether ``wmrl-imagination`` meets the compute floor.
Writes ``<name>.md``, ``<name>.json``, ``<name>.png`` (success against simulator seconds) and
``<name>_minus_control.png`` (each arm minus the control, per seed) to ``--docs``.

    wmrl experiment libero-transfer --base plugins/libero/checkpoints/small_vla_dagger_t0-9.pt \\
        --wm plugins/libero/checkpoints/libero_wm_t0-9.pt --seeds 0,1,2 --tasks 0-9 --out runs/libero_transfer
    ... --quick          # every arm end to end, one task, 2 steps, tiny groups (the CI check)

``--report-only`` trains and simulates nothing: it reads the finished arm-seeds' files in
``--archive`` (or ``--out``) directly, without loading their configs (an archive stays readable
when the engine's defaults move on). An archive that holds :data:`PAGE_COMMAND_FILE` rebuilds the
page that command built, byte for byte, from the archive alone (the full run's page)::

    python -m experiments.libero_transfer.transfer --report-only --archive experiments/libero_transfer/archive/full

Paths are relative to the working directory (the repository root, as in ``libero_long.yaml``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from wmrl_libero.experiments import config_path

from experiments.libero_transfer.report import (
    LEDGER_KEYS,
    analysis,
    anchor_diagnostics,
    markdown,
    plot,
    plot_minus_control,
    score_trend,
    summarize,
)
from wmrl_core.experiments.report import parse_int_ranges
from wmrl_core.experiments.runner import RECORD_FILE, RUNNER_FILE, ArmRun, run_arms
from wmrl_core.metrics import read_metrics

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


def common_overrides(args) -> list[str]:
    """The overrides every trained arm shares (before the arm's own): checkpoints, tasks, the
    user's and the quick settings, the step count."""
    overrides = [
        f"policy.kwargs.checkpoint={args.base}",
        f"world_model.kwargs.checkpoint={args.wm}",
        f"environment.kwargs.task_indices=[{','.join(map(str, args.tasks))}]",
        *args.override,
    ]
    if args.steps:
        overrides.append(f"steps={args.steps}")
    return overrides


def ledger(run_dir: Path, trained: bool) -> dict[str, float]:
    """The training ledger's totals of an arm-seed (zeros for one not trained)."""
    if not trained:
        return dict.fromkeys(LEDGER_KEYS, 0.0)
    last = read_metrics(run_dir)[-1]
    return {k: float(last.get(v) or 0.0) for k, v in LEDGER_KEYS.items()}


def train_cpu_seconds(run_dir: Path) -> float:
    """The training process's CPU seconds of an arm-seed: the runner's record of them, or the
    per-split format's ``train_cpu_s.txt``; NaN where neither is there."""
    book = run_dir / RUNNER_FILE
    if book.exists():
        return float(json.loads(book.read_text()).get("train_cpu_s", math.nan))
    cpu = run_dir / "train_cpu_s.txt"
    return float(cpu.read_text()) if cpu.exists() else math.nan


PAGE_COMMAND_FILE = "page_command.json"
"""In an archive: the command line (``argv``, without the program) and the ``machine`` of the
invocation whose page the archive rebuilds; a run with ``--archive`` records its own."""


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}"


def page_command(archive: str) -> dict[str, Any] | None:
    """The archive's :data:`PAGE_COMMAND_FILE` (``None`` without an archive or the file)."""
    path = Path(archive) / PAGE_COMMAND_FILE if archive else None
    return json.loads(path.read_text()) if path is not None and path.exists() else None


def record_page_command(archive: str, argv: Sequence[str]) -> None:
    """Keep ``argv`` and this machine in the archive, so that the page is rebuilt from it alone."""
    if archive:
        path = Path(archive) / PAGE_COMMAND_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"argv": list(argv), "machine": machine()}, indent=1) + "\n")


def page_arguments(argv: list[str], parse, prog: str) -> tuple[argparse.Namespace, list[str], str]:
    """The arguments, command line and machine of the page: ``--report-only`` with an archive that
    recorded its page's command takes that command (this command line's options win), so that the
    rebuilt page names the experiment's command and machine, not this one's."""
    known = argparse.ArgumentParser(add_help=False)
    known.add_argument("--archive", default="")
    known.add_argument("--report-only", action="store_true")
    first, _ = known.parse_known_args(argv)
    recorded = page_command(first.archive) if first.report_only else None
    if recorded is None:
        return parse(argv, prog), argv, machine()
    return parse([*recorded["argv"], *argv], prog), list(recorded["argv"]), recorded["machine"]


SPLITS = ("train", "heldout")
EVALUATION_FILES = tuple(f"eval_{split}.json" for split in SPLITS)
"""Each split's evaluation, kept beside the runner's files (and in ``--archive``): an evaluation
interrupted between the splits resumes with the second."""

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
"""The arguments every arm-seed of one experiment must share (``settings.json`` in ``--out`` and
``--archive``), with the user's ``--override`` list; ``--workers`` is not one (which worker runs an
episode does not change it)."""
WORKER_KEYS = ("environment.kwargs.num_workers",)
"""Config keys a finished arm-seed may differ in: the worker count (see :data:`SETTINGS_KEYS`)."""


def experiment_settings(args) -> dict[str, Any]:
    """The settings that make arm-seeds comparable, paths relative to the working directory (the
    repository root) when inside it, so that an archive resumes on another machine."""

    def rel(path: str) -> str:  # links kept: `configs/libero` names the shipped config in a checkout
        p, root = Path(os.path.abspath(path)), Path(os.path.abspath(Path.cwd()))
        return str(p.relative_to(root)) if p.is_relative_to(root) else str(p)

    out = {k: getattr(args, k) for k in SETTINGS_KEYS}
    out.update(base=rel(args.base), wm=rel(args.wm), config=rel(args.config), overrides=list(args.user_override))
    return out


def _policy(args, run_dir: Path | None, step: int | None = None):
    """The base policy, with the arm's trained weights when ``run_dir`` holds a checkpoint (the
    newest, or the one of training step ``step``)."""
    import torch
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.checkpoint import has_checkpoint, load_checkpoint

    policy = SmallVLAPolicy(checkpoint=args.base, max_steps=args.max_episode_steps)
    if run_dir is not None and step is not None:
        saved = torch.load(run_dir / "checkpoints" / f"step_{step:06d}.pt", map_location="cpu", weights_only=False)
        policy.load_state_dict(saved["policy"])
    elif run_dir is not None and has_checkpoint(run_dir / "checkpoints"):
        policy.load_state_dict(load_checkpoint(run_dir / "checkpoints")["policy"])
    return policy


def evaluate_split(args, env, policy, *, label: str, inits: Sequence[int], noise_seed: int) -> dict[str, int]:
    """Success counts ``{"successes", "episodes", "infrastructure_failures"}`` of ``args.rollouts``
    sampled rollouts of ``policy`` from each init state ``inits`` of every task in ``args.tasks``,
    the sampling noise drawn from ``noise_seed`` (the same seed for every arm: shared random numbers)."""
    import torch

    from wmrl_core.types import Task

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
        torch.manual_seed(noise_seed)
        rollouts = policy.generate(tasks, args.rollouts)
    env.on_episode = EvaluationProgress(label, len(tasks) * args.rollouts)
    try:
        outcomes = env.execute(rollouts.tasks, rollouts.solutions)
    finally:
        env.on_episode = None
    ok = [o for o in outcomes if o.status == "ok"]
    return {
        "successes": int(sum(o.score for o in ok)),
        "episodes": len(ok),
        "infrastructure_failures": len(outcomes) - len(ok),
    }


def evaluation_noise_seed(seed: int, split: str) -> int:
    """The evaluation's noise seed of experiment seed ``seed`` on ``split`` (the same for every arm)."""
    return 1_000_003 * seed + (0 if split == "train" else 1)


def evaluate_arm(args, env, arm: str, seed: int, run_dir: Path) -> dict[str, dict[str, int]]:
    """Success counts ``{split: {"successes", "episodes", "infrastructure_failures"}}``; each
    split's result is written to ``run_dir/eval_<split>.json`` once and reused."""
    out = {}
    policy = None
    for split, inits in (("train", args.train_init), ("heldout", args.heldout_init)):
        path = run_dir / f"eval_{split}.json"
        if path.exists():
            out[split] = json.loads(path.read_text())
            continue
        policy = policy or _policy(args, None if arm == "base" else run_dir)
        result = evaluate_split(
            args,
            env,
            policy,
            label=f"seed {seed} {arm} {split}",
            inits=inits,
            noise_seed=evaluation_noise_seed(seed, split),
        )
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


def adopt_per_split_results(folder: Path) -> None:
    """Give arm-seed folders holding only per-split results (``eval_train.json``,
    ``eval_heldout.json``, ``train_cpu_s.txt``, as in ``archive/full`` beside this file)
    the runner's record of them (``record.json``, ``runner.json``), so that they count as finished."""
    if not folder.is_dir():
        return
    for run_dir in sorted(folder.iterdir()):
        arm, _, seed = run_dir.name.rpartition("-seed")
        evaluations = [run_dir / name for name in EVALUATION_FILES]
        if arm not in ARMS or not seed.isdigit() or (run_dir / RECORD_FILE).exists():
            continue
        if not all(path.exists() for path in evaluations):
            continue
        record = {"eval": {s: json.loads((run_dir / f"eval_{s}.json").read_text()) for s in ("train", "heldout")}}
        (run_dir / RECORD_FILE).write_text(json.dumps(record) + "\n")
        cpu = run_dir / "train_cpu_s.txt"
        book = {"arm": arm, "seed": int(seed), "overrides": list(ARMS[arm] or [])}
        if cpu.exists():
            book["train_cpu_s"] = float(cpu.read_text())
        (run_dir / RUNNER_FILE).write_text(json.dumps(book, indent=1) + "\n")


def arm_result(arm: str, seed: int, run_dir: Path, evaluation: dict, train_cpu_s: float, group_size: int) -> dict:
    """One finished arm-seed as the report takes it: ``seed``, ``eval``, ``ledger``, ``train_cpu_s``,
    ``anchors`` (WMRL arms: what the world model was worth on them), ``score_trend``."""
    overrides, trained = ARMS[arm] or [], ARMS[arm] is not None
    return {
        "seed": seed,
        "eval": evaluation,
        "ledger": ledger(run_dir, trained),
        "train_cpu_s": train_cpu_s if trained else 0.0,
        "anchors": anchor_diagnostics(run_dir, group_size) if "mode=wmrl" in overrides else None,
        "score_trend": score_trend(run_dir) if trained else {},
    }


def read_finished(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """The arm-seeds already evaluated in ``--archive`` (without one, ``--out``), read from their
    files, seeds outer and arms inner as :func:`run_experiment` gives them: no config is loaded and
    nothing trained or simulated."""
    folder = Path(args.archive or args.out)
    results: dict[str, list[dict[str, Any]]] = {arm: [] for arm in args.arms}
    for seed in args.seeds:
        for arm in args.arms:
            run_dir = folder / f"{arm}-seed{seed}"
            if not all((run_dir / name).exists() for name in EVALUATION_FILES):
                continue
            evaluation = {split: json.loads((run_dir / f"eval_{split}.json").read_text()) for split in SPLITS}
            config = run_dir / "config.yaml"
            group_size = yaml.safe_load(config.read_text())["rollout"]["group_size"] if config.exists() else 0
            results[arm].append(arm_result(arm, seed, run_dir, evaluation, train_cpu_seconds(run_dir), group_size))
    return results


def build_parser(prog: str) -> argparse.ArgumentParser:
    default_config = Path("configs/libero/libero_long.yaml")  # the checkout's link to the shipped config
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument(
        "--config",
        default=str(default_config if default_config.is_file() else config_path("libero_long.yaml")),
    )
    p.add_argument("--base", required=True, help="base policy checkpoint (small VLA .pt)")
    p.add_argument(
        "--wm",
        default=os.path.abspath("plugins/libero/checkpoints/libero_wm_t0-9.pt"),
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
        help="simulator worker processes of the evaluation and of every trained arm (they do not wait "
        "for each other: each steps again as soon as its own step is done)",
    )
    p.add_argument("--override", action="append", default=[], help="config override for every trained arm")
    p.add_argument("--out", default="runs/libero_transfer")
    p.add_argument(
        "--archive",
        default="",
        help="folder (e.g. in git) that keeps each finished arm-seed's results without checkpoints: "
        "restored into --out when missing there, so a run spanning machines resumes",
    )
    p.add_argument("--docs", default="docs/results/libero")
    p.add_argument("--name", default="transfer", help="file stem of the report in --docs")
    p.add_argument("--label", default="", help="e.g. 'pilot': said in the report's title and note")
    p.add_argument("--note", default="", help="a paragraph at the top of the report")
    p.add_argument("--quick", action="store_true", help="every arm end to end at a tiny budget (CI)")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="report the arm-seeds already evaluated in --archive (or --out), read from their files; train and "
        f"simulate nothing (an archive with {PAGE_COMMAND_FILE} rebuilds its page as that command built it)",
    )
    return p


def parse_args(argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    """The command line, with ``--quick`` and the worker settings turned into config overrides."""
    p = build_parser(prog)
    args = p.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    unknown = set(args.arms) - set(ARMS)
    if unknown:
        p.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    args.user_override = list(args.override)
    args.seeds, args.tasks = parse_int_ranges(args.seeds), parse_int_ranges(args.tasks)
    args.train_init, args.heldout_init = parse_int_ranges(args.train_init), parse_int_ranges(args.heldout_init)
    return add_run_overrides(args)


def add_run_overrides(args: argparse.Namespace) -> argparse.Namespace:
    """``--quick`` (tiny groups, short episodes, 2 steps) and the worker and episode-limit settings
    turned into config overrides of every trained arm (``args.override``)."""
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
    return args


class EvaluationEnvironment:
    """The evaluation's simulator (``args``' suite, tasks, workers and episode limit; no trajectory
    kept), built on the first call (a report-only run builds none); :meth:`close` after the experiment."""

    def __init__(self, args: argparse.Namespace):
        self.args, self.env = args, None

    def __call__(self):
        if self.env is None:
            from wmrl_libero.environment import LiberoEnvironment

            a = self.args
            self.env = LiberoEnvironment(
                a.suite,
                task_indices=a.tasks,
                num_workers=a.workers,
                max_episode_steps=a.max_episode_steps,
                trajectory_states=0,
            )
        return self.env

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


def run_experiment(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Every arm-seed trained (when it trains) and evaluated, or read back; per arm, one result
    per finished seed (``seed``, ``eval``, ``ledger``, ``train_cpu_s``, ``anchors``, ``score_trend``)."""
    out = Path(args.out)
    archive = Path(args.archive) if args.archive else None
    for folder in (out, archive):
        if folder is not None:
            adopt_per_split_results(folder)
    environment = EvaluationEnvironment(args)

    def evaluate(run: ArmRun) -> dict[str, Any]:
        return {"eval": evaluate_arm(args, environment(), run.arm.name, run.seed, run.run_dir)}

    results: dict[str, list[dict[str, Any]]] = {arm: [] for arm in args.arms}

    def on_run(run: ArmRun) -> None:
        if run.restored:
            print(f"seed {run.seed} {run.arm.name}: restored from {archive / run.name}", flush=True)
        group_size = int(run.config.rollout.group_size)
        result = arm_result(run.arm.name, run.seed, run.run_dir, run.record["eval"], run.train_cpu_s, group_size)
        results[run.arm.name].append(result)
        print(
            f"seed {run.seed} {run.arm.name}: {json.dumps(result['eval'])} ledger {json.dumps(result['ledger'])}",
            flush=True,
        )

    try:
        run_arms(
            args.config,
            {arm: ARMS[arm] for arm in args.arms},
            seeds=args.seeds,
            runs_dir=out,
            overrides=common_overrides(args),
            evaluate=evaluate,
            on_run=on_run,
            settings=experiment_settings(args),
            archive=archive,
            archive_files=(*EVALUATION_FILES, "train_cpu_s.txt"),
            ignore=WORKER_KEYS,
            progress=True,
        )
    finally:
        environment.close()
    for arm, runs in results.items():
        missing = sorted(set(args.seeds) - {r["seed"] for r in runs})
        if missing:
            print(f"{arm}: seeds {missing} not evaluated yet, left out of the report", flush=True)
    return results


def main(argv: Sequence[str] | None = None, prog: str = "wmrl experiment libero-transfer") -> int:
    args, command, on_machine = page_arguments(list(sys.argv[1:] if argv is None else argv), parse_args, prog)
    started = time.perf_counter()
    summary = summarize(read_finished(args) if args.report_only else run_experiment(args))
    if not args.report_only:
        record_page_command(args.archive, command)
    meta = {
        "label": args.label,
        "note": args.note
        or (
            f"**{args.label.upper()}**: not the full experiment; too few seeds, steps and episodes for a claim."
            if args.label
            else ""
        ),
        "machine": on_machine,
        "command": "wmrl experiment libero-transfer " + " ".join(_without_note(command)),
        "tasks": args.tasks,
        "train_init": args.train_init,
        "heldout_init": args.heldout_init,
        "rollouts": args.rollouts,
        "seeds": args.seeds,
        "steps": args.steps or "config",
        "wall_s": None if args.report_only else time.perf_counter() - started,
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

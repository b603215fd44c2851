"""The world-model sub-commands of ``wmrl-libero``: record-wm-data, train-wm, wm-report, wm-page."""

from __future__ import annotations

import shlex
from pathlib import Path

from wmrl_libero.int_ranges import parse_int_ranges

__all__ = ["add_world_model_commands"]


def _cmd_record(args) -> int:
    from wmrl_libero.world_models.recording import record_perturbed_rollouts

    inits = parse_int_ranges(args.init_states)
    # a few init states at a time, so every task has episodes early in a long run
    for i in range(0, len(inits), args.init_states_per_pass):
        record_perturbed_rollouts(
            args.out,
            suite=args.suite,
            task_indices=parse_int_ranges(args.tasks),
            init_states=inits[i : i + args.init_states_per_pass],
            rollouts=parse_int_ranges(args.rollouts),
            log=lambda m: print(m, flush=True),
        )
    print("wrote", args.out)
    return 0


def _threads(args) -> None:
    import torch

    torch.set_num_threads(args.threads)


def _cmd_train(args) -> int:
    _threads(args)
    from wmrl_libero.world_models.training import train_world_models

    path = train_world_models(
        args.data,
        args.out,
        heldout_init_states=parse_int_ranges(args.heldout_init_states),
        object_dim=args.object_dim,
        chunk=args.chunk,
        members=args.members,
        hidden=args.hidden,
        dynamics_iterations=args.dynamics_iterations,
        rollout_chunks=args.rollout_chunks,
        scorer_iterations=args.scorer_iterations,
        seed=args.seed,
        log=lambda m: print(m, flush=True),
    )
    print("wrote", path)
    return 0


def _cmd_report(args) -> int:
    _threads(args)
    from wmrl_libero.world_models.quality import quality_report, write_report

    r = quality_report(
        args.checkpoint,
        args.heldout,
        sim_episodes=args.sim_episodes,
        vla_batch=args.vla_batch,
        log=lambda m: print(m, flush=True),
    )
    command = " ".join(
        [
            "wmrl-libero wm-report",
            shlex.quote(args.checkpoint),
            "--heldout",
            *map(shlex.quote, args.heldout),
            "--out",
            shlex.quote(args.out),
            f"--sim-episodes {args.sim_episodes} --vla-batch {args.vla_batch} --name {args.name}",
        ]
    )
    path = write_report(r, args.out, command, name=args.name)
    print(path.read_text())
    return 0


def _cmd_page(args) -> int:
    from wmrl_libero.world_models.quality import write_page

    try:
        path = write_page(args.record, args.out or Path(args.record).parent)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"wmrl-libero wm-page: {exc}") from None
    print(f"written {path}")
    return 0


def add_world_model_commands(sub) -> None:
    """Add the world-model sub-commands to the ``wmrl-libero`` parser."""
    p = sub.add_parser("record-wm-data", help="record the scripted expert with perturbations (successes and failures)")
    p.add_argument("--out", required=True, help="output .hdf5 file (appended to: a killed run resumes)")
    p.add_argument("--suite", default="libero_10")
    p.add_argument("--tasks", default="0-9", help="task indices (default: all ten; the expert solves each)")
    p.add_argument("--init-states", default="0-39")
    p.add_argument("--rollouts", default="0-3", help="perturbation indices per init state (0: clean expert)")
    p.add_argument("--init-states-per-pass", type=int, default=2)
    p.set_defaults(fn=_cmd_record)

    p = sub.add_parser("train-wm", help="train the LIBERO world models (dynamics ensemble + success/progress scorer)")
    p.add_argument("data", nargs="+", help="HDF5 files: demonstrations, DAgger data, record-wm-data rollouts")
    p.add_argument("--out", required=True, help="checkpoint path (.pt)")
    p.add_argument("--heldout-init-states", default="40-49", help="init states never trained on")
    p.add_argument("--object-dim", type=int, default=128)
    p.add_argument("--chunk", type=int, default=4, help="control steps per dynamics prediction")
    p.add_argument("--members", type=int, default=5)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--dynamics-iterations", type=int, default=2000)
    p.add_argument(
        "--rollout-chunks",
        type=int,
        default=1,
        help="then train each member on its own H-chunk rollouts (against compounding error)",
    )
    p.add_argument("--scorer-iterations", type=int, default=1500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.set_defaults(fn=_cmd_train)

    p = sub.add_parser("wm-report", help="quality of the world models on held-out episodes (AUROC, calibration, ...)")
    p.add_argument("checkpoint", help="a train-wm checkpoint")
    p.add_argument("--heldout", nargs="+", required=True, help="HDF5 files with episodes from held-out init states")
    p.add_argument("--out", default="runs/libero_wm_report", help="folder for world_models.md / .json")
    p.add_argument("--name", default="world_models", help="report file stem (NAME.md, NAME.json)")
    p.add_argument("--sim-episodes", type=int, default=2, help="real episodes timed for the speed comparison")
    p.add_argument("--vla-batch", type=int, default=64, help="small-VLA episodes imagined in one batch (speed)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.set_defaults(fn=_cmd_report)

    p = sub.add_parser("wm-page", help="rewrite a wm-report page (NAME.md) from its JSON record alone")
    p.add_argument("record", help="a NAME.json written by wm-report")
    p.add_argument("--out", default=None, help="folder for NAME.md (default: the record's folder)")
    p.set_defaults(fn=_cmd_page)

"""The ``wmrl`` command line: ``train``, ``plugins``, ``experiment``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from wmrl_core.errors import WMRLError

EXAMPLE = "wmrl train configs/synthetic/wmrl.yaml mode=real steps=20"


def _cmd_train(args: argparse.Namespace) -> int:
    from wmrl_core.config import load_config
    from wmrl_core.trainer import train

    cfg = load_config(args.config, args.overrides)
    args.run_dir = cfg.run_dir  # for the interrupt message
    summary = train(cfg)
    run_dir = Path(summary["run_dir"])
    final = {k: v for k, v in summary["final"].items() if k.startswith(("compute/total_s", "reward/"))}
    print(json.dumps(final, indent=2, default=float))
    if summary["eval_first"] and summary["eval_last"]:
        for key in (k for k in summary["eval_last"] if k.startswith("eval/") and not k.endswith("_s")):
            print(
                f"{key}: {summary['eval_first'].get(key)} at step {summary['eval_first']['step']} -> "
                f"{summary['eval_last'][key]} at step {summary['eval_last']['step']}"
            )
    print(f"run directory: {run_dir}  ({', '.join(run_contents(run_dir))})")
    return 0


RUN_FILES = ("metrics.jsonl", "summary.json", "plots/", "checkpoints/", "tensorboard/", "anchor_pairs.jsonl")


def run_contents(run_dir: Path) -> list[str]:
    """The entries of :data:`RUN_FILES` that exist in ``run_dir`` (a folder only when not empty)."""
    found = []
    for name in RUN_FILES:
        path = run_dir / name.rstrip("/")
        if name.endswith("/") and path.is_dir() and any(path.iterdir()):
            found.append(name)
        elif not name.endswith("/") and path.is_file() and path.stat().st_size:
            found.append(name)
    return found


def _interrupt_note(args: argparse.Namespace, exc: BaseException) -> str:
    """Whether a checkpoint is kept: what the trainer said, else what the run directory holds."""
    note = getattr(exc, "checkpoint_note", None)
    if note:
        return note
    run_dir = getattr(args, "run_dir", None)
    if run_dir is None:
        return "interrupted during start-up, before training began; no checkpoint was written"
    from wmrl_core.checkpoint import has_checkpoint

    ckpt_dir = Path(run_dir) / "checkpoints"
    if has_checkpoint(ckpt_dir):
        return f"interrupted before training began; the checkpoints in {ckpt_dir} are as they were"
    return "interrupted before training began; no checkpoint was written"


def _cmd_plugins(args: argparse.Namespace) -> int:
    from wmrl_core.plugins import build_registry, describe_plugins, get_plugin_manager

    pm = get_plugin_manager()
    registry = build_registry(pm)
    infos = describe_plugins(pm, registry)
    if args.json:
        print(
            json.dumps(
                [{"name": i.name, "version": i.version, "module": i.module, "components": i.components} for i in infos],
                indent=2,
            )
        )
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="WMRL plugins")
    for col in ("plugin", "version", "kind", "name", "description"):
        table.add_column(col)
    for info in infos:
        for kind, tbl in registry.tables().items():
            for spec in tbl:
                if spec.plugin == info.name:
                    table.add_row(info.name, info.version, kind, spec.name, spec.description)
    Console(width=160 if not sys.stdout.isatty() else None).print(table)
    return 0


DIAGNOSED_ARMS = (
    "wmrl",
    "wmrl_inverse_variance",
    "wmrl_rollout_moments",
    "wmrl_independent_wm",
    "wmrl_confident_decoy",
    "wmrl_confident_decoy_inverse_variance_smoothed",
)


def _cmd_experiment(args: argparse.Namespace) -> int:
    from wmrl_core.experiment import SYNTHETIC_ARMS, plot_diagnostics, run_arms, write_report
    from wmrl_core.synthetic.bandit import BanditTruth

    if args.domain != "synthetic":
        raise WMRLError(
            f"unknown experiment {args.domain!r}; available: synthetic (the AutoResearch one is in benchmarks/)"
        )
    config = Path(args.config)
    if not config.is_file():
        raise WMRLError(f"config {config} not found; run from the repository root or pass --config PATH")
    arms = {k: v for k, v in SYNTHETIC_ARMS.items() if not args.arms or k in args.arms}
    results = run_arms(
        config, arms, seeds=range(args.seeds), out_dir=args.out, overrides=args.overrides, reuse=args.reuse
    )
    summary = write_report(results, args.out, title="Synthetic theorem experiment", optimum=BanditTruth().optimum)
    print((Path(args.out) / "table.md").read_text())
    diagnosed = [a for a in DIAGNOSED_ARMS if a in arms]
    if diagnosed:
        plot_diagnostics(args.out, diagnosed, range(args.seeds), Path(args.out) / "diagnostics.png")
    print(
        f"plots: {Path(args.out) / 'reward_vs_compute.png'}, {Path(args.out) / 'diagnostics.png'}; "
        f"JSON: {Path(args.out) / 'summary.json'}"
    )
    if args.replications:
        from wmrl_core.synthetic.policy_evaluation import write_policy_evaluation

        print(write_policy_evaluation(Path(args.out) / "policy_evaluation.md", replications=args.replications))
    return 0 if summary else 1


def _cmd_plot(args: argparse.Namespace) -> int:
    from wmrl_core.plots import plot_run

    run_dir = Path(args.run_dir)
    if not (run_dir / "metrics.jsonl").is_file():
        raise WMRLError(f"{run_dir} has no metrics.jsonl; pass a run directory written by `wmrl train`")
    for path in plot_run(run_dir):
        print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wmrl", description="World-model reinforcement learning.")
    sub = parser.add_subparsers(dest="command", required=True)

    from wmrl_core.fusion.methods import describe_methods

    p = sub.add_parser(
        "train",
        help="train from a YAML config with key=value overrides",
        epilog=f"example: {EXAMPLE}\n\nfusion.method (how the real and world-model streams are fused):\n{describe_methods()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", help="YAML config (see configs/)")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. grpo.lr=0.01 resume=true")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("plugins", help="list installed plugins and their components")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_plugins)

    p = sub.add_parser("plot", help="(re)draw a run's plots into RUN_DIR/plots")
    p.add_argument("run_dir")
    p.set_defaults(func=_cmd_plot)

    p = sub.add_parser("experiment", help="run all modes over seeds; write a table and a plot")
    p.add_argument("domain", choices=["synthetic"])
    p.add_argument("--config", default="configs/synthetic/wmrl.yaml")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default="runs/experiment-synthetic")
    p.add_argument("--arms", nargs="*", help="subset of arms (default: all)")
    p.add_argument(
        "--reuse", action="store_true", help="keep runs already finished in --out (resume an interrupted experiment)"
    )
    p.add_argument(
        "--replications", type=int, default=500, help="replications of the policy-evaluation experiment (0 skips it)"
    )
    p.add_argument("overrides", nargs="*", help="overrides applied to every arm")
    p.set_defaults(func=_cmd_experiment)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except WMRLError as exc:
        print(f"wmrl: error: {exc}", file=sys.stderr)
        note = getattr(exc, "checkpoint_note", None)
        if note:
            print(f"wmrl: {note}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"wmrl: interrupted; {_interrupt_note(args, exc)}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

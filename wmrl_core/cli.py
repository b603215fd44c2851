"""The ``wmrl`` command line: ``train``, ``plugins``, ``plot``, ``experiment``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from wmrl_core.errors import ComponentError, ContractError, WMRLError

EXAMPLE = "wmrl train configs/synthetic/wmrl.yaml mode=real steps=20"


def _cmd_train(args: argparse.Namespace) -> int:
    from wmrl_core.config import load_config

    cfg = load_config(args.config, args.overrides)
    from wmrl_core.trainer import train  # torch and the engine: after the config is known to be good

    args.run_dir = cfg.run_dir  # for the interrupt message
    summary = train(cfg)
    run_dir = Path(summary["run_dir"])
    final = {k: v for k, v in summary["final"].items() if k.startswith(("compute/total_s", "reward/"))}
    print(json.dumps(final, indent=2, default=float))
    for line in summary_lines(summary, cfg.logging.caveat):
        print(line)
    print(f"run directory: {run_dir}  ({', '.join(run_contents(run_dir))})")
    return 0


def _with_se(record: dict, key: str) -> str:
    """``value ± standard error`` when the record has ``key_se``, else the value."""
    value, se = record.get(key), record.get(f"{key}_se")
    if isinstance(value, (int, float)) and isinstance(se, (int, float)):
        return f"{value:.4f} ± {se:.4f}"
    return str(value)


def summary_lines(summary: dict, caveat: str | None = None) -> list[str]:
    """The evaluations first -> last (each ± its standard error where recorded), the run's
    averages of ``n_eff`` and the predicted compute ratios, and the config's caveat line."""
    lines = []
    first, last = summary.get("eval_first"), summary.get("eval_last")
    if first and last:
        for key in (k for k in last if k.startswith("eval/") and not k.endswith(("_s", "_se"))):
            lines.append(
                f"{key}: {_with_se(first, key)} at step {first['step']} -> {_with_se(last, key)} at step {last['step']}"
            )
    earned = summary.get("world_model_earned") or {}
    if earned:
        opened = earned["gate_opened_at"]
        lines.append(
            (
                f"world model: gate open from step {opened} of {earned['steps']}"
                if opened is not None
                else f"world model: weight 0 on all {earned['steps']} steps (this run is GRPO on its anchor groups)"
            )
            + f"; mean weight {earned['mean_weight']:.3f}; {earned['effective_per_executed']:.2f} effective rollouts "
            "per executed one"
        )
    value = summary.get("value") or {}
    if value:
        lines.append(
            "predicted value of the world model (run averages; module wmrl_core.fusion.value): "
            + ", ".join(f"{k.removeprefix('value/')} {v:.3g}" for k, v in value.items())
        )
    if caveat:
        lines.append(f"what this run shows: {caveat}")
    return lines


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
        for kind, tbl in registry.listed_tables().items():
            for spec in tbl:
                if spec.plugin == info.name:
                    table.add_row(info.name, info.version, kind, spec.name, spec.description)
    Console(width=160 if not sys.stdout.isatty() else None).print(table)
    return 0


def experiment_table():
    """The registered experiments (``wmrl_register_experiments``): the installed plugins', and the
    studies of the current directory's ``experiments/*/study.py`` (:mod:`wmrl_core.experiments.studies`)."""
    from wmrl_core.experiments.studies import register_studies
    from wmrl_core.plugins import build_registry, get_plugin_manager

    pm = get_plugin_manager()
    register_studies(pm)
    return build_registry(pm).experiments


def _cmd_experiment(args: argparse.Namespace) -> int:
    table = experiment_table()
    if args.help or args.name is None:
        lines = [args.usage, "", "experiments (wmrl experiment NAME --help shows the options of one):"]
        lines += [f"  {spec.name:<20} {spec.description} [{spec.plugin}]" for spec in table]
        print("\n".join(lines))
        return 0 if args.help else 2
    spec = table.get(args.name)
    status = spec.load()(list(args.args), prog=f"wmrl experiment {spec.name}")
    return int(status or 0)


def _cmd_plot(args: argparse.Namespace) -> int:
    from wmrl_core.plots import plot_run

    run_dir = Path(args.run_dir)
    if not (run_dir / "metrics.jsonl").is_file():
        raise WMRLError(f"{run_dir} has no metrics.jsonl; pass a run directory written by `wmrl train`")
    written = plot_run(run_dir)
    if not written:
        raise WMRLError(f"{run_dir / 'metrics.jsonl'} holds no metric a plot draws; is the run's first step done?")
    for path in written:
        print(path)
    return 0


_TRAIN_SETTINGS = "(every setting and fusion method, read when help is printed)"


class _TrainHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Writes ``wmrl train --help``'s epilog, every setting and the installed plugins' fusion methods,
    only when the help is printed: building the parser for any command must not load every plugin."""

    def add_text(self, text: str | None) -> None:
        if text == _TRAIN_SETTINGS:
            from wmrl_core.config_docs import help_text

            text = f"example: {EXAMPLE}\n\n{help_text()}"
        super().add_text(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wmrl", description="World-model reinforcement learning.")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="print the full traceback behind an error, e.g. of a plugin's exception (or set WMRL_DEBUG=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "train",
        help="train from a YAML config with key=value overrides",
        epilog=_TRAIN_SETTINGS,
        formatter_class=_TrainHelpFormatter,
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

    p = sub.add_parser(
        "experiment",
        help="run a registered experiment (arms over seeds: a table and plots); --help lists them",
        add_help=False,
    )
    p.add_argument("-h", "--help", action="store_true", help="list the registered experiments")
    p.add_argument("name", nargs="?", help="the experiment (wmrl experiment --help lists them)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the experiment's own options and overrides")
    p.set_defaults(func=_cmd_experiment, usage=p.format_usage().strip())
    return parser


_OFF = ("", "0", "false", "no", "off")


def debug_enabled(args: argparse.Namespace) -> bool:
    """``--debug`` given, or ``WMRL_DEBUG`` set to anything but empty, ``0``, ``false``, ``no`` or ``off``."""
    return bool(getattr(args, "debug", False)) or os.environ.get("WMRL_DEBUG", "").strip().lower() not in _OFF


def _cause_hint(exc: WMRLError, debug: bool) -> str:
    """For an error with an exception behind it (raised by a plugin or a library, not by WMRL on
    purpose): with ``debug``, that exception's full traceback printed to stderr and ``""``; else the
    words to append to the error's line saying how to see it."""
    cause = exc.__cause__
    if cause is None or isinstance(cause, WMRLError):
        return ""
    if debug:
        traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)
        return ""
    whose = "the plugin's traceback" if isinstance(exc, (ComponentError, ContractError)) else "the full traceback"
    return f" (rerun with --debug (or WMRL_DEBUG=1) for {whose})"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except WMRLError as exc:
        print(f"wmrl: error: {exc}{_cause_hint(exc, debug_enabled(args))}", file=sys.stderr)
        note = getattr(exc, "checkpoint_note", None)
        if note:
            print(f"wmrl: {note}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"wmrl: interrupted; {_interrupt_note(args, exc)}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""The equal-execution page (``table.md``, ``summary.json``, ``equal_execution.png``) rebuilt from the
committed archive alone: every finished arm-seed's record, metrics, anchor pairs and evaluations, the
noise checks, the settings and the frozen config. Nothing is trained, evaluated or executed, and the
runner is not asked: it would compare each archived run with what the shipped config gives *now*.

    python -m experiments.autoresearch_equal_execution.page     # writes docs/results/autoresearch/equal_execution
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, NamedTuple

from experiments.autoresearch_equal_execution import equal_execution as ee
from wmrl_core.experiments.runner import Arm

HERE = Path(__file__).parent
ARCHIVE = HERE / "archive"
PAGE = Path("docs/results/autoresearch/equal_execution")


class ArchivedRun(NamedTuple):
    """What :func:`equal_execution.analyse` reads of an arm-seed, from its archived folder."""

    arm: Arm
    seed: int
    run_dir: Path
    record: dict[str, Any]


def archived_runs(archive: Path, plan: dict[str, Any]) -> list[ArchivedRun]:
    """The plan's arm-seeds in run order (seeds outer, arms inner), each from ``ARCHIVE/<arm>-seed<seed>``.

    :raises SystemExit: an arm-seed the plan names that the archive does not hold finished."""
    runs, missing = [], []
    for seed in ee.plan_seeds(plan):
        for name in ee.plan_arms(plan):
            folder = archive / f"{name}-seed{seed}"
            if not (folder / "record.json").is_file():
                missing.append(folder.name)
                continue
            runs.append(ArchivedRun(Arm(name), seed, folder, json.loads((folder / "record.json").read_text())))
    if missing:
        raise SystemExit(f"{archive} holds no finished {', '.join(missing)}: the page needs every arm-seed")
    return runs


def build_page(archive: Path, out: Path) -> str:
    """Write the page into ``out`` from ``archive``; returns ``table.md``'s text."""
    settings = json.loads((archive / "settings.json").read_text())
    args = argparse.Namespace(
        plan=settings["plan"],
        samples=settings["samples_per_task"],
        max_tasks=settings["max_tasks"],
        uncached_seeds=set(settings["uncached_seeds"]),
        runs=archive,
        archive=archive,
        out=out,
        config=archive / ee.ARCHIVED_CONFIG,
        invocation={"trained": 0, "evaluations": 0},  # a page built from the archive runs nothing
    )
    return ee.analyse(args, archived_runs(archive, args.plan))


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--archive", type=Path, default=ARCHIVE, help="the committed archive (default: archive/ beside this file)"
    )
    parser.add_argument("--out", type=Path, default=PAGE, help=f"where the page goes (default {PAGE})")
    args = parser.parse_args(argv)
    build_page(args.archive, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

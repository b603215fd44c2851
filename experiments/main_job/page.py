"""The main job's runs, rebuilt from their archive: what each printed, and its world model's weight per step.

    python -m experiments.main_job.page                       # docs/results/autoresearch/main_job_runs.md
    python -m experiments.main_job.page --add RUN_DIR --label LABEL --commit SHA --note "..."

``--add`` copies a finished run of ``wmrl train configs/autoresearch/quickstart.yaml`` (what ``bash
quickstart.sh`` runs) into ``experiments/main_job/archive/LABEL/``: its ``summary.json`` (what ``wmrl
train`` prints at the end is made from it, by :func:`wmrl_core.cli.summary_lines`), ``metrics.jsonl``,
``config.yaml``, and ``provenance.json`` (the commit, the command and a note on the machine). The page
lists the archived runs oldest first (by the number the label starts with); the prose around it is ``docs/results/autoresearch/main_job.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from omegaconf import OmegaConf

from wmrl_core.cli import summary_lines
from wmrl_core.experiments.report import markdown_table, number

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "experiments/main_job/archive"
OUT = ROOT / "docs/results/autoresearch"
PAGE = "main_job_runs.md"
RUN_FILES = ("summary.json", "metrics.jsonl", "config.yaml")
STEP_COLUMNS = {
    "fusion/gate_open": ("gate open", 0),
    "fusion/w_world_model": ("world-model weight", 3),
    "fusion/rho2": ("ρ² (`fusion/rho2`)", 3),
    "fusion/w_mse": ("w_MSE", 3),
    "fusion/n_effective": ("effective rollouts", 2),
    "calibration/tied_group_share": ("tied groups", 2),
}
"""The per-step metrics the page shows, with their column titles and decimals."""


def add_run(run_dir: Path, label: str, commit: str, command: str, note: str, archive: Path = ARCHIVE) -> Path:
    """Copy a finished run into ``archive/label`` with its provenance (all or nothing).

    :raises ValueError: if the run has not finished (no ``summary.json``), the label is not a plain folder
        name, or it is taken.
    """
    missing = [name for name in RUN_FILES if not (run_dir / name).is_file()]
    if missing:
        raise ValueError(f"{run_dir} lacks {', '.join(missing)}: archive a run that finished")
    if not label or Path(label).name != label or label.startswith("."):
        raise ValueError(f"--label {label!r}: a plain folder name, e.g. 3-my-change (its number orders the page)")
    target = archive / label
    if target.exists():
        raise ValueError(f"{target} exists: choose another --label (an archived run is never overwritten)")
    archive.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=archive, prefix=".adding-") as tmp:
        for name in RUN_FILES:
            shutil.copy(run_dir / name, Path(tmp) / name)
        provenance = {"commit": commit, "command": command, "note": note}
        (Path(tmp) / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
        Path(tmp).rename(target)
    return target


def _order(folder: Path) -> tuple[int, str]:
    """Archived runs oldest first: by the number their label starts with, then by name."""
    number = folder.name.split("-", 1)[0]
    return (int(number) if number.isdigit() else sys.maxsize, folder.name)


def step_rows(metrics: list[dict]) -> list[list[str]]:
    """One row per training step that fused (``fusion/gate_open`` recorded): the step and the
    :data:`STEP_COLUMNS`."""
    rows = []
    for record in metrics:
        if "fusion/gate_open" not in record:
            continue
        cells = [str(record["step"])]
        for key, (_, digits) in STEP_COLUMNS.items():
            value = record.get(key)
            cells.append("n/a" if value is None else number(float(value), digits))
        rows.append(cells)
    return rows


def run_section(folder: Path) -> str:
    """The section of one archived run: its provenance, what ``wmrl train`` printed, the steps."""
    provenance = json.loads((folder / "provenance.json").read_text())
    summary = json.loads((folder / "summary.json").read_text())
    caveat = OmegaConf.select(OmegaConf.load(folder / "config.yaml"), "logging.caveat")
    metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    header = ["step", *(title for title, _ in STEP_COLUMNS.values())]
    rows = step_rows(metrics)
    lines = [
        f"## {folder.name}",
        "",
        f"`{provenance['command']}` at commit {provenance['commit']}. {provenance['note']}",
        "",
        "What `wmrl train` prints at its end for this run, in today's wording (`wmrl_core.cli.summary_lines` on "
        "its `summary.json` and its config's caveat):",
        "",
        "```",
        *summary_lines(summary, caveat),
        "```",
        "",
    ]
    if rows:
        lines += ["Per training step (`metrics.jsonl`):", "", markdown_table(header, rows), ""]
    return "\n".join(lines)


def write_page(archive: Path = ARCHIVE, out: Path = OUT) -> Path:
    """Write :data:`PAGE` into ``out``: every archived run, oldest first (by its folder's name)."""
    folders = sorted((p for p in archive.iterdir() if (p / "provenance.json").is_file()), key=_order)
    if not folders:
        raise ValueError(f"no archived run in {archive}: add one with --add RUN_DIR")
    text = [
        "# AutoResearch: the main job's runs",
        "",
        "Rebuilt from `experiments/main_job/archive/` by `python -m experiments.main_job.page`; what the job runs "
        "and what the runs show: [main_job.md](main_job.md).",
        "",
        *(run_section(folder) for folder in folders),
    ]
    out.mkdir(parents=True, exist_ok=True)
    path = out / PAGE
    path.write_text("\n".join(text).rstrip("\n") + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.main_job.page", description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", type=Path, default=ARCHIVE, help=f"archived runs (default {ARCHIVE})")
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder of the page (default {OUT})")
    parser.add_argument("--add", type=Path, default=None, metavar="RUN_DIR", help="archive this finished run first")
    parser.add_argument("--label", help="with --add: the run's folder name in the archive (sorted: oldest first)")
    parser.add_argument("--commit", help="with --add: the commit the run ran at")
    parser.add_argument("--command", default="bash quickstart.sh", help="with --add: the command that ran it")
    parser.add_argument("--note", default="", help="with --add: the machine and anything else the run depended on")
    args = parser.parse_args(argv)
    try:
        if args.add is not None:
            if not args.label or not args.commit:
                parser.error("--add needs --label and --commit")
            print(f"archived in {add_run(args.add, args.label, args.commit, args.command, args.note, args.archive)}")
        print(f"written {write_page(args.archive, args.out)}")
    except (OSError, ValueError) as exc:
        print(f"experiments.main_job.page: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What every study's report is made of: markdown tables, intervals, per-seed tables, the common
command-line flags and the one parser of seed and index lists.

    from wmrl_core.experiments import report

    parser = argparse.ArgumentParser()
    report.add_common_flags(parser, seeds="0-5", runs="runs/my_study", archive="experiments/my_study/archive")
    args = parser.parse_args()          # args.seeds == [0, 1, 2, 3, 4, 5]
    print(report.markdown_table(["arm", "score"], [["real", report.interval_text([0.5, 0.6, 0.55])]]))
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wmrl_core.experiments.stats import mean_t_interval

__all__ = [
    "parse_int_ranges",
    "format_int_ranges",
    "seed_list",
    "add_common_flags",
    "markdown_table",
    "number",
    "interval_text",
    "per_seed_table",
    "page_from_record",
]


def parse_int_ranges(text: str) -> list[int]:
    """Comma-separated integers and inclusive ranges ``a-b`` (``a <= b``), in the order written:
    ``"0-4,7"`` -> ``[0, 1, 2, 3, 4, 7]``; empty parts are ignored. Anything else is a
    ``ValueError`` that quotes the text."""
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise ValueError(
                f"{text!r}: {part!r} is not an integer or a range a-b; write indices like '0-4,7'"
            ) from None
        if b < a:
            raise ValueError(f"{text!r}: the range {part!r} runs backwards; write it low-high ('{b}-{a}')")
        out.extend(range(a, b + 1))
    return out


def format_int_ranges(values: Sequence[int]) -> str:
    """The inverse of :func:`parse_int_ranges`: ``[0, 1, 2, 5]`` -> ``"0-2,5"`` (runs of consecutive
    integers as ranges, in the given order)."""
    parts: list[str] = []
    run: list[int] = []
    for v in values:
        if run and v == run[-1] + 1:
            run.append(v)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [v]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def seed_list(text: str) -> list[int]:
    """``--seeds`` as every study reads it (an ``argparse`` type): a list or ranges of seeds, ``0-4``
    or ``0,3,7``. A bare integer is refused: studies once read it as a count, so ``--seeds 3`` would
    silently mean seed 3 alone to one reader and seeds 0-2 to another."""
    text = str(text).strip()
    if text.isdigit():
        n = int(text)
        count = f"0-{n - 1} for {n} seed{'s' if n > 1 else ''} from 0, or " if n else ""
        raise argparse.ArgumentTypeError(f"--seeds {text} is ambiguous: write {count}{n}-{n} for seed {n} alone")
    try:
        values = parse_int_ranges(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r} names no seed; write seeds like '0-5' or '0,3,7'")
    return values


def add_common_flags(
    parser: argparse.ArgumentParser,
    *,
    seeds: str | None = None,
    runs: str | None = None,
    archive: str | None = None,
    out: str | None = None,
    quick: bool = True,
) -> argparse.ArgumentParser:
    """The flags every study takes, with the study's defaults (``None``: the flag is required,
    except ``archive`` and ``out``, which are then off):

    ``--seeds`` a list of seeds (``0-5``, ``0,3,7``; never a count), ``--runs`` the run folders,
    ``--archive`` the committed copy of finished arm-seeds, ``--out`` where the page goes,
    ``--quick`` every arm end to end at toy size (the CI check)."""
    parser.add_argument(
        "--seeds",
        type=seed_list,
        default=None if seeds is None else seed_list(seeds),
        required=seeds is None,
        help=f"seeds, a list or ranges: '0-5' or '0,3,7' (default {seeds})",
    )
    parser.add_argument("--runs", default=runs, required=runs is None, help=f"run folders (default {runs})")
    parser.add_argument("--archive", default=archive, help=f"archive of finished arm-seeds (default {archive})")
    parser.add_argument("--out", default=out, help=f"where the results page goes (default {out})")
    if quick:
        parser.add_argument("--quick", action="store_true", help="every arm end to end at toy size (the CI check)")
    return parser


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """A GitHub markdown table. ``align``: one character per column, ``l``, ``r`` or ``c``
    (default: the first column left, the others right). ``|`` in a cell is escaped."""
    n = len(header)
    align = align or ("l" + "r" * (n - 1))
    if len(align) != n or set(align) - set("lrc"):
        raise ValueError(f"align needs one of l, r, c per column ({n}), got {align!r}")
    bad = [i for i, row in enumerate(rows) if len(row) != n]
    if bad:
        raise ValueError(f"rows {bad} do not have {n} cells like the header {list(header)}")
    rule = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "|" + "|".join(rule[a] for a in align) + "|",
        *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows),
    ]
    return "\n".join(lines)


def number(value: float | None, digits: int = 3, *, signed: bool = False) -> str:
    """``value`` to ``digits`` decimals (``+`` shown when ``signed``); ``n/a`` for None and NaN."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def interval_text(values: Sequence[float | None], digits: int = 3, *, signed: bool = False) -> str:
    """Mean over seeds with its 95% t-interval, ``0.512 [0.470, 0.554]``; one value: the value;
    none: ``n/a``."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return "n/a"
    mean, half = mean_t_interval(finite)
    if len(finite) == 1:
        return number(mean, digits, signed=signed)
    return f"{number(mean, digits, signed=signed)} [{number(mean - half, digits, signed=signed)}, {number(mean + half, digits, signed=signed)}]"


def per_seed_table(values: Mapping[str, Mapping[int, float | None]], digits: int = 3, *, signed: bool = False) -> str:
    """Every seed's value per column (``values[column][seed]``), then the mean with its 95%
    t-interval; a seed a column lacks shows ``n/a``."""
    columns = list(values)
    seeds = sorted({s for col in values.values() for s in col})
    rows = [[str(s), *(number(values[c].get(s), digits, signed=signed) for c in columns)] for s in seeds]
    rows.append(
        ["mean [95% t]", *(interval_text([values[c].get(s) for s in seeds], digits, signed=signed) for c in columns)]
    )
    return markdown_table(["seed", *columns], rows)


def page_from_record(record: Path, page: Path, render: Callable[[dict], str], what: str) -> str:
    """Write ``page`` from a JSON ``record`` alone, ``render(record)``, and return its text: how a study's page is
    rebuilt from the record its run wrote.

    :raises ValueError: naming the record and ``what`` it should be, when it cannot be read or rendered.
    """
    try:
        text = render(json.loads(Path(record).read_text()))
    except (OSError, ValueError, LookupError, TypeError, AttributeError) as exc:  # whatever a wrong record raises
        raise ValueError(f"{record}: not {what} ({exc!r})") from None
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    return text


def refuse_run_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, keep: Sequence[str]) -> None:
    """With ``--from-json``, stop on any flag that shapes the run rather than the page: the record fixed
    the run's settings, so such a flag would be silently ignored. ``keep``: the destinations that belong to
    rebuilding (``from_json``, the output folder). Exits through ``parser.error`` naming the flags."""
    changed = [
        f"--{dest.replace('_', '-')}"
        for dest, value in vars(args).items()
        if dest not in keep and value != parser.get_default(dest)
    ]
    if changed:
        parser.error(
            f"--from-json rebuilds the page from its record, which fixed the run's settings: {', '.join(changed)} "
            "would change the run, not the page; drop it, or run without --from-json"
        )

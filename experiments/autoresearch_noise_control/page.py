"""The noise-control page (``noise_control.md``'s table and ``noise_control_entropy.png``) rendered
again from every run's record committed beside it (``noise_control.json``: each cell, source and
seed's entropy curve and its initial and final measurements). The page's prose is written by hand;
only its table, the block that starts with the table's header row, is replaced.

    python -m experiments.autoresearch_noise_control.page        # docs/results/autoresearch
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from experiments.autoresearch_noise_control import noise_control as nc

PAGE = Path("docs/results/autoresearch")
RECORD, TEXT, PLOT = "noise_control.json", "noise_control.md", "noise_control_entropy.png"


def cells_of(results: list[dict[str, Any]]) -> list[tuple[float, float, float]]:
    """The grid's cells in run order (the records' first appearance: seeds outer, cells inner)."""
    return list(dict.fromkeys((r["lr"], r["entropy_coef"], r["kl_coef"]) for r in results))


def replace_table(text: str, table: str) -> str:
    """``text`` with the markdown table that starts with ``table``'s header row replaced by ``table``.

    :raises ValueError: the text has no such header row."""
    lines = text.split("\n")
    header = table.split("\n", 1)[0]
    if header not in lines:
        raise ValueError(f"the page has no table that starts with {header!r}")
    first = lines.index(header)
    last = first
    while last + 1 < len(lines) and lines[last + 1].startswith("|"):
        last += 1
    return "\n".join([*lines[:first], *table.split("\n"), *lines[last + 1 :]])


def build_page(results: list[dict[str, Any]], out: Path, threshold: float) -> str:
    """The plot into ``out``, and the table into ``out``'s page when it has one; returns the table."""
    cells = cells_of(results)
    table = nc.table(results, cells, threshold)
    out.mkdir(parents=True, exist_ok=True)
    nc.plot(results, cells, out / PLOT)
    page = out / TEXT
    if page.is_file():
        page.write_text(replace_table(page.read_text(), table))
    return table


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=PAGE, help=f"where the page is (default {PAGE})")
    parser.add_argument("--record", type=Path, default=None, help=f"every run's record (default OUT/{RECORD})")
    parser.add_argument("--threshold", type=float, default=0.8, help="share of initial entropy a noise run must keep")
    args = parser.parse_args(argv)
    results = json.loads((args.record or args.out / RECORD).read_text())
    print(build_page(results, args.out, args.threshold))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

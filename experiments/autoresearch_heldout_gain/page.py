"""The held-out-gain pages (``heldout_gain_table.md`` and ``heldout_gain.png``) rendered again from
the record committed beside them (``heldout_gain.json``: every seed's evaluation summaries, gains,
paired difference with its evaluation s.e., and training curves). The runs' per-program evaluations
were not kept, so the evaluation s.e. are read from the record, not bootstrapped again.

    python -m experiments.autoresearch_heldout_gain.page                     # docs/results/autoresearch
    python -m experiments.autoresearch_heldout_gain.page --out docs/results/autoresearch/heldout_gain_outcome_wm
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from experiments.autoresearch_heldout_gain import heldout_gain as hg

PAGE = Path("docs/results/autoresearch")


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=PAGE, help=f"where the page goes (default {PAGE})")
    parser.add_argument("--record", type=Path, default=None, help=f"the record (default OUT/{hg.RECORD})")
    args = parser.parse_args(argv)
    record = args.record or args.out / hg.RECORD
    hg.write_page(json.loads(record.read_text()), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

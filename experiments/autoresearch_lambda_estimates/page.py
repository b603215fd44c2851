"""The λ-estimates page (``lambda_estimates.md``) rendered again from the record committed beside it
(``lambda_estimates.json``: the settings, every group's rewards, λ* with its bootstrap interval and
every estimator's errors). The per-group gradients were not kept (nor the policy's checkpoint), so
the figures are read from the record, not computed again.

    python -m experiments.autoresearch_lambda_estimates.page     # docs/results/autoresearch/lambda_estimates
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from experiments.autoresearch_lambda_estimates import lambda_estimates as le

PAGE = Path("docs/results/autoresearch/lambda_estimates")
RECORD, TEXT = "lambda_estimates.json", "lambda_estimates.md"


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=PAGE, help=f"where the page goes (default {PAGE})")
    parser.add_argument("--record", type=Path, default=None, help=f"the run's record (default OUT/{RECORD})")
    args = parser.parse_args(argv)
    text = le.markdown(json.loads((args.record or args.out / RECORD).read_text()))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / TEXT).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

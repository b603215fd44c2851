"""Wall time of ``wmrl`` commands that must answer at once: ``python benchmarks/cli_startup.py [--repeat N]``.

Each command runs ``--repeat`` times (default 5) in a fresh subprocess, from the repository root;
the median seconds are printed for two launchers: ``wmrl`` as installed on ``PATH`` (on a pyenv
machine this goes through the pyenv shim, whose own start-up is included) and
``python -m wmrl_core.cli`` (the interpreter alone).

Measured on the 2-core development machine while a background experiment kept it busy (load
about 3), medians of 5, seconds: before the imports of the error and help paths were deferred,
and after::

    command                      before: wmrl  python -m    after: wmrl  python -m
    wmrl --help                          0.05       0.05            0.05       0.05
    wmrl train --help                    3.15       3.03            0.27       0.29
    wmrl train missing.yaml              2.93       2.83            0.12       0.11

Before, ``train`` imported the trainer (torch, scikit-learn, scipy) before reading the config,
and the registry imported every fusion method with its package. Now a config is read first, the
plugins' registrations import nothing heavy, and the fusion methods' settings live in
:mod:`wmrl_core.fusion.settings`; ``tests/test_new_user_faults.py`` checks that the help and error
paths do not import torch or scikit-learn.

Run the script for the figures of the code as it is now.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (["--help"], ["train", "--help"], ["train", "missing.yaml"])


def median_seconds(argv: list[str], repeat: int) -> float:
    """Median wall seconds of ``argv`` run ``repeat`` times, each in a fresh process (output discarded)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per command (default 5)")
    args = parser.parse_args(argv)
    installed = shutil.which("wmrl")
    print(f"{'command':<28} {'wmrl':>8} {'python -m wmrl_core.cli':>24}")
    for command in COMMANDS:
        via_path = f"{median_seconds([installed, *command], args.repeat):8.2f}" if installed else f"{'-':>8}"
        via_python = median_seconds([sys.executable, "-m", "wmrl_core.cli", *command], args.repeat)
        print(f"{'wmrl ' + ' '.join(command):<28} {via_path} {via_python:24.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Every check that needs an NVIDIA GPU: ``python benchmarks/gpu_check.py [--only ...] [--json FILE]``.

A launcher of :mod:`wmrl_core.experiments.gpu_check` (where the checks and their documentation
live), kept at this path because GPU sessions and ``.ci/run`` call it here.
"""

import sys

from wmrl_core.experiments.gpu_check import main

if __name__ == "__main__":
    sys.exit(main())

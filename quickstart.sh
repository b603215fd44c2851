#!/usr/bin/env bash
# Installs WMRL and runs the main job on its embedded default (no GPU, no downloads).
set -euo pipefail
cd "$(dirname "$0")"
python3 -m pip install -q "torch==2.13.0"
python3 -m pip install -q -e . "torch==2.13.0"
wmrl experiment synthetic --seeds 3 --out runs/experiment-synthetic

#!/usr/bin/env bash
# The main job on its embedded default, from a fresh machine:
#   installs WMRL and the AutoResearch plugin, gets Docker running (Debian's docker.io, an
#   image built locally with no registry), then trains the program policy with WMRL on the 89
#   tasks of the pool's R families, with a world model fitted only on the W families' executions,
#   and reports the score on 21 held-out tasks (the E families, never seen by either) before and
#   after training, with standard errors, n_eff, the predicted compute ratio and what one run shows.
# Extra arguments are passed to `wmrl train` as overrides (e.g. steps=8).
set -euo pipefail
cd "$(dirname "$0")"
say() { echo "[quickstart] $*"; }

say "installing wmrl and wmrl-autoresearch (CPU torch 2.13.0)"
python3 -m pip install -q "torch==2.13.0"
python3 -m pip install -q -e . -e plugins/autoresearch "torch==2.13.0"

docker_ready() { docker info >/dev/null 2>&1 && docker image inspect wmrl-autoresearch-sandbox:latest >/dev/null 2>&1; }
if ! docker_ready; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "setting up Docker and the sandbox image (first run only: about 3-5 minutes)"
    bash plugins/autoresearch/ci/setup.sh || say "Docker set-up failed (see the messages above)"
  else
    say "Docker is not running and this shell cannot install it (needs root and apt-get)"
  fi
fi

if docker_ready; then
  wmrl train configs/autoresearch/quickstart.yaml "$@"
else
  say "Docker cannot run here, so the AutoResearch job (which executes generated scripts) was NOT run:"
  say "its real execution needs the sandbox. Running the synthetic experiment instead, which needs no execution."
  say "On trusted code only, the job also runs without isolation:"
  say "  wmrl train configs/autoresearch/quickstart.yaml environment.kwargs.sandbox=local-unsafe"
  wmrl experiment synthetic --seeds 0-2 --out runs/experiment-synthetic
fi

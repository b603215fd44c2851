#!/usr/bin/env bash
# Prepare a machine for the AutoResearch tests: Docker engine running, sandbox image built,
# plugin installed. Idempotent; run as root from the repository root, after the core is
# installed (`pip install -e .`):
#
#     bash plugins/autoresearch/ci/setup.sh
#
# Leaves dockerd running in the background (log: /var/log/wmrl-dockerd.log). Needs the Debian
# mirror and a Python package index (or local wheels) only when the image must be built.
set -euo pipefail

PLUGIN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${WMRL_AUTORESEARCH_IMAGE:-wmrl-autoresearch-sandbox:latest}"
PYTHON="${PYTHON:-python}"
log() { echo "[autoresearch setup $(date -u +%H:%M:%S)] $*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "plugins/autoresearch/ci/setup.sh must run as root (it installs packages and starts dockerd)" >&2
  exit 1
fi

# 1. Docker engine and debootstrap from Debian's archive (no Docker Hub involved).
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. Start dockerd unless an engine already answers; wait for its socket.
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  setsid nohup dockerd >/var/log/wmrl-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    echo "dockerd did not come up within 60 s; last lines of /var/log/wmrl-dockerd.log:" >&2
    tail -n 30 /var/log/wmrl-dockerd.log >&2 || true
    exit 1
  fi
fi
log "docker engine ready: $(docker version --format '{{.Server.Version}}')"

# 3. The plugin itself (editable), which also provides the image builder.
log "installing wmrl-autoresearch"
"$PYTHON" -m pip install --quiet --disable-pip-version-check -e "$PLUGIN_DIR"

# 4. The sandbox image, built without any registry if it is missing.
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "image $IMAGE present"
else
  log "building $IMAGE (debootstrap + docker import, ~1-2 min)"
  "$PYTHON" -m wmrl_autoresearch.cli build-image --tag "$IMAGE"
fi

# 5. Orphans of earlier interrupted runs.
"$PYTHON" -m wmrl_autoresearch.cli sweep
log "done"

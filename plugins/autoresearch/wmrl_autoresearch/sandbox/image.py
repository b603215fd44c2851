"""The sandbox image: its name, the in-image user, and a build that needs no registry.

Two ways to get ``wmrl-autoresearch-sandbox:latest``:

* with Docker Hub: ``docker build -t wmrl-autoresearch-sandbox:latest -f Dockerfile .`` in
  ``plugins/autoresearch`` (``Dockerfile.cuda`` for a CUDA build of torch);
* without any registry (CI, air-gapped hosts): :func:`build_image_offline`, exposed as
  ``wmrl-autoresearch build-image``. It bootstraps a minimal Debian bookworm root file
  system with ``debootstrap`` (Debian mirror only), installs numpy, pandas, scikit-learn and
  torch (CPU) into it with the *host's* pip (``--target``, cp311 manylinux wheels; PyPI or a
  local wheel directory), trims tests and headers, compiles the bytecode of every installed
  module (the image is read-only at run time, so without ``.pyc`` files every script would
  compile pandas and scikit-learn again: ~3 instead of ~1 CPU-second of imports), and streams
  the tree into ``docker import`` through the Docker SDK.

Both images run ``sleep`` as their main process, as the unprivileged user
``sandbox`` (uid/gid :data:`SANDBOX_UID`), with Python 3.11 at ``/usr/bin/python3``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from wmrl_core.errors import ComponentError

__all__ = [
    "SANDBOX_IMAGE",
    "SANDBOX_UID",
    "ImageBuildError",
    "OfflineImageBuild",
    "build_image_offline",
    "image_exists",
]

log = logging.getLogger(__name__)

SANDBOX_IMAGE = os.environ.get("WMRL_AUTORESEARCH_IMAGE", "wmrl-autoresearch-sandbox:latest")
"""Default image name (repository:tag) of the sandboxes; ``$WMRL_AUTORESEARCH_IMAGE`` overrides it."""

SANDBOX_UID = 10001
"""uid and gid of the unprivileged ``sandbox`` user every solution runs as."""

IMAGE_LABEL = "org.wmrl.autoresearch.sandbox-image"

PYTHON_PACKAGES = ("numpy", "pandas", "scikit-learn", "torch==2.13.0")
"""What the image must hold; torch is the CPU build (the pinned wheel on this project's hosts)."""

# The python3 of Debian bookworm is CPython 3.11: the wheels must be cp311 manylinux ones.
_PIP_TARGET_FLAGS = (
    "--only-binary=:all:",
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--abi",
    "cp311",
    "--platform",
    "manylinux_2_28_x86_64",
    "--no-compile",
    "--no-warn-conflicts",
)

# Dropped from the root file system to keep the image small; none is needed at run time.
_TRIM_PATHS = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "var/cache/apt",
    "var/lib/apt/lists",
    "usr/local/lib/python3.11/dist-packages/torch/include",
    "usr/local/lib/python3.11/dist-packages/torch/test",
    "usr/local/lib/python3.11/dist-packages/bin",
)

IMAGE_ENV = {
    "HOME": "/tmp",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "MPLCONFIGDIR": "/tmp",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
}


class ImageBuildError(ComponentError):
    """The offline image build failed; the message names the step and the fix."""


@dataclass
class OfflineImageBuild:
    """Settings of the registry-free build.

    :param tag: image name to create (``repository:tag``).
    :param suite: Debian suite; must ship CPython 3.11 (bookworm does).
    :param mirror: Debian mirror URL used by debootstrap.
    :param packages: pip requirement strings installed into the image.
    :param extra_pip_args: passed to pip as is (``--index-url``, ``--find-links`` ...).
    :param cache_dir: debootstrap's package cache, reused by later builds.
    :param work_dir: where the root file system is assembled (needs ~1.5 GB).
    """

    tag: str = SANDBOX_IMAGE
    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"
    packages: tuple[str, ...] = PYTHON_PACKAGES
    extra_pip_args: tuple[str, ...] = ()
    cache_dir: Path = Path("/var/cache/wmrl-autoresearch/debootstrap")
    work_dir: Path | None = None
    timings_s: dict[str, float] = field(default_factory=dict)


def image_exists(client, tag: str = SANDBOX_IMAGE) -> bool:
    """Whether the Docker engine behind ``client`` has the image ``tag``."""
    import docker.errors

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _run(step: str, argv: list[str], fix: str) -> None:
    log.info("image build: %s: %s", step, " ".join(argv))
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-25:])
        raise ImageBuildError(f"image build step `{step}` failed (exit {proc.returncode}); {fix}\n{tail}")


def _check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise ImageBuildError("the offline image build must run as root (debootstrap needs it); rerun with sudo")
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed; run `apt-get install -y debootstrap`")


def _bootstrap_rootfs(build: OfflineImageBuild, rootfs: Path) -> None:
    build.cache_dir.mkdir(parents=True, exist_ok=True)
    _run(
        "debootstrap",
        [
            "debootstrap",
            "--variant=minbase",
            "--include=python3,libgomp1",
            f"--cache-dir={build.cache_dir}",
            build.suite,
            str(rootfs),
            build.mirror,
        ],
        f"check that the Debian mirror {build.mirror} is reachable (or pass --mirror)",
    )


def _install_python_packages(build: OfflineImageBuild, rootfs: Path) -> None:
    site = rootfs / "usr/local/lib/python3.11/dist-packages"
    site.mkdir(parents=True, exist_ok=True)
    _run(
        "pip install",
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--target",
            str(site),
            *_PIP_TARGET_FLAGS,
            *build.extra_pip_args,
            *build.packages,
        ],
        "check that PyPI (or the index given with --pip-arg) is reachable and has cp311 wheels",
    )


def _trim_and_configure(rootfs: Path) -> None:
    for rel in _TRIM_PATHS:
        shutil.rmtree(rootfs / rel, ignore_errors=True)
    site = rootfs / "usr/local/lib/python3.11/dist-packages"
    for top, dirs, _ in os.walk(site):  # test suites of the installed packages: never imported at run time
        for name in [d for d in dirs if d == "tests"]:
            shutil.rmtree(os.path.join(top, name), ignore_errors=True)
            dirs.remove(name)
    torch_bin = site / "torch/bin"
    if torch_bin.is_dir():  # test binaries and protoc; keep torch_shm_manager (multiprocessing)
        for item in torch_bin.iterdir():
            if item.name != "torch_shm_manager":
                shutil.rmtree(item, ignore_errors=True) if item.is_dir() else item.unlink()
    uid = SANDBOX_UID
    with open(rootfs / "etc/passwd", "a") as f:
        f.write(f"sandbox:x:{uid}:{uid}:wmrl sandbox:/tmp:/usr/sbin/nologin\n")
    with open(rootfs / "etc/group", "a") as f:
        f.write(f"sandbox:x:{uid}:\n")
    for mount_point in ("data", "code", "output"):
        (rootfs / mount_point).mkdir(exist_ok=True)
    (rootfs / "etc/wmrl-sandbox-release").write_text(
        f"built-by=wmrl-autoresearch build-image\nbuilt-at={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
    )


def _compile_bytecode(rootfs: Path) -> None:
    """Write ``__pycache__/*.cpython-311.pyc`` for the installed packages (unchecked hashes: the
    image is read-only, so the sources never change and need not be stat'ed at import)."""
    if sys.version_info[:2] != (3, 11):  # the bytecode format is per minor version
        log.warning(
            "image build: host Python is %d.%d, not 3.11; bytecode not compiled (imports ~3x slower)",
            *sys.version_info[:2],
        )
        return
    site = rootfs / "usr/local/lib/python3.11/dist-packages"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            "-j",
            "2",
            "--invalidation-mode",
            "unchecked-hash",
            "-s",
            str(rootfs),
            "-p",
            "/",
            str(site),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode != 0:  # a few modules of the wheels may not compile (templates, Python 2 leftovers)
        log.warning(
            "image build: some modules were not compiled (they compile at import instead):\n%s",
            "\n".join(proc.stdout.splitlines()[-10:]),
        )


def _tar_stream(rootfs: Path, chunk_bytes: int = 1 << 20) -> Iterator[bytes]:
    proc = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        while chunk := proc.stdout.read(chunk_bytes):
            yield chunk
    finally:
        proc.stdout.close()
        if proc.wait() != 0:
            raise ImageBuildError(f"tar of {rootfs} failed with exit {proc.returncode}")


def _import_image(client, build: OfflineImageBuild, rootfs: Path) -> None:
    repository, _, tag = build.tag.rpartition(":")
    if not repository:
        repository, tag = build.tag, "latest"
    changes = [f"ENV {k}={v}" for k, v in IMAGE_ENV.items()] + [
        f"USER {SANDBOX_UID}:{SANDBOX_UID}",
        "WORKDIR /tmp",
        f"LABEL {IMAGE_LABEL}=1",
        'CMD ["sleep", "infinity"]',
    ]
    client.api.import_image_from_stream(_tar_stream(rootfs), repository=repository, tag=tag, changes=changes)


def _smoke_test(client, tag: str) -> str:
    out = client.containers.run(
        tag,
        [
            "python3",
            "-c",
            "import numpy, pandas, sklearn, torch; print(numpy.__version__, pandas.__version__, "
            "sklearn.__version__, torch.__version__)",
        ],
        remove=True,
        network_disabled=True,
        read_only=True,
        tmpfs={"/tmp": "size=64m"},
    )
    return out.decode().strip()


def build_image_offline(build: OfflineImageBuild | None = None, client=None) -> OfflineImageBuild:
    """Build the sandbox image without any container registry; returns the build with timings.

    Needs root, ``debootstrap``, a reachable Debian mirror, a reachable Python package index
    (or local wheels) and a running Docker engine. Takes 1-3 minutes; the work directory is
    removed afterwards, even on failure.

    :raises ImageBuildError: naming the failed step and what to fix.
    """
    import docker

    build = build or OfflineImageBuild()
    _check_prerequisites()
    client = client or docker.from_env(timeout=900)
    work = Path(tempfile.mkdtemp(prefix="wmrl-sandbox-rootfs-", dir=build.work_dir or "/var/tmp"))
    rootfs = work / "rootfs"
    try:
        for step, fn in (
            ("debootstrap", lambda: _bootstrap_rootfs(build, rootfs)),
            ("pip", lambda: _install_python_packages(build, rootfs)),
            ("trim", lambda: _trim_and_configure(rootfs)),
            ("compile", lambda: _compile_bytecode(rootfs)),
            ("import", lambda: _import_image(client, build, rootfs)),
        ):
            t0 = time.perf_counter()
            fn()
            build.timings_s[step] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        versions = _smoke_test(client, build.tag)
        build.timings_s["smoke_test"] = round(time.perf_counter() - t0, 1)
        log.info("image %s built; numpy pandas sklearn torch = %s", build.tag, versions)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return build

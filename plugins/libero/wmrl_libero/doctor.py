"""``wmrl-libero doctor``: check every piece LIBERO needs and say how to fix what is wrong."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from wmrl_libero.runtime import GL_APT_PACKAGES

__all__ = ["PINNED_VERSIONS", "Check", "run_checks"]

# Verified together on CPU; see docs/install.md (pinned versions).
PINNED_VERSIONS = {"mujoco": "3.9.0", "robosuite": "1.4.0", "libero": "0.1.1", "bddl": "1.0.1"}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _versions() -> list[Check]:
    checks = []
    for name, wanted in PINNED_VERSIONS.items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            fix = "pip install --no-deps libero==0.1.1" if name == "libero" else f"pip install {name}=={wanted}"
            checks.append(Check(f"package {name}", False, "not installed", fix))
            continue
        ok = have == wanted
        checks.append(
            Check(
                f"package {name}",
                ok,
                f"{have}" + ("" if ok else f" (verified: {wanted})"),
                "" if ok else f"pip install {'--no-deps ' if name == 'libero' else ''}{name}=={wanted}",
            )
        )
    return checks


def _gl() -> Check:
    from wmrl_libero.errors import LiberoSetupError
    from wmrl_libero.runtime import choose_mujoco_gl

    try:
        backend = choose_mujoco_gl()
    except LiberoSetupError as exc:
        return Check("headless GL", False, str(exc), f"apt-get install -y {GL_APT_PACKAGES}")
    return Check("headless GL", True, f"MUJOCO_GL={backend}")


def _assets() -> Check:
    from wmrl_libero.assets import default_assets_dir, load_manifest, verify_assets

    try:
        root = default_assets_dir()
    except Exception as exc:
        return Check("scene assets", False, str(exc), "wmrl-libero install")
    manifest = load_manifest()
    problems = verify_assets(root, manifest)
    if problems:
        shown = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
        return Check(
            "scene assets",
            False,
            f"{len(problems)} of {len(manifest)} files wrong at {root}: {shown}",
            "wmrl-libero install --force",
        )
    return Check("scene assets", True, f"{len(manifest)} files match the manifest at {root}")


def _config() -> Check:
    from wmrl_libero.runtime import write_libero_config

    try:
        path = write_libero_config()
    except Exception as exc:
        return Check("LIBERO config", False, str(exc), "pip install --no-deps libero==0.1.1")
    return Check("LIBERO config", True, str(path))


def _simulate() -> Check:
    """Build LIBERO-10 task 0 physics-only, reset to init state 0, take 5 steps."""

    try:
        from wmrl_libero.gym_env import NOOP_ACTION, LiberoGymEnv

        env = LiberoGymEnv("libero_10", 0, settle_steps=0)
        try:
            env.reset(seed=0, options={"init_state": 0})
            for _ in range(5):
                env.step(NOOP_ACTION)
        finally:
            env.close()
    except Exception as exc:
        return Check(
            "simulation", False, f"{type(exc).__name__}: {exc}", "see the checks above; rerun `wmrl-libero install`"
        )
    return Check("simulation", True, "libero_10 task 0: built, reset to init state 0, 5 steps")


def _render(size: int = 32) -> Check:
    try:
        from wmrl_libero.gym_env import NOOP_ACTION, LiberoGymEnv

        env = LiberoGymEnv("libero_10", 0, image_size=size, settle_steps=0)
        try:
            obs, _ = env.reset(seed=0, options={"init_state": 0})
            env.step(NOOP_ACTION)
            std = float(obs["agentview_image"].std())
        finally:
            env.close()
    except Exception as exc:
        return Check("rendering", False, f"{type(exc).__name__}: {exc}", f"apt-get install -y {GL_APT_PACKAGES}")
    ok = std > 1.0
    return Check(
        "rendering",
        ok,
        f"agentview {size}x{size} rendered, pixel std {std:.1f}",
        "" if ok else "images are blank: check MUJOCO_GL (egl or osmesa)",
    )


def run_checks(*, simulate: bool = True, render: bool = True) -> list[Check]:
    """All checks in dependency order; later ones are skipped once an earlier one fails."""
    checks = _versions() + [_gl(), _config(), _assets()]
    if all(c.ok for c in checks):
        if simulate:
            checks.append(_simulate())
        if render and checks[-1].ok:
            checks.append(_render())
    return checks

"""Config writing and the GL error message (no simulator needed)."""

import ctypes.util

import pytest
import yaml
from wmrl_libero import runtime
from wmrl_libero.errors import LiberoSetupError


def test_missing_gl_names_the_apt_packages(monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(LiberoSetupError, match="apt-get install -y libegl1 .*libosmesa6"):
        runtime.choose_mujoco_gl()


def test_explicit_osmesa_without_library_fails(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(LiberoSetupError, match="OSMesa"):
        runtime.choose_mujoco_gl()


def test_write_libero_config_points_inside_the_installed_package(tmp_path):
    pytest.importorskip("libero", reason="libero not installed (run plugins/libero/ci/setup.sh)")
    path = runtime.write_libero_config(tmp_path)
    config = yaml.safe_load(path.read_text())
    assert set(config) == {"benchmark_root", "bddl_files", "init_states", "datasets", "assets"}
    assert config["bddl_files"].endswith("libero/libero/bddl_files")
    mtime = path.stat().st_mtime_ns
    assert runtime.write_libero_config(tmp_path) == path and path.stat().st_mtime_ns == mtime  # idempotent

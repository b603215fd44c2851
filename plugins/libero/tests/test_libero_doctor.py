"""`wmrl-libero doctor` on the installed stack (no simulator build: --quick)."""

from wmrl_libero.cli import main
from wmrl_libero.doctor import run_checks
from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require


def test_doctor_quick_passes_on_an_installed_machine(capsys):
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    checks = run_checks(simulate=False, render=False)
    assert [c.name for c in checks if not c.ok] == []
    assert {c.name for c in checks} >= {"package mujoco", "package libero", "headless GL", "scene assets"}
    assert main(["doctor", "--quick"]) == 0
    assert "all checks passed" in capsys.readouterr().out


def test_doctor_names_the_fix_for_a_wrong_version(monkeypatch):
    from importlib import metadata

    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "4.0.0" if name == "mujoco" else real(name))
    checks = run_checks(simulate=False, render=False)
    bad = [c for c in checks if c.name == "package mujoco"][0]
    assert not bad.ok and bad.fix == "pip install mujoco==3.9.0"

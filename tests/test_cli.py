import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # every test starts the `wmrl` CLI in a fresh interpreter (torch import)


def _wmrl(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "wmrl_core.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_train_smoke_writes_run_and_prints_where(synthetic_config, tmp_path):
    proc = _wmrl(
        "train",
        str(synthetic_config),
        f"run_dir={tmp_path / 'r'}",
        "steps=3",
        "eval.every=3",
        "logging.tensorboard=false",
    )
    assert proc.returncode == 0, proc.stderr
    assert "run directory:" in proc.stdout
    assert (tmp_path / "r" / "summary.json").exists()


def test_train_bad_config_is_a_clean_error(synthetic_config):
    proc = _wmrl("train", str(synthetic_config), "grpo.lrr=1")
    assert proc.returncode == 2
    assert "grpo.lrr" in proc.stderr and "Traceback" not in proc.stderr
    proc = _wmrl("train", str(synthetic_config), "policy.name=tabular-softmx")
    assert proc.returncode == 2 and "Did you mean `tabular-softmax`" in proc.stderr


def test_plugins_json_lists_builtin_components():
    proc = _wmrl("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    plugins = {p["name"]: p for p in json.loads(proc.stdout)}
    assert plugins["wmrl_core.synthetic.plugin"]["components"]["environment"] == ["synthetic-bandit"]
    human = _wmrl("plugins")
    assert "synthetic-bandit" in human.stdout

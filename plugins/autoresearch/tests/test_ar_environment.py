"""The plugin as WMRL sees it: registration, the environment contract, the CLI, the image."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from wmrl_autoresearch.tasks.task import N_FEATURES

from wmrl_core.checkers import check_environment, check_reward_extractor
from wmrl_core.plugins import build_registry, get_plugin_manager

GOOD_SKLEARN = """
import os
import pandas as pd
from sklearn.linear_model import LogisticRegression
train = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "train.csv"))
test = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "test.csv"))
model = LogisticRegression(max_iter=1000).fit(train.drop(columns="target"), train["target"])
pd.DataFrame({"id": test["id"], "prediction": model.predict(test.drop(columns="id"))}).to_csv(
    os.path.join(os.environ["OUTPUT_DIR"], "predictions.csv"), index=False)
"""


@pytest.fixture(scope="module")
def registry():
    return build_registry()


def test_ar_components_are_registered(registry):
    assert "autoresearch" in registry.environments.names()
    assert {"autoresearch-builtin", "autoresearch-files"} <= set(registry.tasks.names())
    assert "autoresearch-score" in registry.reward_extractors.names()
    assert registry.environments.get("autoresearch").plugin == "autoresearch"
    assert {s.name for s in registry.tasks.for_environment("autoresearch")} >= {"autoresearch-builtin"}
    assert (
        get_plugin_manager().hook.wmrl_default_reward_extractor(environment_name="autoresearch") == "autoresearch-score"
    )
    assert get_plugin_manager().hook.wmrl_default_reward_extractor(environment_name="other") != "autoresearch-score"


def test_ar_environment_contract_without_docker(registry):
    env = registry.environments.make("autoresearch", task_sets=["autoresearch-builtin"])  # other plugins may add tasks
    check_environment(env)
    train, heldout = env.tasks("train"), env.tasks("heldout")
    assert len(train) == 10 and len(heldout) == 7
    assert {t.id for t in train}.isdisjoint({t.id for t in heldout})
    assert all(t.features.shape == (N_FEATURES,) for t in train + heldout)
    assert all("predictions.csv" in t.description for t in train)
    with pytest.raises(ValueError, match="split"):
        env.tasks("test")
    check_reward_extractor(registry.reward_extractors.make("autoresearch-score", env=env))
    env.close()


def test_ar_environment_executes_in_parallel_sandboxes(docker_ready, registry, tiny_classification):
    env = registry.environments.make(
        "autoresearch", max_parallel=2, limits={"timeout_s": 30, "memory_mb": 512, "cpus": 1}
    )
    reward = registry.reward_extractors.make("autoresearch-score", env=env)
    iris = env.task("iris-species")
    try:
        outcomes = env.execute([iris, iris, iris], [GOOD_SKLEARN, "raise SystemExit(4)", None])
    finally:
        env.close()
    good, crashed, rejected = outcomes
    assert good.status == "ok" and 0.8 <= good.score <= 1.0, good.info
    assert good.info["normalized_score"] == reward(iris, good) == good.score
    assert good.info["resources"]["memory_peak_bytes"] > 0 and good.info["runtime_s"] > 0
    assert crashed.status == "crashed" and crashed.info["exit_code"] == 4 and reward(iris, crashed) == -1.0
    assert rejected.status == "invalid_solution" and "not a Python script" in rejected.info["error"]


def test_ar_image_holds_the_scientific_stack(pool, tiny_classification, small_limits):
    from wmrl_autoresearch.sandbox.pool import RunRequest

    script = (
        "import numpy, pandas, sklearn, torch\n"
        "print(numpy.__version__, pandas.__version__, sklearn.__version__, torch.__version__,"
        " torch.ones(2).sum().item())\n"
    )
    ex = pool.run(RunRequest(tiny_classification, script, small_limits.with_overrides(timeout_s=60, memory_mb=1024)))
    assert ex.exit_code == 0, ex.stderr
    numpy_v, pandas_v, sklearn_v, torch_v, total = ex.stdout.split()
    assert torch_v.startswith("2.") and "+cpu" in torch_v and float(total) == 2.0


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "wmrl_autoresearch.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_ar_cli_run_solution_prints_the_graded_outcome(docker_ready, tmp_path):
    script = tmp_path / "majority.py"
    script.write_text(
        "import csv, os\n"
        "rows = list(csv.DictReader(open(os.path.join(os.environ['DATA_DIR'], 'test.csv'))))\n"
        "with open(os.path.join(os.environ['OUTPUT_DIR'], 'predictions.csv'), 'w') as f:\n"
        "    f.write('id,prediction\\n' + ''.join(f\"{r['id']},0\\n\" for r in rows))\n"
    )
    proc = _cli("run-solution", "iris-species", str(script), "--timeout", "20", "--memory-mb", "256")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["task"] == "iris-species" and record["status"] == "ok"
    assert record["score"] == pytest.approx(1 / 3) and record["reward"] == pytest.approx(1 / 3)
    assert record["backend"] == "docker" and record["startup_s"] > 0


def test_ar_cli_run_solution_reports_failures(docker_ready, tmp_path, capsys):
    from wmrl_autoresearch.cli import main

    bad = tmp_path / "bad.py"
    bad.write_text("while True:\n    pass\n")
    assert main(["run-solution", "iris-species", str(bad), "--timeout", "2", "--memory-mb", "128"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "timeout"


def test_ar_cli_tasks_and_errors(capsys):
    from wmrl_autoresearch.cli import main

    assert main(["tasks", "--split", "heldout"]) == 0
    out = capsys.readouterr().out
    assert "house-prices" in out and "iris-species" not in out
    assert main(["tasks", "--json", "--task-set", "autoresearch-builtin"]) == 0  # other plugins may add tasks
    listing = json.loads(capsys.readouterr().out)
    assert len(listing) == 17 and all("description" in t for t in listing)
    assert main(["tasks", "--json"]) == 0  # every registered set: the built-in tasks among them
    assert {t["id"] for t in listing} <= {t["id"] for t in json.loads(capsys.readouterr().out)}
    assert main(["run-solution", "no-such-task", __file__, "--sandbox", "local-unsafe"]) == 2
    assert "no autoresearch task `no-such-task`" in capsys.readouterr().err


def test_the_deadline_covers_every_wave_of_parallel_sandboxes_at_three_times_the_longest_limit():
    from wmrl_autoresearch.environment import AutoResearchEnvironment

    env = AutoResearchEnvironment(max_parallel=2, limits={"timeout_s": 10}, engine_wait_s=60)
    assert env.timeout_s(2) == 60 + 1 * (3 * 10 + 30)
    assert env.timeout_s(5) == 60 + 3 * (3 * 10 + 30)

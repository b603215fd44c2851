"""Short versions of the main job and its two baselines, in real containers (CI runs them)."""

import json
import subprocess
import sys

import pytest
from wmrl_autoresearch.experiments import config_path


@pytest.mark.parametrize(
    "config, overrides, executed",
    [
        ("quickstart.yaml", ["steps=2", "rollout.batch_tasks=4", "rollout.group_size=2"], 2 * 1 * 2),
        ("real.yaml", ["steps=1", "rollout.batch_tasks=2", "rollout.group_size=2"], 1 * 2 * 2),
        ("world_model.yaml", ["steps=2", "rollout.batch_tasks=4", "rollout.group_size=2"], 0),
    ],
)
def test_short_job_in_real_containers(docker_ready, tmp_path, config, overrides, executed):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wmrl_core.cli",
            "train",
            str(config_path(config)),
            f"run_dir={run_dir}",
            "eval.every=100",
            "eval.samples_per_task=1",
            "eval.max_tasks=3",  # 3 of the pool's 63 held-out tasks: the test checks the evaluation runs, not its value
            "logging.progress=false",
            "logging.tensorboard=false",
            "environment.kwargs.limits.timeout_s=60",
            *overrides,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "eval/reward" in proc.stdout and "run directory" in proc.stdout
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["compute/execution_items"] == executed
    first, last = records[0], records[-1]
    assert first["eval/ok_fraction"] is not None and last["eval/reward"] is not None  # held-out before and after
    assert (run_dir / "plots" / "evaluation.png").exists()
    assert (run_dir / "checkpoints" / "last.pt").exists()


def test_real_config_is_the_main_job_in_real_mode():
    """``real.yaml`` says it equals ``quickstart.yaml mode=real``: the same tasks, families, policy,
    optimiser and evaluation; only what real mode never reads (the world model) and the caveat differ."""
    from wmrl_core.config import flatten, load_config

    real = flatten(load_config(str(config_path("real.yaml"))))
    main = flatten(load_config(str(config_path("quickstart.yaml")), ["mode=real"]))
    differing = {k for k in real.keys() | main.keys() if real.get(k) != main.get(k)}
    world_model = {k for k in differing if k == "world_model.name" or k.startswith("world_model.kwargs.")}
    assert differing - world_model <= {"logging.caveat"}, differing  # mode=real has no world model

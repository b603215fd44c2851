"""Infrastructure faults under AutoResearch training, against the real engine and the real CLI.

* The Docker engine stops in the middle of a step (``dockerd`` gets SIGTERM, as from
  ``systemctl stop docker``): the executions it held come back as ``sandbox_error`` (reward
  ``None``: dropped, never 0); the step waits for the engine (bounded) or stops with a clear
  error; once the engine is back no container of the run is left.
* The training process is killed with SIGKILL while sandboxes run: the next start sweeps its
  containers, and ``resume=true`` ends with the same metrics as an uninterrupted run.

Stopping the engine disturbs every other user of it on this machine, so each outage lasts
seconds, and the engine is restarted exactly as ``plugins/autoresearch/ci/setup.sh`` starts it,
in a ``finally``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from wmrl_autoresearch.environment import AutoResearchEnvironment
from wmrl_autoresearch.experiments import config_path
from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward
from wmrl_autoresearch.sandbox.engine_outage import EngineLostError
from wmrl_autoresearch.sandbox.orphans import LABEL, LABEL_OWNER_PID

from wmrl_core.testing import require

DOCKER_PID = Path("/var/run/docker.pid")
# the exact command of plugins/autoresearch/ci/setup.sh, step 2
START_DOCKERD = "setsid nohup dockerd >/var/log/wmrl-dockerd.log 2>&1 < /dev/null &"

SLEEPS = "import time\ntime.sleep(60)\n"
CONSTANT = """\
import csv, os
ids = [row["id"] for row in csv.DictReader(open(os.path.join(os.environ["DATA_DIR"], "test.csv")))]
open(os.path.join(os.environ["OUTPUT_DIR"], "predictions.csv"), "w").write("id,prediction\\n" + "".join(f"{i},1\\n" for i in ids))
"""


def _wait_for(predicate, timeout_s: float, every_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return predicate()


def _engine_up() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def stop_engine() -> None:
    """SIGTERM to the dockerd of /var/run/docker.pid (by its id), then wait until it has exited."""
    pid = int(DOCKER_PID.read_text())
    os.kill(pid, signal.SIGTERM)
    assert _wait_for(lambda: not Path(f"/proc/{pid}").exists(), 60), "dockerd did not stop within 60 s"


def start_engine() -> None:
    if not _engine_up():
        subprocess.run(["bash", "-c", START_DOCKERD], check=True)
        assert _wait_for(_engine_up, 60, every_s=0.5), "dockerd did not come back within 60 s"


@contextmanager
def engine_restored():
    try:
        yield
    finally:
        start_engine()


@pytest.fixture
def restartable_engine(docker_ready):
    ok = os.geteuid() == 0 and DOCKER_PID.exists() and shutil.which("dockerd") is not None
    require(ok, "stopping and restarting the Docker engine needs root and a local dockerd (/var/run/docker.pid)")


@pytest.mark.serial  # stops the Docker engine: every container on the machine dies
@pytest.mark.slow
def test_ar_engine_stopping_mid_step_drops_those_rewards_waits_and_leaves_nothing(
    restartable_engine, live_sandboxes, tiny_classification
):
    task, reward = tiny_classification, AutoResearchScoreReward()
    env = AutoResearchEnvironment(
        sandbox="docker",
        max_parallel=2,
        gpus="none",
        engine_wait_s=60,
        limits={"timeout_s": 90, "memory_mb": 128, "cpus": 0.5},
    )
    try:
        with engine_restored():
            # 1. the engine stops while two sandboxes run; it comes back 3 s later
            held: dict = {}
            step = threading.Thread(target=lambda: held.update(outcomes=env.execute([task] * 2, [SLEEPS] * 2)))
            step.start()
            assert _wait_for(lambda: len([c for c in live_sandboxes() if c.status == "running"]) == 2, 60), (
                "the sandboxes never started"
            )
            time.sleep(1.0)  # the scripts are running
            stop_engine()
            restart = threading.Timer(3.0, start_engine)
            restart.start()
            step.join(180)
            restart.join()
            assert not step.is_alive(), "the step never returned"
            assert [o.status for o in held["outcomes"]] == ["sandbox_error"] * 2
            assert [reward(task, o) for o in held["outcomes"]] == [None, None]  # dropped, never 0 or a penalty
            env.pool.wait_reaped(30)
            assert _wait_for(lambda: not live_sandboxes(), 30), "containers left after the outage"
            # 2. the same environment goes on once the engine is back
            assert env.execute([task], [CONSTANT])[0].status == "ok"
            # 3. an engine that stays away stops the run with the fix, after engine_wait_s
            env.pool.engine_wait_s = 3
            stop_engine()
            started = time.monotonic()
            with pytest.raises(EngineLostError, match=r"did not come back within 3 s.*resume=true"):
                env.execute([task], [CONSTANT])
            assert time.monotonic() - started < 30
    finally:
        env.close()
    assert not live_sandboxes()


def _owned_by(client, pid: int) -> list:
    return client.containers.list(
        all=True, ignore_removed=True, filters={"label": [f"{LABEL}=1", f"{LABEL_OWNER_PID}={pid}"]}
    )


def _train_args(run_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "wmrl_core.cli",
        "train",
        str(config_path("quickstart.yaml")),
        f"run_dir={run_dir}",
        "steps=3",
        "rollout.batch_tasks=2",
        "rollout.group_size=2",
        "checkpoint.every=1",
        "eval.every=0",
        "logging.progress=false",
        "logging.tensorboard=false",
        # a long limit: no run times out by chance, and the killed run's containers (lifetime =
        # limit + 60 s) are still there when the next start sweeps them
        "environment.kwargs.limits.timeout_s=600",
        *extra,
    ]


def _comparable(run_dir: Path) -> list[dict]:
    """Metrics without wall-clock ones (``wall/*``, the compute seconds charged as wall time and the
    ``value/ratio_*`` predictions computed from them)."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [
        {
            k: v
            for k, v in r.items()
            if not (k.startswith(("wall/", "value/ratio_")) or (k.startswith("compute/") and k.endswith("_s")))
        }
        for r in records
    ]


@pytest.mark.slow
def test_ar_sigkilled_training_is_swept_at_the_next_start_and_resumes_to_the_same_metrics(docker_client, tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    proc = subprocess.run(_train_args(full), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]

    # kill it while a step after the first checkpoint runs its sandboxes; a sandbox can finish (and
    # remove itself) between being seen and the kill on a fast machine, so up to 3 attempts, each
    # resuming the killed one, until a kill leaves containers behind
    for attempt in range(3):
        extra = ("resume=true",) if attempt else ()
        child = subprocess.Popen(
            _train_args(part, *extra), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        try:
            assert _wait_for(
                lambda c=child: (part / "checkpoints" / "step_000001.pt").exists() or c.poll() is not None, 900
            )
            assert _wait_for(lambda c=child: bool(_owned_by(docker_client, c.pid)) or c.poll() is not None, 300, 0.05)
            assert child.poll() is None, "the run ended before it could be killed: " + child.stderr.read()[-2000:]
        finally:
            child.kill()  # SIGKILL: no finally, no atexit
            child.wait()
        orphans = {c.name for c in _owned_by(docker_client, child.pid)}
        if orphans:
            break
    assert orphans, "SIGKILL mid-step should leave the step's containers behind (3 attempts)"

    resumed = subprocess.run(_train_args(part, "resume=true"), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # (their lifetime is the 600 s limit + 60 s, so only a sweep removes them this soon: the resumed
    # run's, which names them on stderr, or that of another pool starting on a shared engine meanwhile)
    assert not _owned_by(docker_client, child.pid), "the next start did not sweep the killed run's containers"
    assert _comparable(part) == _comparable(full)

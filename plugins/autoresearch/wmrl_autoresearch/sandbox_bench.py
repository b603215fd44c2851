"""Sandbox benchmark: cold and warm start-up latency, and parallel throughput.

* **start-up latency** (``startup_s``): from asking the pool for a sandbox to holding a started
  one. Cold: create + start a container. Warm: take one that was started ahead of need.
* **end-to-end latency**: from submitting a trivial script (``print('ok')``) to holding its
  result (start-up, exec of Python, reading predictions; the container is removed afterwards
  in the background).
* **throughput**: executions per minute of ``n`` runs with ``parallel`` sandboxes at once,
  for the trivial script (with and without warm containers) and for a realistic one (pandas + scikit-learn logistic regression
  on ``iris-species``), every run in its own fresh container.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from wmrl_autoresearch.grading.outcomes import to_outcome
from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.sandbox.pool import RunRequest, SandboxPool

__all__ = ["BenchResult", "bench_sandbox", "TRIVIAL_SCRIPT", "SKLEARN_SCRIPT"]

TRIVIAL_SCRIPT = "print('ok')\n"

SKLEARN_SCRIPT = """\
import os
import pandas as pd
from sklearn.linear_model import LogisticRegression
train = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "train.csv"))
test = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "test.csv"))
model = LogisticRegression(max_iter=1000).fit(train.drop(columns="target"), train["target"])
pd.DataFrame({"id": test["id"], "prediction": model.predict(test.drop(columns="id"))}).to_csv(
    os.path.join(os.environ["OUTPUT_DIR"], "predictions.csv"), index=False)
"""


@dataclass
class BenchResult:
    """Figures of one benchmark, seconds unless named otherwise."""

    cold_startup_s: float = 0.0
    cold_end_to_end_s: float = 0.0
    warm_startup_s: float = 0.0
    warm_end_to_end_s: float = 0.0
    trivial_per_minute: float = 0.0
    trivial_per_minute_cold: float = 0.0
    sklearn_per_minute: float = 0.0
    sklearn_statuses: dict[str, int] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        s = self.settings
        return "\n".join([
            f"sandbox benchmark ({s.get('backend')}, image {s.get('image')}, {s.get('cpu_count')} CPU cores, "
            f"median of {s.get('latency_runs')} runs)",
            f"  cold start-up latency : {self.cold_startup_s * 1000:8.1f} ms   (end-to-end trivial run "
            f"{self.cold_end_to_end_s * 1000:.0f} ms)",
            f"  warm start-up latency : {self.warm_startup_s * 1000:8.1f} ms   (end-to-end trivial run "
            f"{self.warm_end_to_end_s * 1000:.0f} ms)",
            f"  throughput, trivial   : {self.trivial_per_minute:8.1f} executions/min  "
            f"({s.get('throughput_runs')} runs, {s.get('parallel')} in parallel, warm={s.get('warm')}; "
            f"{self.trivial_per_minute_cold:.1f}/min without warm containers)",
            f"  throughput, sklearn   : {self.sklearn_per_minute:8.1f} executions/min  (statuses "
            f"{self.sklearn_statuses})",
        ])


def _latency(pool: SandboxPool, task, runs: int, wait_warm: bool) -> tuple[float, float]:
    startups, totals = [], []
    for _ in range(runs):
        pool.wait_reaped()  # the previous container is gone: nothing else competes for the CPU
        if wait_warm:
            deadline = time.monotonic() + 60
            while pool.warm_count < pool.warm_target and time.monotonic() < deadline:
                time.sleep(0.05)
        t0 = time.perf_counter()
        execution = pool.run(RunRequest(task, TRIVIAL_SCRIPT))
        totals.append(time.perf_counter() - t0)
        if execution.exit_code != 0:
            raise RuntimeError(f"benchmark run failed: {execution}")
        startups.append(execution.startup_s)
    return statistics.median(startups), statistics.median(totals)


def _throughput(pool: SandboxPool, task, script: str, n: int) -> tuple[float, dict[str, int]]:
    t0 = time.perf_counter()
    executions = pool.run_many([RunRequest(task, script) for _ in range(n)])
    pool.wait_reaped()  # count the removal of every container too
    wall = time.perf_counter() - t0
    statuses: dict[str, int] = {}
    for ex in executions:
        status = to_outcome(task, ex).status
        statuses[status] = statuses.get(status, 0) + 1
    return n / wall * 60.0, statuses


def bench_sandbox(latency_runs: int = 7, throughput_runs: int = 12, parallel: int | None = None,
                  backend: str = "docker", image: str | None = None, limits: SandboxLimits | None = None) -> BenchResult:
    """Measure latencies and throughput on this machine (takes ~1-3 minutes on 2 cores)."""
    import os

    from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE
    from wmrl_autoresearch.tasks.builtin_suite import load_builtin_suite

    task = next(t for t in load_builtin_suite() if t.id == "iris-species")
    limits = limits or SandboxLimits(timeout_s=120, memory_mb=1024, cpus=1.0)
    parallel = parallel or max(1, os.cpu_count() or 1)
    image = image or SANDBOX_IMAGE
    result = BenchResult(settings={"backend": backend, "image": image, "cpu_count": os.cpu_count(),
                                   "latency_runs": latency_runs, "throughput_runs": throughput_runs,
                                   "parallel": parallel, "warm": parallel if backend == "docker" else 0})
    with SandboxPool(backend, limits=limits, max_parallel=1, warm=0, image=image) as pool:
        pool.run(RunRequest(task, TRIVIAL_SCRIPT))  # page in the image once
        result.cold_startup_s, result.cold_end_to_end_s = _latency(pool, task, latency_runs, wait_warm=False)
    warm = 1 if backend == "docker" else 0
    with SandboxPool(backend, limits=limits, max_parallel=1, warm=warm, image=image) as pool:
        result.warm_startup_s, result.warm_end_to_end_s = _latency(pool, task, latency_runs, wait_warm=bool(warm))
    with SandboxPool(backend, limits=limits, max_parallel=parallel, warm=0, image=image) as pool:
        result.trivial_per_minute_cold, _ = _throughput(pool, task, TRIVIAL_SCRIPT, throughput_runs)
    with SandboxPool(backend, limits=limits, max_parallel=parallel, warm=result.settings["warm"],
                     image=image) as pool:
        result.trivial_per_minute, _ = _throughput(pool, task, TRIVIAL_SCRIPT, throughput_runs)
        result.sklearn_per_minute, result.sklearn_statuses = _throughput(pool, task, SKLEARN_SCRIPT, throughput_runs)
    return result

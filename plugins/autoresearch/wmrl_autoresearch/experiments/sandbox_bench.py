"""Sandbox benchmark: cold and warm start-up latency, and parallel throughput.

* **start-up latency** (``startup_s``): from asking the pool for a sandbox to holding a started
  one. Cold: create + start a container. Warm: take one that was started ahead of need.
* **end-to-end latency**: from submitting a trivial script (``print('ok')``) to holding its
  result (start-up, exec of Python, reading predictions; the container is removed afterwards
  in the background).
* **throughput**: executions per minute of ``n`` runs with ``parallel`` sandboxes at once,
  for the trivial script (with and without warm containers), every run in its own fresh container.
* **pandas + scikit-learn, cold vs warm** (:func:`bench_sklearn`): a batch of ``n`` runs of a
  realistic script (logistic regression on ``iris-species``), ``parallel`` at once, on a cold
  pool and on a pool whose ``n`` warm containers have already imported pandas and
  scikit-learn (:mod:`wmrl_autoresearch.sandbox.runner`), interleaved cold, warm, cold, warm
  ... so that both see the same machine. The warm pool is filled before the batch is timed, as
  between two batches of a training run (its refill is paused during the batch); the warm-up
  is reported apart (``warmup_s``, ``per_minute_with_warmup``) and its CPU is in
  ``container_cpu_s``. Per batch:
  executions per minute, the charged CPU seconds of the script per execution (``cpu_s``, what
  the ledger charges) and the CPU seconds of the whole container (pre-import included).
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from wmrl_autoresearch.grading.outcomes import to_outcome
from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.sandbox.pool import RunRequest, SandboxPool

__all__ = ["BenchResult", "bench_sandbox", "bench_sklearn", "sklearn_summary", "TRIVIAL_SCRIPT", "SKLEARN_SCRIPT"]

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
    sklearn: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        s = self.settings
        return "\n".join(
            [
                f"sandbox benchmark ({s.get('backend')}, image {s.get('image')}, {s.get('cpu_count')} CPU cores, "
                f"median of {s.get('latency_runs')} runs)",
                f"  cold start-up latency : {self.cold_startup_s * 1000:8.1f} ms   (end-to-end trivial run "
                f"{self.cold_end_to_end_s * 1000:.0f} ms)",
                f"  warm start-up latency : {self.warm_startup_s * 1000:8.1f} ms   (end-to-end trivial run "
                f"{self.warm_end_to_end_s * 1000:.0f} ms)",
                f"  throughput, trivial   : {self.trivial_per_minute:8.1f} executions/min  "
                f"({s.get('throughput_runs')} runs, {s.get('parallel')} in parallel, warm={s.get('warm')}; "
                f"{self.trivial_per_minute_cold:.1f}/min without warm containers)",
                sklearn_summary(self.sklearn, s),
            ]
        )


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


def _statuses(task, executions) -> dict[str, int]:
    """How many executions ended with each outcome status."""
    return dict(Counter(to_outcome(task, ex).status for ex in executions))


def _throughput(pool: SandboxPool, task, script: str, n: int) -> tuple[float, dict[str, int]]:
    t0 = time.perf_counter()
    executions = pool.run_many([RunRequest(task, script) for _ in range(n)])
    pool.wait_reaped()  # count the removal of every container too
    wall = time.perf_counter() - t0
    statuses = _statuses(task, executions)
    return n / wall * 60.0, statuses


def _sklearn_batch(task, mode: str, n: int, parallel: int, image: str, limits: SandboxLimits) -> dict[str, Any]:
    warm = n if mode == "warm" else 0
    with SandboxPool(
        "docker", limits=limits, max_parallel=parallel, warm=warm, preimport=True, image=image, gpus="none"
    ) as pool:
        t0 = time.perf_counter()
        deadline = time.monotonic() + 900
        while pool.warm_ready_count < warm and time.monotonic() < deadline:  # started and done importing
            time.sleep(0.1)
        warmup_s = time.perf_counter() - t0
        pool.warm_target = 0  # time the batch alone: no refill competes with it
        t0 = time.perf_counter()
        executions = pool.run_many([RunRequest(task, SKLEARN_SCRIPT) for _ in range(n)])
        pool.wait_reaped()  # count the removal of every container too
        wall = time.perf_counter() - t0
    statuses = _statuses(task, executions)
    mean = lambda key: statistics.fmean(ex.resources.get(key, float("nan")) for ex in executions)  # noqa: E731
    return {
        "mode": mode,
        "runs": n,
        "wall_s": round(wall, 2),
        "per_minute": round(n / wall * 60.0, 2),
        "per_minute_with_warmup": round(n / (wall + warmup_s) * 60.0, 2),
        "cpu_s": round(mean("cpu_s"), 3),
        "container_cpu_s": round(mean("container_cpu_s"), 3),
        "warm": sum(ex.warm for ex in executions),
        "preimported": sum(ex.preimported for ex in executions),
        "warmup_s": round(warmup_s, 2),
        "statuses": statuses,
        "load_average": round(os.getloadavg()[0], 1),
    }


def bench_sklearn(
    runs: int = 8,
    repetitions: int = 3,
    parallel: int | None = None,
    image: str | None = None,
    limits: SandboxLimits | None = None,
    log=None,
) -> list[dict[str, Any]]:
    """The pandas + scikit-learn batch, cold and warm (pre-imported) interleaved, ``repetitions`` times each."""
    from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE
    from wmrl_autoresearch.tasks.builtin_suite import load_builtin_suite

    task = next(t for t in load_builtin_suite() if t.id == "iris-species")
    limits = limits or SandboxLimits(timeout_s=60, memory_mb=1024, cpus=1.0)
    parallel = parallel or max(1, os.cpu_count() or 1)
    batches = []
    for repetition in range(repetitions):
        for mode in ("cold", "warm"):
            batch = _sklearn_batch(task, mode, runs, parallel, image or SANDBOX_IMAGE, limits)
            batch["repetition"] = repetition
            batches.append(batch)
            if log is not None:
                log(batch)
    return batches


def sklearn_summary(batches: list[dict[str, Any]], settings: dict[str, Any]) -> str:
    """The cold/warm batches side by side, one line per repetition, and the median ratio."""
    if not batches:
        return "  pandas + scikit-learn : not measured"
    lines = [
        f"  pandas + scikit-learn on iris-species, {batches[0]['runs']} runs per batch, "
        f"{settings.get('parallel')} at once (executions/min; CPU-s per execution: script charged / container)"
    ]
    ratios = []
    for rep in sorted({b["repetition"] for b in batches}):
        cold = next(b for b in batches if b["repetition"] == rep and b["mode"] == "cold")
        warm = next(b for b in batches if b["repetition"] == rep and b["mode"] == "warm")
        ratios.append(warm["per_minute"] / cold["per_minute"])
        lines.append(
            f"    rep {rep}: cold {cold['per_minute']:6.1f}/min ({cold['cpu_s']:.2f} / {cold['container_cpu_s']:.2f}), "
            f"warm {warm['per_minute']:6.1f}/min ({warm['cpu_s']:.2f} / {warm['container_cpu_s']:.2f}; "
            f"{warm['per_minute_with_warmup']:.1f}/min with its {warm['warmup_s']:.0f} s warm-up), "
            f"x{ratios[-1]:.2f}, load {cold['load_average']}/"
            f"{warm['load_average']}, statuses {cold['statuses']} / {warm['statuses']}"
        )
    lines.append(f"    median warm/cold throughput ratio: x{statistics.median(ratios):.2f}")
    return "\n".join(lines)


def bench_sandbox(
    latency_runs: int = 7,
    throughput_runs: int = 12,
    parallel: int | None = None,
    backend: str = "docker",
    image: str | None = None,
    limits: SandboxLimits | None = None,
    sklearn_runs: int = 8,
    repetitions: int = 3,
    sklearn_only: bool = False,
) -> BenchResult:
    """Measure latencies and throughput on this machine (takes ~5-15 minutes on 2 shared cores)."""
    from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE
    from wmrl_autoresearch.tasks.builtin_suite import load_builtin_suite

    task = next(t for t in load_builtin_suite() if t.id == "iris-species")
    limits = limits or SandboxLimits(timeout_s=60, memory_mb=1024, cpus=1.0)
    parallel = parallel or max(1, os.cpu_count() or 1)
    image = image or SANDBOX_IMAGE
    result = BenchResult(
        settings={
            "backend": backend,
            "image": image,
            "cpu_count": os.cpu_count(),
            "latency_runs": latency_runs,
            "throughput_runs": throughput_runs,
            "parallel": parallel,
            "warm": parallel if backend == "docker" else 0,
        }
    )
    if backend == "docker":
        result.sklearn = bench_sklearn(sklearn_runs, repetitions, parallel, image, limits)
    if sklearn_only:
        return result
    with SandboxPool(backend, limits=limits, max_parallel=1, warm=0, image=image) as pool:
        pool.run(RunRequest(task, TRIVIAL_SCRIPT))  # page in the image once
        result.cold_startup_s, result.cold_end_to_end_s = _latency(pool, task, latency_runs, wait_warm=False)
    warm = 1 if backend == "docker" else 0
    with SandboxPool(backend, limits=limits, max_parallel=1, warm=warm, preimport=False, image=image) as pool:
        result.warm_startup_s, result.warm_end_to_end_s = _latency(pool, task, latency_runs, wait_warm=bool(warm))
    with SandboxPool(backend, limits=limits, max_parallel=parallel, warm=0, image=image) as pool:
        result.trivial_per_minute_cold, _ = _throughput(pool, task, TRIVIAL_SCRIPT, throughput_runs)
    with SandboxPool(
        backend, limits=limits, max_parallel=parallel, warm=result.settings["warm"], preimport=False, image=image
    ) as pool:
        result.trivial_per_minute, _ = _throughput(pool, task, TRIVIAL_SCRIPT, throughput_runs)
    return result

"""Load test of the AutoResearch sandbox pool: many executions at full parallelism, mixed scripts.

Runs ``--n`` executions (default 1,000) through one :class:`SandboxPool`, ``max_parallel`` at a
time, each in its own fresh hardened container. The scripts are mixed: mostly cheap good ones
(a majority-class prediction with the csv module), and crashing, timing-out (a busy loop killed
at a short CPU-time limit) and output-flooding ones (8 MiB on stdout, then a valid prediction).

Figures (printed, and written to ``--out``/summary.json):

* executions per minute (wall clock, whole run) and the 1-minute load average during the run;
* outcomes by kind and status, and every outcome recorded exactly once (each completion appends
  one line, with the request's id, to ``outcomes.jsonl``);
* containers left (this process's sandbox containers after the pool is closed) and processes
  left (host processes in a container that no longer exists, or in one of ours): both must be 0;
* host memory available, this process's resident memory, and the sizes of the pool's session
  directory (task files and one slot per sandbox) and of the engine's container directory
  (``<DockerRootDir>/containers``, where container logs live), before and after.

    wmrl experiment sandbox-load            # 1,000 executions (about 10-30 min on 2 cores)
    wmrl experiment sandbox-load --quick    # 24 executions (a test runs this)

An interrupted run continues with ``--resume`` (ids already in ``outcomes.jsonl`` are skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from wmrl_autoresearch.grading.outcomes import to_outcome
from wmrl_autoresearch.sandbox.docker_client import docker_client
from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.sandbox.orphans import LABEL, LABEL_OWNER_PID
from wmrl_autoresearch.sandbox.pool import RunRequest, SandboxPool
from wmrl_autoresearch.tasks import AutoResearchTask

GOOD = """\
import csv, os
d = os.environ["DATA_DIR"]
labels = [r["target"] for r in csv.DictReader(open(os.path.join(d, "train.csv")))]
top = max(set(labels), key=labels.count)
with open(os.path.join(os.environ["OUTPUT_DIR"], "predictions.csv"), "w") as f:
    f.write("id,prediction\\n")
    f.writelines(f"{r['id']},{top}\\n" for r in csv.DictReader(open(os.path.join(d, "test.csv"))))
"""
CRASH = "import os\nraise RuntimeError('this solution crashes on purpose')\n"
TIMEOUT = "while True:\n    pass\n"
FLOOD = "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(8):\n    sys.stdout.write(chunk)\n" + GOOD

KINDS = {  # kind: (script, share, expected status)
    "good": (GOOD, 0.70, "ok"),
    "crash": (CRASH, 0.10, "crashed"),
    "timeout": (TIMEOUT, 0.10, "timeout"),
    "flood": (FLOOD, 0.10, "ok"),
}


def make_task() -> AutoResearchTask:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2)).round(3)
    y = (x[:, 0] + x[:, 1] > 0).astype(int)
    return AutoResearchTask.create(
        id="load-test",
        kind="classification",
        metric="accuracy",
        split="train",
        columns=["x0", "x1"],
        x_train=x[:40],
        y_train=y[:40],
        x_test=x[40:],
        y_test=y[40:],
    )


def plan(n: int, seed: int = 0) -> list[str]:
    """The kind of each of ``n`` executions, shuffled, with the shares of :data:`KINDS`."""
    counts = {k: int(round(share * n)) for k, (_, share, _) in KINDS.items()}
    counts["good"] += n - sum(counts.values())
    kinds = [k for k, c in counts.items() for _ in range(c)]
    np.random.default_rng(seed).shuffle(kinds)
    return kinds


# ------------------------------------------------------------------ host figures


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


_CONTAINER_ID = re.compile(r"[0-9a-f]{64}")


def processes_left(client, ours: set[str]) -> list[int]:
    """Host processes in a container that no longer exists, or in one of ``ours`` (container ids)."""
    existing = {c.id for c in client.containers.list(all=True, ignore_removed=True)}
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ids = set(_CONTAINER_ID.findall(Path(f"/proc/{pid}/cgroup").read_text()))
        except OSError:
            continue
        if ids and (ids - existing or ids & ours):
            left.append(int(pid))
    return left


def our_containers(client) -> list:
    return client.containers.list(
        all=True, ignore_removed=True, filters={"label": [f"{LABEL}=1", f"{LABEL_OWNER_PID}={os.getpid()}"]}
    )


def snapshot(session_dir: Path, docker_root: Path) -> dict[str, float]:
    return {
        "mem_available_mib": round(mem_available_mib(), 1),
        "rss_mib": round(rss_mib(), 1),
        "session_dir_bytes": dir_bytes(session_dir),
        "docker_containers_dir_bytes": dir_bytes(docker_root / "containers"),
    }


# ------------------------------------------------------------------ the run


def _recorded_ids(log_path: Path, resume: bool) -> set[int]:
    """Ids already in ``outcomes.jsonl`` when resuming; otherwise start a fresh log."""
    done: set[int] = set()
    if resume and log_path.exists():
        done = {json.loads(line)["id"] for line in log_path.read_text().splitlines() if line.strip().endswith("}")}
    elif log_path.exists():
        log_path.unlink()
    return done


class _LoadSampler:
    """A daemon thread reading the 1-minute load average and the session directory's size every 5 s."""

    def __init__(self, session_dir: Path):
        self.session_dir = session_dir
        self.loads: list[float] = []
        self.peak_session_bytes = 0
        self.stop = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self.stop.wait(5.0):
            self.loads.append(os.getloadavg()[0])
            self.peak_session_bytes = max(self.peak_session_bytes, dir_bytes(self.session_dir))


def _execute(
    pool: SandboxPool, task: AutoResearchTask, kind: str, i: int, limits: SandboxLimits, short: SandboxLimits
) -> dict:
    """Run execution ``i`` of ``kind`` (a timing-out one under ``short``) and return its outcome record."""
    script, _, expected = KINDS[kind]
    ex = pool.run(RunRequest(task, script, short if kind == "timeout" else limits))
    outcome = to_outcome(task, ex)
    return {
        "id": i,
        "kind": kind,
        "expected": expected,
        "status": outcome.status,
        "runtime_s": round(ex.runtime_s, 3),
        "startup_s": round(ex.startup_s, 3),
        "logs_truncated": bool(ex.logs_truncated),
        "error": outcome.info.get("error"),
        "notes": list(ex.notes),
    }


def _summary(
    records: list[dict],
    *,
    n: int,
    todo: list[int],
    pool: SandboxPool,
    limits: SandboxLimits,
    timeout_s: float,
    cpus: float,
    elapsed: float,
    sampler: _LoadSampler,
    left: list,
    procs: list[int],
    before: dict[str, float],
    after: dict[str, float],
) -> dict:
    """The figures of ``summary.json`` from the outcome records and the host measurements."""
    loads = sampler.loads
    ids = Counter(r["id"] for r in records)
    by_kind = {k: dict(Counter(r["status"] for r in records if r["kind"] == k)) for k in KINDS}
    return {
        "executions": n,
        "run_this_invocation": len(todo),
        "parallel": pool.max_parallel,
        "cpu_cores": os.cpu_count(),
        "limits": {
            "timeout_s": limits.timeout_s,
            "timeout_s_of_timing_out": timeout_s,
            "cpus": cpus,
            "memory_mb": limits.memory_mb,
        },
        "wall_s": round(elapsed, 1),
        "executions_per_minute": round(len(todo) / elapsed * 60, 1),
        "load_average_1min": {
            "mean": round(float(np.mean(loads)), 2) if loads else None,
            "max": round(max(loads), 2) if loads else None,
        },
        "recorded_exactly_once": sorted(ids) == list(range(n)) and set(ids.values()) == {1},
        "outcomes_recorded": len(records),
        "statuses_by_kind": by_kind,
        "unexpected": sum(r["status"] != r["expected"] for r in records),
        "unexpected_records": [r for r in records if r["status"] != r["expected"]],
        "flood_logs_truncated": all(r["logs_truncated"] for r in records if r["kind"] == "flood"),
        "containers_left": len(left),
        "processes_left": len(procs),
        "before": before,
        "after": after,
        "session_dir_peak_bytes": sampler.peak_session_bytes,
        "runtime_s_median": round(float(np.median([r["runtime_s"] for r in records])), 3),
        "startup_s_median": round(float(np.median([r["startup_s"] for r in records])), 3),
    }


def run(n: int, out: Path, *, parallel: int | None, timeout_s: float, cpus: float, resume: bool) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "outcomes.jsonl"
    done = _recorded_ids(log_path, resume)
    kinds = plan(n)
    todo = [i for i in range(n) if i not in done]
    task = make_task()
    limits = SandboxLimits(timeout_s=60.0, memory_mb=256, cpus=cpus, log_bytes=64 * 1024)
    short = limits.with_overrides(timeout_s=timeout_s)
    client = docker_client()
    docker_root = Path(client.info().get("DockerRootDir", "/var/lib/docker"))
    pool = SandboxPool("docker", limits=limits, max_parallel=parallel, gpus="none", handle_sigterm=True)
    session_dir = pool.workspace.path
    before = snapshot(session_dir, docker_root)
    sampler = _LoadSampler(session_dir)
    lock = threading.Lock()
    print(
        f"load test: {len(todo)} of {n} executions to run, {pool.max_parallel} in parallel, "
        f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )

    started = time.perf_counter()
    finished = 0
    try:
        with ThreadPoolExecutor(pool.max_parallel) as executor, log_path.open("a") as log_file:
            futures = [executor.submit(_execute, pool, task, kinds[i], i, limits, short) for i in todo]
            for future in as_completed(futures):
                record = future.result()
                with lock:
                    log_file.write(json.dumps(record) + "\n")
                    log_file.flush()
                finished += 1
                if finished % 50 == 0 or finished == len(todo):
                    rate = finished / (time.perf_counter() - started) * 60
                    print(f"  {finished}/{len(todo)} done, {rate:.0f}/min, load {os.getloadavg()[0]:.2f}", flush=True)
        elapsed = time.perf_counter() - started
    finally:
        sampler.stop.set()
        pool.wait_reaped(120.0)
        pool.close()
    time.sleep(1.0)  # auto-removal of the last containers is asynchronous in the engine
    left = our_containers(client)
    procs = processes_left(client, {c.id for c in left})
    after = snapshot(session_dir, docker_root)

    records = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    summary = _summary(
        records,
        n=n,
        todo=todo,
        pool=pool,
        limits=limits,
        timeout_s=timeout_s,
        cpus=cpus,
        elapsed=elapsed,
        sampler=sampler,
        left=left,
        procs=procs,
        before=before,
        after=after,
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def main(argv: list[str] | None = None, prog: str = "wmrl experiment sandbox-load") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="executions (default 1000)")
    parser.add_argument("--quick", action="store_true", help="24 executions (what the test runs)")
    parser.add_argument("--parallel", type=int, default=None, help="sandboxes at once (default: cores / cpus)")
    parser.add_argument("--cpus", type=float, default=0.5, help="CPU quota of each sandbox (default 0.5)")
    parser.add_argument(
        "--timeout-s", type=float, default=2.0, help="CPU-time limit of the timing-out scripts, CPU seconds"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/benchmarks/sandbox_load"))
    parser.add_argument("--resume", action="store_true", help="skip executions already in outcomes.jsonl")
    args = parser.parse_args(argv)
    n = 24 if args.quick else args.n
    s = run(n, args.out, parallel=args.parallel, timeout_s=args.timeout_s, cpus=args.cpus, resume=args.resume)
    b, a = s["before"], s["after"]
    unexpected = "".join(
        f"\n    #{r['id']} {r['kind']}: {r['status']} ({r['error']}; notes {r['notes']})"
        for r in s["unexpected_records"]
    )
    print(f"""
sandbox load test: {s["executions"]} executions, {s["parallel"]} in parallel on {s["cpu_cores"]} cores
  executions per minute     {s["executions_per_minute"]}   (wall {s["wall_s"]} s; load average mean {s["load_average_1min"]["mean"]}, max {s["load_average_1min"]["max"]})
  recorded exactly once     {s["recorded_exactly_once"]}   ({s["outcomes_recorded"]} outcomes)
  statuses by kind          {s["statuses_by_kind"]}
  unexpected statuses       {s["unexpected"]}{unexpected}
  containers left           {s["containers_left"]}
  processes left            {s["processes_left"]}
  host memory available     {b["mem_available_mib"]} -> {a["mem_available_mib"]} MiB
  this process's memory     {b["rss_mib"]} -> {a["rss_mib"]} MiB
  pool session directory    {b["session_dir_bytes"]} -> {a["session_dir_bytes"]} bytes (peak during the run {s["session_dir_peak_bytes"]})
  engine container logs     {b["docker_containers_dir_bytes"]} -> {a["docker_containers_dir_bytes"]} bytes
written to {args.out / "summary.json"}""")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Wall time of real execution: local vs the Ray backend with 1 and 2 workers, side by side.

Runs the synthetic job (``configs/synthetic/wmrl.yaml``) with an environment whose
``execute`` sleeps ``--sleep`` seconds per solution (``execution_sleep_s``, emulating a slow
sandbox), once locally and once per worker count on Ray, and prints per run: the measured
wall seconds of real execution (``wall/execution_s``), the charged seconds
(``compute/execution_s``, the declared cost: equal across runs by design), the executed
items, and the speed-up of execution wall time over the local run. Ray is started once
(``num_cpus`` = the largest worker count, at least the machine's cores) and every run joins it,
so Ray's start-up and each pool's actor start-up are not in ``wall/execution_s`` (they are in
the run's total wall time, printed too).

    wmrl experiment ray-execution                          # 20 steps, 50 ms per solution, 1 and 2 workers
    wmrl experiment ray-execution --steps 60 --sleep 0.1 --workers 1 2 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from wmrl_core.config import load_config
from wmrl_core.experiments.package_data import synthetic_config
from wmrl_core.metrics import read_metrics
from wmrl_core.trainer import train

CONFIG = synthetic_config()


def run(label: str, overrides: list[str], out: Path) -> dict:
    start = time.perf_counter()
    summary = train(
        load_config(
            CONFIG,
            [
                f"run_dir={out / label}",
                "logging.progress=false",
                "logging.tensorboard=false",
                "checkpoint.every=0",
                *overrides,
            ],
        )
    )
    total = time.perf_counter() - start
    last = read_metrics(Path(summary["run_dir"]))[-1]
    return {
        "run": label,
        "execution_wall_s": last["wall/execution_s"],
        "execution_charged_s": last["compute/execution_s"],
        "execution_items": last["compute/execution_items"],
        "run_wall_s": total,
        "final_true_reward": last.get("eval/true_reward"),
    }


def main(argv: list[str] | None = None, prog: str = "wmrl experiment ray-execution") -> int:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--sleep", type=float, default=0.05, help="seconds execute sleeps per solution")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--mode", default="wmrl", help="wmrl executes 16 solutions per step, real 160")
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args(argv)

    import ray

    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, *args.workers), include_dashboard=False)
    common = [f"steps={args.steps}", f"mode={args.mode}", f"environment.kwargs.execution_sleep_s={args.sleep}"]
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(run("local", common, Path(tmp)))
            for n in args.workers:
                rows.append(
                    run(f"ray-{n}", [*common, "distributed.backend=ray", f"distributed.num_workers={n}"], Path(tmp))
                )
    finally:
        ray.shutdown()

    base = rows[0]["execution_wall_s"]
    print(
        f"\nsynthetic job, mode={args.mode}, {args.steps} steps, execute sleeps {args.sleep * 1000:g} ms per solution; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, ray {ray.__version__}\n"
    )
    print(
        "| run | execution wall (s) | speed-up | execution charged (s) | items executed | run wall (s) | final true reward |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['run']} | {r['execution_wall_s']:.2f} | {base / r['execution_wall_s']:.2f}x | "
            f"{r['execution_charged_s']:.0f} | {r['execution_items']} | {r['run_wall_s']:.1f} | {r['final_true_reward']:.3f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""LIBERO's evaluation protocol: every task of a suite from its stored init states.

Standard LIBERO-Long protocol: the 10 tasks of ``libero_10``, the 50 stored init states per
task (500 episodes), 520 control steps per episode, success from LIBERO's goal predicates.
Reported: success rate per task and overall, each with a Wilson 95 % interval; the versions
of MuJoCo, robosuite and LIBERO (scores move with the MuJoCo version); episodes lost to
crashed workers, which are excluded from the rates rather than counted as failures.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from wmrl_core.experiments.stats import wilson_interval
from wmrl_libero.controllers import ControllerFactory
from wmrl_libero.episode_runner import EpisodeJob, EpisodeResult, run_episodes
from wmrl_libero.suites import suite_tasks

__all__ = ["VERSIONED_PACKAGES", "package_versions", "evaluate", "summarize", "to_markdown", "write_report"]

VERSIONED_PACKAGES = ("mujoco", "robosuite", "libero", "bddl", "numpy", "torch", "wmrl-libero")


def package_versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["python"] = platform.python_version()
    return out


def _rate(successes: int, trials: int) -> dict[str, Any]:
    low, high = wilson_interval(successes, trials)
    return {
        "successes": successes,
        "episodes": trials,
        "success_rate": successes / trials if trials else None,
        "ci95": [low, high],
    }


def summarize(results: Sequence[EpisodeResult], task_names: dict[int, str]) -> dict[str, Any]:
    """Per-task and overall rates; infrastructure failures counted apart, not as zeros."""
    per_task: dict[str, Any] = {}
    total_k = total_n = infra = 0
    for index in sorted({r.job.task_index for r in results}):
        rows = [r for r in results if r.job.task_index == index]
        ok = [r for r in rows if r.status == "ok"]
        k = sum(r.success for r in ok)
        entry = _rate(k, len(ok))
        entry.update(
            task_index=index,
            instruction=task_names.get(index, ""),
            infrastructure_failures=len(rows) - len(ok),
            init_states=sorted(r.job.init_state for r in rows),
            mean_steps_success=(sum(r.steps for r in ok if r.success) / k) if k else None,
        )
        per_task[str(index)] = entry
        total_k, total_n, infra = total_k + k, total_n + len(ok), infra + len(rows) - len(ok)
    overall = _rate(total_k, total_n)
    overall["infrastructure_failures"] = infra
    return {"per_task": per_task, "overall": overall}


def evaluate(
    factory: ControllerFactory,
    *,
    suite: str = "libero_10",
    task_indices: Sequence[int] | None = None,
    init_states: Sequence[int] | None = None,
    num_workers: int = 1,
    video_episodes: Sequence[tuple[int, int]] = (),
    max_episode_steps: int | None = None,
    seed: int = 0,
    progress=None,
) -> tuple[dict[str, Any], list[EpisodeResult]]:
    """Run the protocol and return (report, episode results).

    :param task_indices: tasks to evaluate (default all of the suite).
    :param init_states: stored init-state indices per task (default all 50).
    :param video_episodes: (task_index, init_state) pairs whose agentview frames to keep.
    :param max_episode_steps: override of the suite's limit (the report says so).
    """
    tasks = suite_tasks(suite)
    task_indices = list(range(len(tasks))) if task_indices is None else list(task_indices)
    videos = set(map(tuple, video_episodes))
    jobs = []
    for t in task_indices:
        states = range(tasks[t].n_init_states) if init_states is None else init_states
        for s in states:
            jobs.append(
                EpisodeJob(
                    suite,
                    t,
                    int(s),
                    seed=seed + 1000 * t + int(s),
                    video=(t, int(s)) in videos,
                    max_episode_steps=max_episode_steps,
                )
            )
    started = time.time()
    results = run_episodes(jobs, factory, num_workers=num_workers, progress=progress)
    report = summarize(results, {t.index: t.language for t in tasks})
    report["protocol"] = {
        "suite": suite,
        "policy": factory.name,
        "tasks": task_indices,
        "init_states": "all stored (50 per task)" if init_states is None else list(init_states),
        "max_episode_steps": max_episode_steps or "suite default",
        "observation": {"image_size": factory.image_size, "privileged_state": factory.privileged},
        "seed": seed,
        "num_workers": num_workers,
        "wall_seconds": round(time.time() - started, 1),
    }
    report["versions"] = package_versions()
    return report, results


def to_markdown(report: dict[str, Any]) -> str:
    """The report as a markdown table: one row per task, then the overall row."""
    p = report["protocol"]
    lines = [
        f"Policy `{p['policy']}` on `{p['suite']}`, init states: {p['init_states']}; "
        + ", ".join(f"{k} {v}" for k, v in report["versions"].items() if k in ("mujoco", "robosuite", "libero")),
        "",
        "| task | instruction | success | episodes | rate | 95% CI | infra failures |",
        "|---:|---|---:|---:|---:|---|---:|",
    ]

    def row(name, instr, e):
        rate = "n/a" if e["success_rate"] is None else f"{100 * e['success_rate']:.1f}%"
        lo, hi = e["ci95"]
        return f"| {name} | {instr} | {e['successes']} | {e['episodes']} | {rate} | [{100 * lo:.1f}, {100 * hi:.1f}] | {e['infrastructure_failures']} |"

    for key, e in report["per_task"].items():
        lines.append(row(key, e["instruction"], e))
    lines.append(row("**all**", "", report["overall"]))
    return "\n".join(lines) + "\n"


def write_report(
    report: dict[str, Any], results: Sequence[EpisodeResult], out_dir: str | Path, *, video_format: str = "gif"
) -> list[Path]:
    """Write ``result.json``, ``result.md`` and one video per episode that kept frames."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "result.json", out / "result.md"]
    episodes = [
        {
            "task_index": r.job.task_index,
            "init_state": r.job.init_state,
            "success": r.success,
            "steps": r.steps,
            "status": r.status,
            "error": r.error[:500],
            "seconds": round(r.seconds, 2),
        }
        for r in results
    ]
    (out / "result.json").write_text(json.dumps(dict(report, episodes=episodes), indent=2))
    (out / "result.md").write_text(to_markdown(report))
    for r in results:
        if r.frames:
            from wmrl_libero.video import write_video

            path = (
                out
                / f"task{r.job.task_index}_init{r.job.init_state}_{'success' if r.success else 'failure'}.{video_format}"
            )
            write_video(path, r.frames)
            written.append(path)
    return written

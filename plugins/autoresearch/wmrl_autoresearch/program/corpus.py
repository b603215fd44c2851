"""The execution corpus: real executions of sampled programs on the TRAINING tasks only.

    wmrl-autoresearch build-corpus --out DIR [--executions 5000] [--warm 2] [--parallel 2]

Each *job* is one (task, program) pair, drawn deterministically from ``--seed``: round ``r``
visits every training task once, in an order and with 8 programs each drawn from
``default_rng([seed, r])`` (:func:`corpus_jobs`), so a partial corpus has several programs on
each task it reached, and a larger ``--executions`` extends the same job list. Executions run in Docker sandboxes (warm,
pre-importing containers) and are appended to ``DIR/corpus.jsonl`` after every batch; a
rerun skips the jobs already there (resume is the default). When the command ends (done or
interrupted) it writes ``DIR/corpus.jsonl.gz`` (what the package ships) and
``DIR/corpus_cost.json`` (sandbox CPU seconds, wall time per session).

Held-out tasks are never executed: the job list is built from ``split == "train"`` tasks and
every job is checked again before it runs (:func:`assert_training_only`).

A row holds the job id, task id and family, program choices, status, score, reward, the
charged CPU seconds (``cost_s``), wall ``runtime_s`` and the sha256 of the rendered script
(the execution cache's key, see :func:`write_execution_cache`); no logs.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_autoresearch.program.grammar import Program
from wmrl_autoresearch.program.render import render_script
from wmrl_autoresearch.tasks.families import families_of

__all__ = [
    "CORPUS_PATH",
    "TRAINING_TASK_SETS",
    "assert_training_only",
    "build_corpus",
    "corpus_jobs",
    "load_corpus",
    "task_families",
    "write_execution_cache",
    "export_cache_for_config",
]

CORPUS_PATH = Path(__file__).with_name("data") / "corpus.jsonl.gz"
"""The shipped corpus (``load_corpus()`` reads it)."""

TRAINING_TASK_SETS = ("autoresearch-builtin", "autoresearch-pool")
DEFAULT_LIMITS = {"timeout_s": 30}
"""The limits of the benchmark configs (``configs/autoresearch/*.yaml``): a corpus execution
must be the same event as a benchmark execution (timeouts included) to be replayable."""


task_families = families_of
"""Family of every task id (:func:`wmrl_autoresearch.tasks.families.families_of`)."""


def assert_training_only(tasks: Iterable[Any]) -> None:
    """:raises ValueError: when any task is not of the training split (the corpus must never see one)."""
    bad = sorted({t.id for t in tasks if getattr(t, "data", t).split != "train"})
    if bad:
        raise ValueError(f"held-out task(s) {bad[:5]} reached the corpus; it is built from training tasks only")


def corpus_jobs(tasks: Sequence[Any], n: int, seed: int = 0, per_visit: int = 8) -> list[tuple[str, Any, Program]]:
    """The first ``n`` jobs ``(job_id, task, program)``: round ``r`` visits every task once, in an
    order and with ``per_visit`` programs each drawn from ``default_rng([seed, r])``. The list depends
    only on the tasks, ``seed`` and ``per_visit``, so it is the same in every rerun and a larger ``n``
    extends it; a partial corpus has several programs per task it reached (what within-task
    differences are learned from) rather than one program on every task."""
    tasks = sorted(tasks, key=lambda t: t.id)
    jobs: list[tuple[str, Any, Program]] = []
    r = 0
    while len(jobs) < n:
        rng = np.random.default_rng([seed, r])
        for i in rng.permutation(len(tasks)):
            jobs.extend((f"{r}:{tasks[i].id}:{k}", tasks[i], Program.sample(rng)) for k in range(per_visit))
        r += 1
    return jobs[:n]


def _read_rows(path: Path) -> list[dict]:
    """Rows of a JSONL file; a partial last line (interrupted write) is dropped."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def load_corpus(path: str | Path | None = None) -> list[dict]:
    """Rows of a corpus (``.jsonl`` or ``.jsonl.gz``; default: the shipped one)."""
    path = Path(path) if path else CORPUS_PATH
    if not path.is_file():
        raise FileNotFoundError(f"corpus {path} is missing; build it with `wmrl-autoresearch build-corpus --out DIR`")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _row(job_id: str, task: Any, family: str, program: Program, script: str, outcome: Any, reward: float) -> dict:
    from wmrl_core.execution_cache import solution_digest

    info = outcome.info
    return {
        "job": job_id,
        "task_id": task.id,
        "family": family,
        "choices": list(program.choices),
        "status": str(outcome.status),
        "score": None if outcome.score is None else float(outcome.score),
        "reward": None if reward is None else float(reward),  # None: a sandbox error, not the program's doing
        "cost_s": info.get("cost_s"),
        "runtime_s": info.get("runtime_s"),
        "warm": info.get("warm"),
        "normalized_score": info.get("normalized_score"),
        "solution_sha256": solution_digest(script),
    }


def _pack(out: Path) -> dict:
    """Write ``corpus.jsonl.gz`` (sorted by job, deterministic bytes) and return a cost summary."""
    rows = _read_rows(out / "corpus.jsonl")
    rows.sort(key=lambda r: r["job"])
    with open(out / "corpus.jsonl.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        for row in rows:
            f.write((json.dumps(row, separators=(",", ":")) + "\n").encode())
    sessions = (
        json.loads((out / "corpus_cost.json").read_text())["sessions"] if (out / "corpus_cost.json").exists() else []
    )
    return {
        "executions": len(rows),
        "sandbox_cpu_s": round(sum(r["cost_s"] or 0.0 for r in rows), 1),
        "sessions": sessions,
    }


@dataclass
class _Session:
    """What one build-corpus session has done so far; the cost record reads it even after an interrupt."""

    started: float
    cpu_s: float = 0.0
    n: int = 0


def _run_chunk(env: Any, chunk: list) -> tuple[list, list[str], list]:
    """Execute one chunk of jobs (checked again to be training-only) and return it with its scripts and outcomes."""
    assert_training_only([t for _, t, _ in chunk])
    scripts = [render_script(p, classification=t.data.kind == "classification") for _, t, p in chunk]
    return chunk, scripts, env.execute([t for _, t, _ in chunk], scripts)


def _append_rows(
    f, chunk: list, scripts: list[str], outcomes: list, families: dict, reward_fn, session: _Session
) -> None:
    """Append a chunk's rows to the open ``corpus.jsonl`` and make them durable before counting them done."""
    for (job_id, task, program), script, outcome in zip(chunk, scripts, outcomes):
        row = _row(job_id, task, families[task.id], program, script, outcome, reward_fn(task, outcome))
        session.cpu_s += row["cost_s"] or 0.0
        f.write(json.dumps(row, separators=(",", ":")) + "\n")
    f.flush()
    os.fsync(f.fileno())
    session.n += len(chunk)


def _log_progress(log, session: _Session, n_done: int, n_jobs: int) -> None:
    """Log the rate, the sandbox CPU per execution and the time left."""
    wall = time.time() - session.started
    rate = session.n / wall * 60
    eta_min = (n_jobs - session.n) / max(rate, 1e-9)
    log(
        f"[{n_done + session.n}/{n_done + n_jobs}] {rate:.1f} executions/min, "
        f"{session.cpu_s / session.n:.2f} sandbox CPU s each, {wall / 60:.1f} min this session, eta {eta_min:.0f} min"
    )


def _close_session(out: Path, meta: dict, session: _Session, log) -> dict:
    """Record the session in ``corpus_cost.json``, pack ``corpus.jsonl.gz`` and return the cost summary."""
    cost_path = out / "corpus_cost.json"
    sessions = json.loads(cost_path.read_text())["sessions"] if cost_path.exists() else []
    sessions.append(
        {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(session.started)),
            "executed": session.n,
            "wall_s": round(time.time() - session.started, 1),
            "sandbox_cpu_s": round(session.cpu_s, 1),
        }
    )
    cost_path.write_text(json.dumps({**meta, "sessions": sessions}, indent=2))
    summary = _pack(out)
    summary["wall_s"] = round(sum(s["wall_s"] for s in sessions), 1)
    cost_path.write_text(json.dumps({**meta, **summary}, indent=2))
    log(
        f"corpus: {summary['executions']} executions, {summary['sandbox_cpu_s']} sandbox CPU s, "
        f"{summary['wall_s']} s wall over {len(sessions)} session(s); {out / 'corpus.jsonl.gz'}"
    )
    return summary


def build_corpus(
    out: Path,
    executions: int,
    *,
    seed: int = 0,
    warm: int = 2,
    parallel: int = 2,
    batch: int = 2,
    log_every: int = 20,
    limits: dict | None = None,
    sandbox: str = "docker",
    task_sets: Sequence[str] = TRAINING_TASK_SETS,
    log=print,
) -> dict:
    """Execute the first ``executions`` jobs not yet in ``out/corpus.jsonl``; return the cost summary."""
    from wmrl_autoresearch.environment import AutoResearchEnvironment
    from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward

    out.mkdir(parents=True, exist_ok=True)
    limits = dict(DEFAULT_LIMITS if limits is None else limits)
    env = AutoResearchEnvironment(
        sandbox=sandbox, max_parallel=parallel, warm=warm, task_sets=list(task_sets), limits=limits
    )
    train = env.tasks("train")
    assert_training_only(train)
    families = task_families(train)
    reward_fn = AutoResearchScoreReward()
    done = {r["job"] for r in _read_rows(out / "corpus.jsonl")}
    jobs = [j for j in corpus_jobs(train, executions, seed) if j[0] not in done]
    log(
        f"corpus: {len(done)} executions done, {len(jobs)} to run over {len(train)} training tasks "
        f"({len(set(families.values()))} families); limits {limits}; warm={warm} parallel={parallel}"
    )
    session = _Session(started=time.time())
    meta = {"seed": seed, "limits": limits, "task_sets": list(task_sets), "split": "train"}
    chunks = [jobs[i : i + batch] for i in range(0, len(jobs), batch)]
    _ = env.pool  # create the one sandbox pool now: the lanes below would race to create one each
    # several small chunks in flight at once keep every sandbox busy: a slow run (a timeout) holds
    # up only its own chunk, not a whole batch
    lanes = ThreadPoolExecutor(max(1, 2 * parallel), thread_name_prefix="corpus-lane")
    futures: list = []
    try:
        with open(out / "corpus.jsonl", "a") as f:
            futures = [lanes.submit(_run_chunk, env, c) for c in chunks]
            for future in as_completed(futures):
                chunk, scripts, outcomes = future.result()
                _append_rows(f, chunk, scripts, outcomes, families, reward_fn, session)
                if session.n % log_every < len(chunk) or session.n == len(jobs):
                    _log_progress(log, session, len(done), len(jobs))
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    finally:
        lanes.shutdown(wait=False, cancel_futures=True)
        env.close()
        summary = _close_session(out, meta, session, log)
    return summary


def write_execution_cache(rows: Iterable[dict], path: str | Path, namespace: str) -> int:
    """Append ``rows`` to an execution-cache file (:mod:`wmrl_core.execution_cache`) under ``namespace``
    (the trainer's is ``json.dumps([env name, env kwargs], sort_keys=True, default=str)``); returns how many."""
    lines = [
        json.dumps(
            {
                "namespace": namespace,
                "task": r["task_id"],
                "solution_sha256": r["solution_sha256"],
                "status": r["status"],
                "score": r["score"],
                "cost_s": float(r["cost_s"] or 0.0),
                "info": {k: r[k] for k in ("runtime_s", "cost_s", "warm", "normalized_score") if r.get(k) is not None},
            }
        )
        for r in rows
    ]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))
    return len(lines)


def export_cache_for_config(
    config: str | Path, cache: str | Path, corpus: str | Path | None = None, overrides: Sequence[str] = ()
) -> int:
    """Write the corpus's executions into ``cache`` keyed as a run of ``config`` keys them, so that a
    benchmark of that config replays them; refuses a config whose environment limits differ from
    the corpus's (its executions would be other events). Rows of a legacy corpus (``"legacy"``:
    rendered by an older renderer, cost not measured) are left out. Returns how many were written."""
    from wmrl_core.config import load_config
    from wmrl_core.execution_cache import cache_namespace

    cfg = load_config(config, overrides)
    kwargs = dict(cfg.environment.kwargs)
    if cfg.environment.name != "autoresearch":
        raise ValueError(f"{config}: environment `{cfg.environment.name}`, not autoresearch; nothing to export")
    limits = {k: float(v) for k, v in dict(kwargs.get("limits") or {}).items()}
    if limits != {k: float(v) for k, v in DEFAULT_LIMITS.items()}:
        raise ValueError(f"{config}: environment limits {limits} differ from the corpus's {DEFAULT_LIMITS}")
    rows = [r for r in load_corpus(corpus) if not r.get("legacy") and r["reward"] is not None]
    return write_execution_cache(rows, cache, cache_namespace(cfg.environment.name, cfg.environment.kwargs))

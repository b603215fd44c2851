"""The execution corpus: training tasks only, deterministic resumable jobs, real sandboxes,
and the execution-cache export a benchmark replays."""

import gzip
import json
from types import SimpleNamespace

import pytest
from wmrl_autoresearch.experiments import config_path
from wmrl_autoresearch.program.corpus import (
    CORPUS_PATH,
    assert_training_only,
    build_corpus,
    corpus_jobs,
    load_corpus,
    write_execution_cache,
)
from wmrl_autoresearch.program.grammar import Program
from wmrl_autoresearch.program.render import render_script
from wmrl_autoresearch.tasks import builtin_suite
from wmrl_autoresearch.tasks.dataset_pool import pool_entries

from wmrl_core.execution_cache import REPLAYED_KEY, CachedEnvironment, cache_namespace


def _task(tid, split="train"):
    return SimpleNamespace(id=tid, data=SimpleNamespace(split=split))


def test_jobs_are_deterministic_balanced_and_extend():
    tasks = [_task(f"t{i}") for i in range(5)]
    jobs = corpus_jobs(tasks, 23, seed=3, per_visit=2)
    assert [j[0] for j in jobs] == [j[0] for j in corpus_jobs(list(reversed(tasks)), 23, seed=3, per_visit=2)]
    assert len({j[0] for j in jobs}) == 23
    first_round = [j[1].id for j in jobs[:10]]
    assert sorted(set(first_round)) == [t.id for t in tasks] and all(first_round.count(t.id) == 2 for t in tasks)
    longer = corpus_jobs(tasks, 40, seed=3, per_visit=2)
    assert [(j[0], j[2]) for j in longer[:23]] == [(j[0], j[2]) for j in jobs]  # more executions extend the list
    assert [j[2] for j in corpus_jobs(tasks, 23, seed=4, per_visit=2)] != [j[2] for j in jobs]


def test_a_heldout_task_is_refused():
    assert_training_only([_task("a"), _task("b")])
    with pytest.raises(ValueError, match="held-out task"):
        assert_training_only([_task("a"), _task("h", "heldout")])


def test_the_shipped_corpus_has_no_heldout_task_and_several_programs_per_task():
    heldout = {c.id for _, c in pool_entries("heldout")} | {e.id for e in builtin_suite.SUITE if e.split == "heldout"}
    rows = load_corpus()
    assert rows and not {r["task_id"] for r in rows} & heldout
    per_task = {}
    for r in rows:
        per_task.setdefault(r["task_id"], set()).add(tuple(r["choices"]))
    assert sum(len(p) >= 4 for p in per_task.values()) >= 10
    assert CORPUS_PATH.stat().st_size < 2_000_000  # small enough to ship


def test_cache_export_is_replayed_by_the_trainers_cache(tmp_path):
    task = builtin_suite.builtin_tasks("train")[0]
    program = Program((0, 1, 0, 2, 1, 0, 0, 1))
    script = render_script(program, classification=task.data.kind == "classification")
    from wmrl_core.execution_cache import solution_digest

    row = {
        "task_id": task.id,
        "solution_sha256": solution_digest(script),
        "status": "ok",
        "score": 0.7,
        "reward": 0.7,
        "cost_s": 1.25,
        "runtime_s": 2.0,
    }
    namespace = cache_namespace("autoresearch", {"sandbox": "docker", "limits": {"timeout_s": 30}})
    assert write_execution_cache([row], tmp_path / "cache.jsonl", namespace) == 1

    class Unreachable:
        def execute(self, tasks, solutions):
            raise AssertionError("a recorded execution reached the environment")

    cached = CachedEnvironment(Unreachable(), tmp_path / "cache.jsonl", namespace=namespace)
    (out,) = cached.execute([task], [script])
    assert out.status == "ok" and out.score == 0.7 and out.info["cost_s"] == 1.25 and out.info[REPLAYED_KEY]


@pytest.mark.slow
def test_build_corpus_executes_for_real_and_resumes(tmp_path, docker_ready):
    logs = []
    kw = dict(warm=1, parallel=2, batch=1, task_sets=["autoresearch-builtin"], log=logs.append)
    summary = build_corpus(tmp_path, 3, **kw)
    assert summary["executions"] == 3 and summary["sandbox_cpu_s"] > 0
    rows = [json.loads(line) for line in (tmp_path / "corpus.jsonl").read_text().splitlines()]
    assert {r["status"] for r in rows} <= {"ok", "timeout", "error", "no_prediction", "invalid_prediction"}
    assert all(r["task_id"] in {t.id for t in builtin_suite.builtin_tasks("train")} for r in rows)
    summary = build_corpus(tmp_path, 4, **kw)  # resumes: one more execution, none repeated
    assert summary["executions"] == 4 and len(summary["sessions"]) == 2 and summary["sessions"][1]["executed"] == 1
    with gzip.open(tmp_path / "corpus.jsonl.gz", "rt") as f:
        packed = [json.loads(line) for line in f]
    assert sorted(r["job"] for r in packed) == sorted({r["job"] for r in packed}) and len(packed) == 4
    assert "logs" not in packed[0]


def test_corpus_cache_is_keyed_for_a_config_and_refuses_other_limits(tmp_path):
    from wmrl_autoresearch.program.corpus import export_cache_for_config

    from wmrl_core.config import load_config

    config = config_path("quickstart.yaml")
    n = export_cache_for_config(config, tmp_path / "cache.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "cache.jsonl").read_text().splitlines()]
    cfg = load_config(config)
    assert n == len(rows) > 0 and {r["namespace"] for r in rows} == {
        cache_namespace(cfg.environment.name, cfg.environment.kwargs)
    }
    # legacy rows (an older renderer's scripts, no measured cost) and sandbox errors are not exported
    assert n == sum(not r.get("legacy") and r["reward"] is not None for r in load_corpus())
    with pytest.raises(ValueError, match="limits"):
        export_cache_for_config(config, tmp_path / "other.jsonl", overrides=["environment.kwargs.limits.timeout_s=10"])

import json

import numpy as np
import pytest

from wmrl_core.config import load_config
from wmrl_core.errors import ContractError
from wmrl_core.execution_cache import CachedEnvironment, solution_digest
from wmrl_core.ledger import ComputeLedger, measured_cost_s
from wmrl_core.metrics import read_metrics
from wmrl_core.trainer import train
from wmrl_core.types import Outcome, Task


class CountingEnv:
    """Scores a solution by its length (or value); records every call; no declared cost."""

    def __init__(self, cost_s=None, log="x" * 5000):
        self.calls, self.cost_s, self.log = [], cost_s, log

    def tasks(self, split):
        return [Task("a"), Task("b")]

    def execute(self, tasks, solutions):
        self.calls.append([(t.id, s) for t, s in zip(tasks, solutions)])
        out = []
        for s in solutions:
            info = {"stdout": self.log, "metric": "len"}
            if self.cost_s is not None:
                info["cost_s"] = self.cost_s
            out.append(
                Outcome(
                    status="ok" if s != "crash" else "crashed",
                    score=float(len(s)) if isinstance(s, str) and s != "crash" else None,
                    info=info,
                )
            )
        return out

    def state_dict(self):
        return {"calls": len(self.calls)}


A, B = Task("a"), Task("b")


def test_a_hit_replays_status_score_and_cost_marked_and_a_miss_executes(tmp_path):
    env = CountingEnv(cost_s=2.5)
    cache = CachedEnvironment(env, tmp_path / "cache.jsonl")
    first = cache.execute([A, B], ["print(1)", "crash"])
    assert len(env.calls) == 1 and not any(o.info.get("replayed") for o in first)
    again = CachedEnvironment(env, tmp_path / "cache.jsonl").execute([A, B], ["print(1)", "crash"])  # loaded at start
    assert len(env.calls) == 1, "a hit must not execute"
    for orig, rep in zip(first, again):
        assert (rep.status, rep.score, rep.info["cost_s"]) == (orig.status, orig.score, orig.info["cost_s"])
        assert rep.info["replayed"] is True
        assert "stdout" not in rep.info and rep.info["metric"] == "len"  # bulky logs are not recorded
    cache.execute([B], ["print(1)"])  # same solution, other task: a miss
    assert env.calls[-1] == [("b", "print(1)")]


def test_an_infrastructure_failure_is_never_recorded_nor_replayed(tmp_path):
    class FlakyEnv(CountingEnv):
        """The engine is down on the first call: every outcome a sandbox_error."""

        def execute(self, tasks, solutions):
            out = super().execute(tasks, solutions)
            if len(self.calls) == 1:
                return [Outcome(status="sandbox_error", score=None, info={"cost_s": 0.0}) for _ in out]
            return out

    env = FlakyEnv(cost_s=1.0)
    cache = CachedEnvironment(env, tmp_path / "cache.jsonl")
    assert [o.status for o in cache.execute([A], ["print(1)"])] == ["sandbox_error"]
    assert len(cache) == 0 and not (tmp_path / "cache.jsonl").exists()  # nothing was written
    again = cache.execute([A], ["print(1)"])  # executed again, not replayed
    assert len(env.calls) == 2 and again[0].status == "ok" and not again[0].info.get("replayed")
    # a file written before such outcomes were kept out: its sandbox_error rows are skipped on load
    row = {"namespace": "", "task": "b", "solution_sha256": solution_digest("x"), "status": "sandbox_error",
           "score": None, "cost_s": 0.0, "info": {}}  # fmt: skip
    with (tmp_path / "cache.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    loaded = CachedEnvironment(env, tmp_path / "cache.jsonl")
    assert len(loaded) == 1 and loaded.execute([B], ["x"])[0].status == "ok" and len(env.calls) == 3


def test_a_mixed_call_executes_only_the_misses_once_each_and_keeps_order(tmp_path):
    env = CountingEnv(cost_s=1.0)
    cache = CachedEnvironment(env, tmp_path / "c.jsonl")
    cache.execute([A], ["xx"])
    out = cache.execute([A, A, B, A, A], ["yyy", "xx", "z", "yyy", "xx"])
    assert env.calls[-1] == [("a", "yyy"), ("b", "z")]
    assert [o.score for o in out] == [3.0, 2.0, 1.0, 3.0, 2.0]
    assert [bool(o.info.get("replayed")) for o in out] == [False, True, False, True, True]
    assert (cache.executed, cache.replayed) == (3, 3)
    assert len(cache) == 3 and len((tmp_path / "c.jsonl").read_text().splitlines()) == 3


def test_a_replay_is_charged_what_the_original_execution_cost(tmp_path):
    env = CountingEnv(cost_s=None)  # no measured cost: the cache records the call's wall time share
    cache = CachedEnvironment(env, tmp_path / "c.jsonl")
    ledger = ComputeLedger()
    charged = []
    for _ in range(2):
        ledger.new_step()
        with ledger.measure("execution", n_items=2, cost=getattr(cache, "cost", None)) as call:
            outcomes = cache.execute([A, B], ["abc", "de"])
            call.measured_s = measured_cost_s(outcomes)
        charged.append(ledger.step["execution"].charged_s)
    assert len(env.calls) == 1 and charged[0] > 0
    assert charged[1] == pytest.approx(charged[0], rel=0, abs=1e-12)


def test_solutions_are_keyed_by_kind_and_value_and_unknown_kinds_are_refused(tmp_path):
    assert solution_digest(3) == solution_digest(np.int64(3)) != solution_digest(3.0) != solution_digest("3")
    assert solution_digest(np.arange(3)) == solution_digest(np.arange(3)) != solution_digest(np.arange(3.0))
    assert solution_digest({"b": [1, 2], "a": None}) == solution_digest({"a": None, "b": (1, 2)})
    with pytest.raises(ContractError, match="environment.cache=null"):
        CachedEnvironment(CountingEnv(), tmp_path / "c.jsonl").execute([A], [object()])


def test_delegates_to_the_environment_and_names_a_corrupt_file(tmp_path):
    cache = CachedEnvironment(CountingEnv(), tmp_path / "c.jsonl")
    assert [t.id for t in cache.tasks("train")] == ["a", "b"] and cache.state_dict() == {"calls": 0}
    assert not hasattr(cache, "cost")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"task": "a"}) + "\n{trunc")
    with pytest.raises(ContractError, match="line 1"):
        CachedEnvironment(CountingEnv(), tmp_path / "bad.jsonl")


def _synthetic(config, run_dir, cache, *over):
    return load_config(
        config,
        [
            f"run_dir={run_dir}",
            f"environment.cache={cache}",
            "mode=real",
            "rollout.batch_tasks=4",
            "eval.every=2",
            "logging.progress=false",
            "logging.tensorboard=false",
            *over,
        ],
    )


def test_the_synthetic_domain_replays_through_the_trainer_at_its_declared_cost(synthetic_config, tmp_path):
    cache = tmp_path / "cache.jsonl"
    train(_synthetic(synthetic_config, tmp_path / "one", cache, "steps=3"))
    train(_synthetic(synthetic_config, tmp_path / "two", cache, "steps=3"))
    one, two = read_metrics(tmp_path / "one"), read_metrics(tmp_path / "two")
    assert all("execution/replayed" in r for r in one[1:] + two[1:])
    n = 4 * 8  # real mode: every rollout executed, every step
    assert all(0 <= r["execution/replayed"] <= n for r in one[1:])
    assert all(r["execution/replayed"] == n for r in two[1:]), "the same seed meets only recorded executions"
    # a declared CostModel charges replays and executions alike
    assert [r["compute/execution_s"] for r in one] == [r["compute/execution_s"] for r in two]
    assert [r["reward/real_mean"] for r in one[1:]] == [r["reward/real_mean"] for r in two[1:]]
    assert "execution/replayed" not in read_metrics(tmp_path / "one")[0]
    off = train(
        load_config(
            synthetic_config,
            [
                f"run_dir={tmp_path / 'off'}",
                "mode=real",
                "steps=1",
                "rollout.batch_tasks=4",
                "logging.progress=false",
                "logging.tensorboard=false",
            ],
        )
    )
    assert "execution/replayed" not in off["final"]  # off by default


def test_a_resumed_run_with_the_cache_gives_the_same_metrics(synthetic_config, tmp_path):
    common = ["checkpoint.every=2", "mode=wmrl", "anchors.fraction=0.5"]
    train(_synthetic(synthetic_config, tmp_path / "full", tmp_path / "full.jsonl", "steps=4", *common))
    train(_synthetic(synthetic_config, tmp_path / "part", tmp_path / "part.jsonl", "steps=2", *common))
    train(_synthetic(synthetic_config, tmp_path / "part", tmp_path / "part.jsonl", "steps=4", "resume=true", *common))

    def strip(r):
        return {k: v for k, v in r.items() if not k.startswith("wall/")}

    a, b = read_metrics(tmp_path / "full"), read_metrics(tmp_path / "part")
    assert [strip(r) for r in a] == [strip(r) for r in b]
    assert sum(r.get("execution/replayed", 0) for r in a) > 0  # the check covers replays, not only misses

    def records(path):  # cost_s is measured wall time here, so it differs between the two files
        return [
            (r["task"], r["solution_sha256"], r["status"], r["score"])
            for r in map(json.loads, path.read_text().splitlines())
        ]

    assert records(tmp_path / "full.jsonl") == records(tmp_path / "part.jsonl")


@pytest.mark.filterwarnings("ignore:.*NOT ISOLATED")
def test_an_autoresearch_replay_is_charged_the_recorded_cpu_seconds(tmp_path):
    pytest.importorskip("wmrl_autoresearch")
    from wmrl_core.plugins import build_registry

    env = build_registry().environments.make(
        "autoresearch", sandbox="local-unsafe", task_sets=["autoresearch-builtin"], limits={"timeout_s": 30}
    )
    cache = CachedEnvironment(env, tmp_path / "c.jsonl")
    task, script = (
        env.tasks("train")[0],
        "print('z' * 5000)\nsum(range(10**6))\n",
    )  # no predictions: graded as a failure
    ledger, outcomes = ComputeLedger(), []
    try:
        for _ in range(2):
            ledger.new_step()
            with ledger.measure("execution", n_items=1, cost=getattr(cache, "cost", None)) as call:
                outcomes += cache.execute([task], [script])
                call.measured_s = measured_cost_s(outcomes[-1:])
            outcomes[-1].info["charged_s"] = ledger.step["execution"].charged_s
    finally:
        cache.close()
    first, replay = outcomes
    assert first.info["cost_s"] > 0 and "replayed" not in first.info and replay.info["replayed"] is True
    assert (replay.status, replay.score, replay.info["cost_s"]) == (first.status, first.score, first.info["cost_s"])
    assert replay.info["charged_s"] == first.info["charged_s"] == first.info["cost_s"]  # CPU seconds, not wall time
    assert len(first.info["logs"]["stdout"]) > 2000 and "logs" not in replay.info  # bulky logs are not recorded

"""The Ray execution backend: same job, same accounting, execution spread over actors.

The test environments below live in this module, which Ray workers cannot import by name;
they reach the workers through the pool's ``factory=`` argument, pickled *by value*
(``ray.cloudpickle.register_pickle_by_value``). Ray runs locally with 2 CPUs and no dashboard.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import pytest

from wmrl_core.builtin_rewards import ScoreReward
from wmrl_core.config import load_config
from wmrl_core.distributed import SEED_STRIDE, RayExecutionPool, _worker_kwargs, ray_available, shard_bounds
from wmrl_core.errors import ConfigError, WMRLError
from wmrl_core.metrics import read_metrics
from wmrl_core.testing import require
from wmrl_core.trainer import extract_rewards, train
from wmrl_core.types import CostModel, Outcome, Task

SYNTHETIC = Path(__file__).resolve().parents[1] / "configs" / "synthetic" / "wmrl.yaml"
DIE_ALWAYS, DIE_ONCE, RAISE = -1, -2, -3
TASKS = [Task(id=f"t{i}", data={"index": i}) for i in range(3)]


class EchoEnv:
    """Outcome score = the solution; ``info`` tells which process and seed executed it.

    Solution ``DIE_ALWAYS`` kills the worker process, ``DIE_ONCE`` kills it only while
    ``marker`` does not exist (creating it first), ``RAISE`` raises a plugin bug."""

    cost = CostModel(per_call_s=0.5, per_item_s=2.0)

    def __init__(self, seed: int = 0, marker: str | None = None):
        self.seed, self.marker, self.calls = seed, marker, 0

    def tasks(self, split: str = "train") -> list[Task]:
        if split != "train":
            raise ValueError(f"unknown split {split!r}")
        return list(TASKS)

    def execute(self, tasks, solutions):
        outcomes = []
        for solution in solutions:
            if solution == DIE_ALWAYS:
                os._exit(1)
            if solution == DIE_ONCE and self.marker and not Path(self.marker).exists():
                Path(self.marker).touch()
                os._exit(1)
            if solution == RAISE:
                raise ValueError("a bug in the environment")
            outcomes.append(Outcome(score=float(solution), info={"pid": os.getpid(), "seed": self.seed}))
        self.calls += 1
        return outcomes

    def true_reward(self, task, solution) -> float:
        return float(solution) * 10

    def state_dict(self) -> dict:
        return {"calls": self.calls}

    def load_state_dict(self, state: dict) -> None:
        self.calls = state["calls"]


class PlainEnv:
    """No ``true_reward``; records ``close``."""

    def __init__(self, seed: int = 0):
        self.closed = False

    def tasks(self, split: str = "train") -> list[Task]:
        return list(TASKS)

    def execute(self, tasks, solutions):
        return [Outcome(score=float(s), info={"pid": os.getpid()}) for s in solutions]

    def close(self) -> None:
        self.closed = True


def _ensure_ray():
    """A local Ray shared by the tests that do not test starting it (started once)."""
    require(ray_available(), "Ray is not installed: pip install 'wmrl[ray]'")
    import ray
    from ray import cloudpickle  # Ray's own copy: the one that pickles the factory

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False)
    return ray


@pytest.fixture
def ray_cluster():
    return _ensure_ray()


@pytest.fixture(scope="module", autouse=True)
def _ray_down_after_module():
    yield
    if ray_available():
        import ray

        if ray.is_initialized():
            ray.shutdown()


def _gone(pids: list[int], timeout_s: float = 20.0) -> bool:
    """Whether every process in ``pids`` has exited within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.2)
    return False


# --------------------------------------------------------------------------- without Ray


def test_shards_are_contiguous_balanced_and_cover_the_batch():
    assert shard_bounds(5, 2) == [(0, 3), (3, 5)]
    assert shard_bounds(16, 2) == [(0, 8), (8, 16)]
    assert shard_bounds(1, 3) == [(0, 1)]
    assert shard_bounds(0, 2) == []
    for n in range(12):
        for k in range(1, 5):
            bounds = shard_bounds(n, k)
            assert [i for a, b in bounds for i in range(a, b)] == list(range(n))
            sizes = [b - a for a, b in bounds]
            assert not sizes or max(sizes) - min(sizes) <= 1


def test_worker_seeds_are_offset_from_kwargs_or_the_signature():
    assert _worker_kwargs({"seed": 7, "x": 1}, EchoEnv, 0) == {"seed": 7, "x": 1}
    assert _worker_kwargs({"seed": 7, "x": 1}, EchoEnv, 2) == {"seed": 7 + 2 * SEED_STRIDE, "x": 1}
    assert _worker_kwargs({}, EchoEnv, 1) == {"seed": SEED_STRIDE}  # EchoEnv's default seed=0
    assert _worker_kwargs({"seed": None}, EchoEnv, 1) == {"seed": None}
    assert _worker_kwargs({}, lambda **kw: None, 1) == {}


def test_config_validates_the_backend(monkeypatch):
    base = ["environment.name=synthetic-bandit", "policy.name=tabular-softmax", "mode=real"]
    assert load_config(None, base).distributed.backend == "local"
    with pytest.raises(ConfigError, match="distributed.backend"):
        load_config(None, [*base, "distributed.backend=mpi"])
    with pytest.raises(ConfigError, match="num_workers"):
        load_config(None, [*base, "distributed.num_workers=0"])
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real_find_spec(name, *a)
    )
    with pytest.raises(ConfigError, match=r"pip install 'wmrl\[ray\]'"):
        load_config(None, [*base, "distributed.backend=ray"])


# --------------------------------------------------------------------------- with Ray


@pytest.mark.slow
def test_pool_that_started_ray_closes_everything_it_made():
    require(ray_available(), "Ray is not installed: pip install 'wmrl[ray]'")
    import ray
    from ray import cloudpickle  # Ray's own copy: the one that pickles the factory

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if ray.is_initialized():
        ray.shutdown()
    local = PlainEnv()
    pool = RayExecutionPool("plain", {}, num_workers=2, factory=PlainEnv, local_env=local)
    try:
        assert ray.is_initialized() and len(set(pool.pids)) == 2
        assert not hasattr(pool, "true_reward")  # the trainer then evaluates by real execution
        assert pool.cost is None and [t.id for t in pool.tasks("anything")] == ["t0", "t1", "t2"]  # the local instance
        assert [o.info["pid"] for o in pool.execute(TASKS[:2], [1, 2])] == pool.pids
    finally:
        pool.close()
    assert local.closed and not ray.is_initialized()
    assert _gone(pool.pids), f"Ray worker processes {pool.pids} outlived close()"
    pool.close()  # twice is fine


@pytest.mark.slow
def test_execute_preserves_order_across_shards(ray_cluster):
    pool = RayExecutionPool("echo", {"seed": 5}, num_workers=2, factory=EchoEnv)
    try:
        outcomes = pool.execute([TASKS[i % 3] for i in range(5)], [10, 11, 12, 13, 14])
        assert [o.score for o in outcomes] == [10.0, 11.0, 12.0, 13.0, 14.0]
        assert [o.info["pid"] for o in outcomes] == [pool.pids[0]] * 3 + [pool.pids[1]] * 2  # contiguous chunks
        assert [o.info["seed"] for o in outcomes] == [5] * 3 + [5 + SEED_STRIDE] * 2
        assert [o.info["pid"] for o in pool.execute(TASKS[:1], [7])] == [pool.pids[0]]
        assert pool.execute([], []) == []
        # the wrapped environment's interface, from worker 0 (no local instance given)
        assert pool.cost == EchoEnv.cost and pool.true_reward(TASKS[0], 3) == 30.0
        assert [t.id for t in pool.tasks("train")] == ["t0", "t1", "t2"]
        with pytest.raises(ValueError, match="unknown split"):
            pool.tasks("heldout")
        with pytest.raises(ValueError, match="a bug in the environment"):  # plugin bugs are not masked
            pool.execute(TASKS[:2], [1, RAISE])
    finally:
        pool.close()


@pytest.mark.slow
def test_startup_failures_name_the_fix(ray_cluster):
    with pytest.raises(
        WMRLError, match=r"(?s)could not build environment `no-such-env`.*No environment named.*Install the plugin"
    ):
        RayExecutionPool("no-such-env", {}, num_workers=1)  # e.g. a plugin missing on the Ray nodes
    with pytest.raises(WMRLError, match=r"did not start within 1 s; they need 2 x 100 CPUs and the cluster has 2"):
        RayExecutionPool("echo", {}, num_workers=2, worker_cpus=100, factory=EchoEnv, ready_timeout_s=1)
    assert ray_cluster.is_initialized()


@pytest.mark.slow
def test_dead_worker_is_restarted_and_retried_then_reported_as_sandbox_error(ray_cluster, tmp_path):
    pool = RayExecutionPool("echo", {"marker": str(tmp_path / "died")}, num_workers=2, factory=EchoEnv)
    try:
        tasks = [TASKS[i % 3] for i in range(4)]
        # both workers die: worker 0 only the first time (its retry succeeds), worker 1 on the retry too
        outcomes = pool.execute(tasks, [DIE_ONCE, 2, 3, DIE_ALWAYS])
        assert [(o.status, o.score) for o in outcomes] == [
            ("ok", float(DIE_ONCE)),
            ("ok", 2.0),
            ("sandbox_error", None),
            ("sandbox_error", None),
        ]
        assert outcomes[0].info["pid"] != pool.pids[0]  # executed by the restarted process
        assert pool.restarts == 2 and pool.sandbox_errors == 2
        rewards = extract_rewards(ScoreReward(), tasks, outcomes)
        assert rewards[:2].tolist() == [-2.0, 2.0] and all(math.isnan(r) for r in rewards[2:])  # dropped, not 0

        outcomes = pool.execute(tasks, [5, 6, 7, 8])  # worker 1 was restarted again: training goes on
        assert [(o.status, o.score) for o in outcomes] == [("ok", 5.0), ("ok", 6.0), ("ok", 7.0), ("ok", 8.0)]
        assert outcomes[3].info["pid"] != pool.pids[1]
    finally:
        pool.close()


def _cfg(synthetic_config, run_dir, *overrides):
    return load_config(
        synthetic_config,
        [
            f"run_dir={run_dir}",
            "steps=12",
            "eval.every=4",
            "checkpoint.every=4",
            "logging.progress=false",
            "logging.tensorboard=false",
            *overrides,
        ],
    )


def _metrics(summary):
    return read_metrics(Path(summary["run_dir"]))


def _strip(records):
    return [{k: v for k, v in r.items() if not k.startswith("wall/")} for r in records]


RAY2 = ["distributed.backend=ray", "distributed.num_workers=2"]


@pytest.fixture(scope="module")
def two_worker_run(tmp_path_factory):
    """The synthetic job, 12 steps, execution on 2 Ray workers: its metrics."""
    _ensure_ray()
    return _metrics(train(_cfg(SYNTHETIC, tmp_path_factory.mktemp("ray") / "two", *RAY2)))


@pytest.mark.slow
def test_training_on_ray_executes_and_charges_like_the_local_run(
    ray_cluster, two_worker_run, synthetic_config, tmp_path
):
    local = _metrics(train(_cfg(synthetic_config, tmp_path / "local")))
    one = _metrics(
        train(_cfg(synthetic_config, tmp_path / "one", "distributed.backend=ray", "distributed.num_workers=1"))
    )
    assert _strip(one) == _strip(local)  # worker 0 keeps the seed: one worker is the local run
    two = two_worker_run
    assert [r["step"] for r in two] == list(range(13))
    for key in ("compute/execution_items", "compute/execution_calls", "compute/execution_s", "compute/total_s"):
        assert two[-1][key] == local[-1][key], key
    assert two[-1]["compute/execution_items"] == 12 * 2 * 8  # 10% of 20 groups of 8
    assert two[-1]["reward/real_mean"] != local[-1]["reward/real_mean"]  # worker 1 draws its own noise
    assert two[-1]["eval/true_reward"] > two[0]["eval/true_reward"] + 0.08  # it learns (0.49 -> 0.62 here)
    assert abs(two[-1]["eval/true_reward"] - local[-1]["eval/true_reward"]) < 0.05  # as much as the local run
    assert ray_cluster.is_initialized()  # the runs joined the test's Ray and left it running


@pytest.mark.slow
def test_resume_with_the_pool_reproduces_an_uninterrupted_run(ray_cluster, two_worker_run, synthetic_config, tmp_path):
    train(_cfg(synthetic_config, tmp_path / "part", "steps=8", *RAY2))  # "crashes" after its step-8 checkpoint
    part = _metrics(train(_cfg(synthetic_config, tmp_path / "part", "resume=true", *RAY2)))
    assert [r["step"] for r in part] == list(range(13))
    assert _strip(part) == _strip(two_worker_run)  # the workers' RNG states came back from the checkpoint

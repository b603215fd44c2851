"""Real execution on Ray: the same job, its non-batching stage spread over many workers.

Generation and the world model batch on one accelerator; real execution (a sandbox, a
simulator) does not, so it is the stage worth spreading out. With
``distributed.backend=ray`` the trainer talks to a :class:`RayExecutionPool` instead of the
environment: the pool looks like an environment (``tasks``, ``execute``, ``cost``,
``true_reward``, ``state_dict``/``load_state_dict``, ``close``) and runs ``execute`` on
``num_workers`` Ray actors, each holding its own environment instance. Plugins do not change.

How the workers build their environment
    Each actor builds the registry itself (``wmrl_core.plugins.build_registry()``, so the
    plugin package must be installed on every Ray node, and ``WMRL_DISABLE_PLUGINS`` is
    forwarded) and makes the environment by name with the config's kwargs. Components that
    exist only in the driver (plugin objects passed as ``extra_plugins``, test classes) are
    invisible to the workers: pass ``factory=`` (a callable, shipped to the workers by
    Ray's cloudpickle) to build those instead. Cloudpickle ships a class *by reference*
    when its module is importable here; if the workers cannot import that module, call
    ``ray.cloudpickle.register_pickle_by_value(module)`` first (``tests/test_distributed.py``
    does this for its test environments).

Seeds
    Worker ``i`` gets ``seed + i * SEED_STRIDE`` when the environment takes an integer
    ``seed`` (from the config's kwargs, the registered defaults, or the factory's signature
    default), so workers draw distinct noise; worker 0 keeps the configured seed, hence
    ``num_workers=1`` reproduces a local run exactly. Other kwargs are passed unchanged.

Sharding
    ``execute`` splits the batch into ``num_workers`` contiguous chunks (sizes differ by at
    most one), runs them concurrently and returns the outcomes in input order. Tasks and
    solutions travel by pickle. The declared ``CostModel`` is the wrapped environment's, so
    the charged compute (per item) is unchanged; only the wall time drops.

Worker crashes
    An actor whose process dies mid-call is restarted by Ray (``max_restarts``, its
    environment rebuilt from scratch, so its RNG restarts too) and its shard is retried
    once; if that fails as well, the shard's outcomes are ``Outcome(status="sandbox_error")``
    with no score: an infrastructure failure, dropped from the update (NaN), never a zero
    reward. An exception *raised* by the environment's code is a plugin bug and propagates,
    as it would locally.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import math
import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from wmrl_core.contracts import Closeable, KnowsTrueReward, Stateful
from wmrl_core.errors import WMRLError
from wmrl_core.types import CostModel, Outcome, Task

__all__ = ["RayExecutionPool", "SEED_STRIDE", "SANDBOX_ERROR", "ray_available", "shard_bounds"]

log = logging.getLogger(__name__)

SEED_STRIDE = 1_000_003
"""Seed offset between consecutive workers: larger than the seeds of any sweep, so the worker
seeds of runs with nearby seeds (0, 1, 2, ...) never coincide."""
SANDBOX_ERROR = "sandbox_error"
"""``Outcome.status`` of a solution whose worker died on the retry too (or did not come back)."""
INSTALL_HINT = "pip install 'wmrl[ray]'"


def ray_available() -> bool:
    """Whether Ray can be imported (without importing it)."""
    return importlib.util.find_spec("ray") is not None


def shard_bounds(n_items: int, n_shards: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of ``n_shards`` contiguous chunks covering ``n_items``, larger chunks
    first, sizes differing by at most one; empty chunks are left out."""
    base, extra = divmod(n_items, n_shards)
    bounds, start = [], 0
    for i in range(n_shards):
        stop = start + base + (i < extra)
        if stop > start:
            bounds.append((start, stop))
        start = stop
    return bounds


def _worker_kwargs(kwargs: dict[str, Any], factory: Callable[..., Any], index: int) -> dict[str, Any]:
    """The factory kwargs of worker ``index``: the seed offset by ``index * SEED_STRIDE``."""
    kwargs = dict(kwargs)
    seed = kwargs.get("seed")
    if "seed" not in kwargs:
        try:
            seed = inspect.signature(factory).parameters["seed"].default
        except (KeyError, TypeError, ValueError):
            seed = None
    if isinstance(seed, int) and not isinstance(seed, bool) and index:
        kwargs["seed"] = seed + index * SEED_STRIDE
    return kwargs


class _ExecutionWorker:
    """One Ray actor: builds its own environment and executes shards on it."""

    def __init__(self, name: str, kwargs: dict[str, Any], factory: Callable[..., Any] | None, index: int):
        from wmrl_core import checkers

        try:
            if factory is None:
                from wmrl_core.plugins import build_registry

                spec = build_registry().environments.get(name)
                factory, kwargs = spec.load(), {**spec.kwargs, **kwargs}
            self.env = factory(**_worker_kwargs(kwargs, factory, index))
            checkers.check_environment(self.env)
        except Exception as exc:  # re-raised as a plain message: not every exception class unpickles
            raise WMRLError(f"{type(exc).__name__}: {exc}") from None
        self.index = index

    def describe(self) -> dict[str, Any]:
        """What the pool needs to impersonate the environment, plus this process's id."""
        env = self.env
        return {
            "pid": os.getpid(),
            "cost": getattr(env, "cost", None),
            "true_reward": isinstance(env, KnowsTrueReward),
            "stateful": isinstance(env, Stateful),
        }

    def execute(self, tasks: list[Task], solutions: list[Any]) -> list[Any]:
        return list(self.env.execute(tasks, solutions))

    def tasks(self, split: str) -> list[Task]:
        return list(self.env.tasks(split))

    def true_reward(self, task: Task, solution: Any) -> float:
        return self.env.true_reward(task, solution)

    def state_dict(self) -> Any:
        return self.env.state_dict() if isinstance(self.env, Stateful) else None

    def load_state_dict(self, state: Any) -> None:
        if state is not None and isinstance(self.env, Stateful):
            self.env.load_state_dict(state)

    def close(self) -> None:
        if isinstance(self.env, Closeable):
            self.env.close()


class RayExecutionPool:
    """An environment whose ``execute`` runs on ``num_workers`` Ray actors.

    :param name: the registered environment (``environment.name``).
    :param kwargs: the factory's keyword arguments (``environment.kwargs``).
    :param num_workers: actors, each with its own environment instance.
    :param address: ``None`` starts a local Ray sized to fit the pool (at least the
        machine's cores; more when ``num_workers * worker_cpus`` needs it, since execution
        often waits on a sandbox); ``"auto"`` or ``"ray://host:10001"`` joins a cluster.
        Ignored when Ray is already initialized in this process.
    :param worker_cpus: CPUs Ray reserves per actor (may be fractional or 0).
    :param local_env: an instance of the same environment in this process, used for
        ``tasks``, ``cost`` and ``true_reward`` (no round trip) and closed with the pool;
        without one these go to worker 0.
    :param factory: build the workers' environments with ``factory(**kwargs)`` instead of
        the registry (for components the workers cannot import by name).
    :param max_restarts: times Ray restarts a dead actor (``-1``: no limit).
    :param ready_timeout_s: seconds to wait for the actors to start (cluster capacity,
        environment construction) before failing.
    """

    def __init__(
        self,
        name: str,
        kwargs: dict[str, Any] | None = None,
        *,
        num_workers: int = 2,
        address: str | None = None,
        worker_cpus: float = 1.0,
        local_env: Any = None,
        factory: Callable[..., Any] | None = None,
        max_restarts: int = -1,
        ready_timeout_s: float = 300.0,
    ):
        if not ray_available():
            raise WMRLError(f"the Ray execution backend needs Ray, which is not installed: {INSTALL_HINT}")
        if num_workers < 1 or worker_cpus < 0:
            raise WMRLError(f"num_workers must be >= 1 and worker_cpus >= 0, got {num_workers} and {worker_cpus}")
        import ray

        self.name, self.num_workers, self._local = name, num_workers, local_env
        self._ready_timeout_s = ready_timeout_s
        self.restarts, self.sandbox_errors = 0, 0  # shards retried, outcomes lost to dead workers
        self._actors: list[Any] = []
        self._started_ray = self._ready = False
        try:
            if not ray.is_initialized():
                if address is None:
                    needed = math.ceil(num_workers * worker_cpus)
                    # "local": a new instance even if `ray start` left one (or a stale record of one) here
                    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, needed), include_dashboard=False)
                else:
                    try:
                        ray.init(address=address)
                    except ConnectionError as exc:
                        raise WMRLError(
                            f"could not join the Ray cluster at distributed.address={address!r}: "
                            f"{exc}. Start one (`ray start --head` on the head node) or leave "
                            "distributed.address unset to start a local Ray"
                        ) from None
                self._started_ray = True
            self._start_actors(kwargs or {}, factory, worker_cpus, max_restarts, ready_timeout_s)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ lifecycle

    def _start_actors(
        self,
        kwargs: dict[str, Any],
        factory: Callable[..., Any] | None,
        worker_cpus: float,
        max_restarts: int,
        ready_timeout_s: float,
    ) -> None:
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        options: dict[str, Any] = {"num_cpus": worker_cpus, "max_restarts": max_restarts, "max_task_retries": 0}
        if os.environ.get("WMRL_DISABLE_PLUGINS"):
            options["runtime_env"] = {"env_vars": {"WMRL_DISABLE_PLUGINS": os.environ["WMRL_DISABLE_PLUGINS"]}}
        tag = uuid.uuid4().hex[:8]
        actor_cls = ray.remote(_ExecutionWorker)
        self._actors = [
            actor_cls.options(name=f"wmrl-exec-{tag}-{i}", **options).remote(self.name, kwargs, factory, i)
            for i in range(self.num_workers)
        ]
        try:
            info = ray.get([a.describe.remote() for a in self._actors], timeout=ready_timeout_s)
        except GetTimeoutError:
            cpus = ray.cluster_resources().get("CPU", 0)
            raise WMRLError(
                f"{self.num_workers} Ray workers for environment `{self.name}` did not start within {ready_timeout_s:.0f} s; "
                f"they need {self.num_workers} x {worker_cpus} CPUs and the cluster has {cpus:g}. Lower "
                "distributed.num_workers or distributed.worker_cpus, or add nodes"
            ) from None
        except RayError as exc:
            raise WMRLError(
                f"a Ray worker could not build environment `{self.name}`: {str(exc).strip()[-1500:]}\n"
                "Install the plugin (and wmrl) on every Ray node, or check the environment's kwargs"
            ) from None
        self._ready = True
        self.pids = [d["pid"] for d in info]  # the actors' process ids at start (a restart changes them)
        first = info[0]
        self._stateful = first["stateful"]
        # true_reward exists only when the environment has it: the trainer checks for the attribute
        if self._local is not None:
            self.cost: CostModel | None = getattr(self._local, "cost", None)
            if isinstance(self._local, KnowsTrueReward):
                self.true_reward = self._local.true_reward
        else:
            self.cost = first["cost"]
            if first["true_reward"]:
                self.true_reward = self._remote_true_reward

    def close(self) -> None:
        """Close each worker's environment, kill the actors, close the local instance, and
        shut Ray down if this pool started it. Safe to call twice."""
        try:
            import ray
        except ImportError:
            return
        actors, self._actors = self._actors, []
        if actors and ray.is_initialized() and self._ready:  # environments exist: close them first
            refs = [a.close.remote() for a in actors]
            deadline = time.monotonic() + 60
            for k, ref in enumerate(refs):
                try:
                    ray.get(ref, timeout=max(deadline - time.monotonic(), 1))
                except Exception as exc:  # a dead or stuck worker must not keep the others alive
                    log.warning("closing the environment of Ray execution worker %d: %s", k, type(exc).__name__)
        if actors and ray.is_initialized():
            for actor in actors:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception as exc:
                    log.warning("killing a Ray execution worker: %s", exc)
        local, self._local = self._local, None
        if local is not None and isinstance(local, Closeable):
            local.close()
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
        self._started_ray = False

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles (empty once closed)."""
        return list(self._actors)

    # ------------------------------------------------------------------ environment interface

    def tasks(self, split: str = "train") -> list[Task]:
        if self._local is not None:
            return self._local.tasks(split)
        return self._call(0, "tasks", split)

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Any]:
        """Outcomes of ``solutions``, in order, executed concurrently in contiguous shards."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        tasks, solutions = list(tasks), list(solutions)
        if len(tasks) != len(solutions):
            raise ValueError(
                f"execute got {len(tasks)} tasks for {len(solutions)} solutions; pass one task per solution"
            )
        self._alive()
        bounds = shard_bounds(len(solutions), self.num_workers)
        results: list[Any] = [None] * len(bounds)  # one list of outcomes per shard, once it is in
        pending = list(range(len(bounds)))
        for attempt in range(2):
            refs = {
                k: self._actors[k].execute.remote(tasks[slice(*bounds[k])], solutions[slice(*bounds[k])])
                for k in pending
            }
            failed: dict[int, str] = {}
            for k, ref in refs.items():
                try:
                    results[k] = ray.get(ref)
                except RayActorError as exc:
                    failed[k] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                except RayTaskError as exc:
                    raise exc.as_instanceof_cause() from None
            for k, reason in failed.items():
                log.warning(
                    "Ray execution worker %d died or was down for items %d..%d (%s); %s",
                    k,
                    *bounds[k],
                    reason,
                    "retrying once" if attempt == 0 else "reporting them as sandbox_error",
                )
            pending = list(failed)
            if not pending:
                break
            if attempt == 0:  # retry on the restarted actors; one that stays dead is not retried
                self.restarts += len(pending)
                pending = [k for k in pending if self._wait_restarted(k)]
        for k in pending:  # failed twice: infrastructure failure, not a zero reward
            start, stop = bounds[k]
            self.sandbox_errors += stop - start
            results[k] = [
                Outcome(
                    status=SANDBOX_ERROR,
                    score=None,
                    info={"error": f"Ray worker {k} died twice executing this shard", "worker": k},
                )
                for _ in range(stop - start)
            ]
        outcomes: list[Any] = []
        for k, (start, stop) in enumerate(bounds):
            if len(results[k]) != stop - start:
                raise WMRLError(
                    f"environment `{self.name}` on Ray worker {k} returned {len(results[k])} outcomes "
                    f"for {stop - start} solutions; execute must return one outcome per solution"
                )
            outcomes.extend(results[k])
        return outcomes

    def _wait_restarted(self, k: int) -> bool:
        """Wait (up to ``ready_timeout_s``) until Ray has restarted actor ``k``; ``False`` if it
        stays dead (restarts exhausted, environment no longer builds) or does not come back."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        unavailable = getattr(ray.exceptions, "ActorUnavailableError", ())  # Ray >= 2.3x: "the actor is restarting"
        deadline = time.monotonic() + self._ready_timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                ray.get(self._actors[k].describe.remote(), timeout=left)
                return True
            except unavailable:
                time.sleep(0.1)
            except (RayActorError, GetTimeoutError) as exc:
                log.warning("Ray execution worker %d did not come back: %s", k, type(exc).__name__)
                return False
        return False

    def _remote_true_reward(self, task: Task, solution: Any) -> float:
        return self._call(0, "true_reward", task, solution)

    def _call(self, k: int, method: str, *args: Any) -> Any:
        """``method(*args)`` on worker ``k``, waiting out one restart of its actor. Exceptions
        the environment raises propagate as themselves (e.g. ``ValueError``)."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        self._alive()
        for attempt in range(2):
            try:
                return ray.get(getattr(self._actors[k], method).remote(*args))
            except RayTaskError as exc:
                raise exc.as_instanceof_cause() from None
            except RayActorError as exc:
                if attempt or not self._wait_restarted(k):
                    raise WMRLError(
                        f"Ray execution worker {k} of `{self.name}` is unavailable for {method}() "
                        f"({type(exc).__name__}); its log is under /tmp/ray/session_latest/logs "
                        "on its node"
                    ) from exc

    def state_dict(self) -> dict[str, Any]:
        """Each worker's environment state (``None`` for stateless environments, and for a
        worker that is unavailable: it would resume from a fresh environment)."""
        states: list[Any] = [None] * self.num_workers
        for k in range(self.num_workers if self._stateful else 0):
            try:
                states[k] = self._call(k, "state_dict")
            except WMRLError as exc:
                log.warning("checkpointing without the state of a Ray execution worker: %s", exc)
        return {"ray_workers": states}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the workers' states. A checkpoint of a local run restores worker 0 (the
        others start fresh); a pool of another size restores the workers both have."""
        if isinstance(state, dict) and "ray_workers" in state:
            states = list(state["ray_workers"])
            if len(states) != self.num_workers:
                log.warning(
                    "checkpoint has %d Ray execution workers, this pool %d: restoring the first %d",
                    len(states),
                    self.num_workers,
                    min(len(states), self.num_workers),
                )
        else:
            log.warning("checkpoint comes from a local run: restoring its environment state on Ray worker 0 only")
            states = [state]
        for k, worker_state in enumerate(states[: self.num_workers]):
            self._call(k, "load_state_dict", worker_state)

    def _alive(self) -> Any:
        if not self._actors:
            raise WMRLError(f"the Ray execution pool of `{self.name}` is closed; make a new one")
        return self._actors[0]

"""N LIBERO environments in worker processes, surviving crashed workers.

The equivalent of ``gymnasium.vector.AsyncVectorEnv`` for LIBERO, with two differences that
LIBERO needs:

- Observations are returned as a list of dicts, one per environment, because different
  tasks have different ``object_state`` lengths and cannot be stacked.
- A worker that dies (segfault in MuJoCo, OOM kill, EGL failure) is restarted with the same
  environment; the step that lost it returns ``truncated=True`` and
  ``info["infrastructure_failure"] = True`` with the error, so callers can report an
  infrastructure failure instead of scoring the episode as a zero.
- Workers persist: each keeps the environments it has built (:class:`~wmrl_libero.env_cache.EnvCache`,
  ``envs_per_worker`` of them) and :meth:`LiberoVectorEnv.use_at` switches a worker to another
  task without rebuilding one it already holds. Keep one ``LiberoVectorEnv`` for a whole
  training run: a reset to a stored init state costs milliseconds, a build seconds.

- Workers need not wait for each other: :meth:`LiberoVectorEnv.step_async_at` sends one
  environment its action and :meth:`LiberoVectorEnv.wait_steps` returns the results of those
  that have finished (``multiprocessing.connection.wait`` on the pipes), so a worker whose
  task steps faster is given its next action at once instead of idling until the slowest
  worker of a lockstep :meth:`LiberoVectorEnv.step` is done.
- Several actions per round trip: :meth:`LiberoVectorEnv.step_chunk_async_at` sends an
  environment a chunk of actions, which the worker steps through one control step at a time
  (:func:`step_through`, stopping at termination or truncation); :meth:`LiberoVectorEnv.wait_chunks`
  returns every step's result. For a policy that acts open loop over a chunk, this is the
  same sequence of ``step`` calls as one round trip per action, without the pickling,
  pipe transfers and process wake-ups in between.
- Each worker measures the CPU seconds it spends (``time.process_time``, its own process:
  independent of what else the machine runs) and reports them with every reply;
  :meth:`LiberoVectorEnv.take_cpu_s` hands over what a worker used since the last call (the
  episode runner charges it to the episode that worker just ran).

No autoreset: call :meth:`reset_at` for an environment whose episode ended.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from collections.abc import Sequence
from multiprocessing.connection import wait as wait_for_ready
from typing import Any

import numpy as np

from wmrl_core.errors import ComponentError
from wmrl_libero.env_cache import env_key

__all__ = ["LiberoVectorEnv", "WorkerCrashed", "step_through"]

_START_METHOD = "spawn"  # fork would copy torch/EGL state of the parent; spawn is clean
_REPLY_TIMEOUT_S = 600.0


class WorkerCrashed(ComponentError):
    """A worker process died or stopped answering."""


def step_through(env, actions) -> list[tuple]:
    """``env.step`` for each action of ``actions`` in turn, stopping after the step that
    terminates or truncates the episode.

    :return: every step's ``(obs, reward, terminated, truncated, info)``, in order.
    """
    results = []
    for action in actions:
        results.append(env.step(action))
        if results[-1][2] or results[-1][3]:
            break
    return results


def _worker(conn, env_kwargs: dict[str, Any], envs_per_worker: int) -> None:
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    from wmrl_libero.env_cache import EnvCache

    cpu_mark = 0.0  # process CPU seconds already reported (imports and the first build count too)

    def send(status: str, value: Any) -> None:
        nonlocal cpu_mark
        now = time.process_time()
        conn.send((status, value, now - cpu_mark))
        cpu_mark = now

    cache = None
    try:
        cache = EnvCache(capacity=envs_per_worker)
        env, _ = cache.use(env_kwargs)
        send("ok", {"pid": os.getpid()})
        while True:
            cmd, payload = conn.recv()
            if cmd == "close":
                break
            try:
                if cmd == "reset":
                    result = env.reset(**payload)
                elif cmd == "step":
                    result = env.step(payload)
                elif cmd == "steps":
                    result = step_through(env, payload)
                elif cmd == "call":
                    name, args, kwargs = payload
                    result = getattr(env, name)(*args, **kwargs)
                elif cmd == "use":
                    env, built = cache.use(payload)
                    result = built
                elif cmd == "getattr":
                    result = getattr(env, payload)
                else:
                    raise ValueError(f"unknown command {cmd!r}")
                send("ok", result)
            except Exception as exc:  # reported to the parent, which re-raises it there
                send("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    except (EOFError, KeyboardInterrupt):
        pass
    except Exception as exc:
        try:
            send("error", f"building the environment failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        except Exception:
            pass
    finally:
        if cache is not None:
            cache.close()
        conn.close()


class _Worker:
    def __init__(self, ctx, env_kwargs: dict[str, Any], envs_per_worker: int):
        self.env_kwargs = env_kwargs
        self.envs_per_worker = envs_per_worker
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker, args=(child, env_kwargs, envs_per_worker), daemon=True)
        self.process.start()
        child.close()
        self.pid = self.process.pid
        self.cpu_s = 0.0  # CPU seconds the worker reported and nobody has taken yet
        self.busy = False  # a step was sent and its result not yet read

    def drain(self) -> None:
        """Read the result of a step sent by ``step_async_at`` that nobody collected (the
        caller stopped early, e.g. a controller raised); else it would answer the next command."""
        if not self.busy:
            return
        try:
            self.reply()
        except WorkerCrashed:
            raise
        except RuntimeError:
            pass  # that step failed; the next command is what the caller asks about now

    def request(self, cmd: str, payload: Any = None) -> Any:
        self.drain()
        try:
            self.conn.send((cmd, payload))
        except (BrokenPipeError, OSError) as exc:
            raise WorkerCrashed(f"worker {self.pid} is gone ({exc})") from exc
        return self.reply()

    def reply(self) -> Any:
        try:
            if not self.conn.poll(_REPLY_TIMEOUT_S):
                raise WorkerCrashed(f"worker {self.pid} did not answer within {_REPLY_TIMEOUT_S:.0f} s")
            status, value, cpu_s = self.conn.recv()
        except (EOFError, ConnectionResetError, OSError) as exc:
            code = self.process.exitcode if not self.process.is_alive() else None
            raise WorkerCrashed(f"worker {self.pid} died (exit code {code})") from exc
        finally:
            self.busy = False
        self.cpu_s += cpu_s
        if status == "error":
            raise RuntimeError(value)
        return value

    def close(self, timeout_s: float = 10.0) -> None:
        try:
            self.conn.send(("close", None))
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout_s)
        self.conn.close()


class LiberoVectorEnv:
    """``len(env_kwargs)`` LIBERO environments, one worker process each.

    :param env_kwargs: keyword arguments of :class:`~wmrl_libero.gym_env.LiberoGymEnv`, one
        dict per environment (tasks may differ).
    :param max_restarts: restarts allowed per worker in a row (with no successful step or
        reset between them) before a crash is raised instead.
    :param envs_per_worker: built environments each worker keeps for :meth:`use_at`.

    ``builds[i]`` counts the environments worker ``i`` has built (including after restarts),
    ``restarts[i]`` its restarts.
    """

    def __init__(self, env_kwargs: Sequence[dict[str, Any]], *, max_restarts: int = 3, envs_per_worker: int = 4):
        if not env_kwargs:
            raise ValueError("LiberoVectorEnv needs at least one environment")
        self._ctx = mp.get_context(_START_METHOD)
        self.max_restarts = max_restarts
        self.restarts = [0] * len(env_kwargs)
        self._restarts_in_row = [0] * len(env_kwargs)
        self.builds = [1] * len(env_kwargs)
        self._cached: list[list] = [[env_key(kw)] for kw in env_kwargs]  # mirrors each worker's cache, LRU first
        self._workers = [_Worker(self._ctx, dict(kw), envs_per_worker) for kw in env_kwargs]
        try:
            for w in self._workers:  # built in parallel, awaited here
                w.reply()
        except Exception:
            self.close()
            raise
        self.num_envs = len(self._workers)
        self.single_observation_spaces = [w.request("getattr", "observation_space") for w in self._workers]
        self.single_action_space = self._workers[0].request("getattr", "action_space")
        self._last_reset: list[dict[str, Any]] = [{} for _ in self._workers]
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """Process ids of the current workers (they change when a worker is restarted)."""
        return [w.pid for w in self._workers]

    def _restart(self, i: int) -> None:
        self.restarts[i] += 1
        self._restarts_in_row[i] += 1
        if self._restarts_in_row[i] > self.max_restarts:
            raise WorkerCrashed(
                f"worker {i} crashed {self._restarts_in_row[i]} times in a row; giving up (max_restarts={self.max_restarts})"
            )
        old = self._workers[i]
        old.close(timeout_s=1.0)
        self._workers[i] = _Worker(self._ctx, old.env_kwargs, old.envs_per_worker)
        self._workers[i].cpu_s += old.cpu_s  # reported by the dead worker, not yet taken
        self._workers[i].reply()
        self.builds[i] += 1
        self._cached[i] = [env_key(old.env_kwargs)]

    def use_at(self, i: int, env_kwargs: dict[str, Any]) -> bool:
        """Make environment ``i`` a ``LiberoGymEnv(**env_kwargs)`` (another task or camera
        setting): the worker's cached one if it holds it, else built (closing its least
        recently used one beyond ``envs_per_worker``). Restarts the worker if it died.

        :return: whether an environment was built.
        """
        self._workers[i].env_kwargs = dict(env_kwargs)
        try:
            built = self._workers[i].request("use", dict(env_kwargs))
            self.builds[i] += int(built)
        except WorkerCrashed:
            self._restart(i)  # the new worker builds env_kwargs (counted there)
            built = True
        if built:
            self.single_observation_spaces[i] = self._workers[i].request("getattr", "observation_space")
        key, cached = env_key(env_kwargs), self._cached[i]
        if key in cached:
            cached.remove(key)
        cached.append(key)
        del cached[: -self._workers[i].envs_per_worker]  # the worker closed its least recently used ones
        return built

    def holds_at(self, i: int, env_kwargs: dict[str, Any]) -> bool:
        """Whether worker ``i`` holds a built environment for ``env_kwargs`` (no build needed)."""
        return env_key(env_kwargs) in self._cached[i]

    def call_at(self, i: int, name: str, *args, **kwargs) -> Any:
        """Call method ``name`` of environment ``i``; returns the result."""
        return self._workers[i].request("call", (name, args, kwargs))

    def env_kwargs_at(self, i: int) -> dict[str, Any]:
        """The keyword arguments environment ``i`` was built with."""
        return dict(self._workers[i].env_kwargs)

    def reset_at(self, i: int, *, seed: int | None = None, options: dict | None = None):
        """Reset environment ``i``; restarts its worker first if it died. Returns (obs, info)."""
        self._last_reset[i] = {"seed": seed, "options": options}
        try:
            return self._workers[i].request("reset", {"seed": seed, "options": options})
        except WorkerCrashed:
            self._restart(i)
            return self._workers[i].request("reset", {"seed": seed, "options": options})

    def take_cpu_s(self, i: int) -> float:
        """CPU seconds worker ``i`` reported since the last call (its process's
        ``time.process_time``; a crashed worker's CPU after its last reply is not known)."""
        cpu_s, self._workers[i].cpu_s = self._workers[i].cpu_s, 0.0
        return cpu_s

    def step_async_at(self, i: int, action: np.ndarray) -> None:
        """Send environment ``i`` its action and return at once; :meth:`wait_steps` collects
        the result."""
        self._send_async(i, ("step", np.asarray(action, dtype=np.float32)), "wait_steps")

    def step_chunk_async_at(self, i: int, actions: np.ndarray) -> None:
        """Send environment ``i`` a chunk of actions (k, action dim) to step through in one round
        trip (:func:`step_through`) and return at once; :meth:`wait_chunks` collects the results."""
        self._send_async(i, ("steps", np.asarray(actions, dtype=np.float32)), "wait_chunks")

    def _send_async(self, i: int, message: tuple, collect: str) -> None:
        w = self._workers[i]
        if w.busy:
            raise RuntimeError(f"environment {i} is still stepping; collect its result with {collect} first")
        w.busy = True
        try:
            w.conn.send(message)
        except (BrokenPipeError, OSError):
            pass  # noticed by the collecting wait as a crash

    def wait_steps(self, timeout_s: float = _REPLY_TIMEOUT_S) -> list[tuple[int, tuple]]:
        """Wait until at least one environment sent off by :meth:`step_async_at` has finished;
        return ``[(i, (obs, reward, terminated, truncated, info)), ...]`` for every finished one.

        A worker that died (its pipe closed or its process ended) yields ``truncated=True`` and
        ``info["infrastructure_failure"]``, as in :meth:`step`; one that has not answered within
        ``timeout_s`` while no other did is restarted the same way.
        """
        return self._wait_replies(timeout_s, chunks=False)

    def wait_chunks(self, timeout_s: float = _REPLY_TIMEOUT_S) -> list[tuple[int, list[tuple]]]:
        """:meth:`wait_steps` for chunks sent by :meth:`step_chunk_async_at`: ``[(i, [(obs, reward,
        terminated, truncated, info), ...]), ...]``, every step of each finished chunk. A worker
        that died answers with one step, ``truncated`` with ``info["infrastructure_failure"]``
        (the steps it had made are lost with it)."""
        return self._wait_replies(timeout_s, chunks=True)

    def _wait_replies(self, timeout_s: float, *, chunks: bool) -> list:
        stepping = [i for i, w in enumerate(self._workers) if w.busy]
        if not stepping:
            raise RuntimeError("no environment is stepping; send actions with step_async_at first")
        handles = {}
        for i in stepping:
            handles[self._workers[i].conn] = i
            handles[self._workers[i].process.sentinel] = i
        ready = sorted({handles[h] for h in wait_for_ready(list(handles), timeout_s)})
        if not ready:
            exc = WorkerCrashed(f"no worker answered within {timeout_s:.0f} s")
            failed = [(i, self._replace_failed(i, exc, failed_step=True)) for i in stepping]
            return [(i, [r]) for i, r in failed] if chunks else failed
        replies = [(i, self._collect(i, failed_step=True)) for i in ready]
        if chunks:  # a chunk's reply is a list of steps; a crashed worker's stand-in is one step
            replies = [(i, [r] if isinstance(r, tuple) else r) for i, r in replies]
        return replies

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | Sequence[dict] | None = None):
        """Reset every environment. Returns (list of obs, list of info)."""
        seeds = (
            list(seed)
            if isinstance(seed, (list, tuple))
            else [None if seed is None else seed + i for i in range(self.num_envs)]
        )
        opts = list(options) if isinstance(options, (list, tuple)) else [options] * self.num_envs
        for i, w in enumerate(self._workers):
            self._last_reset[i] = {"seed": seeds[i], "options": opts[i]}
            try:
                w.drain()
                w.conn.send(("reset", self._last_reset[i]))
            except (WorkerCrashed, BrokenPipeError, OSError):
                pass  # noticed in _collect as a crash
        results = [self._collect(i, failed_step=False) for i in range(self.num_envs)]
        return [r[0] for r in results], [r[1] for r in results]

    def step(self, actions: Sequence[np.ndarray | None]):
        """Step every environment whose action is not ``None``.

        :return: ``(obs, rewards, terminated, truncated, infos)``; lists and arrays of length
            ``num_envs``; entries of skipped environments are ``None`` / 0 / False.
        """
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions (None to skip one), got {len(actions)}")
        sent = []
        for i, (w, a) in enumerate(zip(self._workers, actions)):
            if a is None:
                continue
            try:
                w.drain()
                w.conn.send(("step", np.asarray(a, dtype=np.float32)))
            except (WorkerCrashed, BrokenPipeError, OSError):
                pass  # noticed in _collect as a crash
            sent.append(i)
        obs: list[Any] = [None] * self.num_envs
        rewards = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        for i in sent:
            o, r, te, tr, info = self._collect(i, failed_step=True)
            obs[i], rewards[i], terminated[i], truncated[i], infos[i] = o, r, te, tr, info
        return obs, rewards, terminated, truncated, infos

    def _collect(self, i: int, *, failed_step: bool):
        try:
            result = self._workers[i].reply()
            self._restarts_in_row[i] = 0
            return result
        except WorkerCrashed as exc:
            return self._replace_failed(i, exc, failed_step=failed_step)

    def _replace_failed(self, i: int, exc: Exception, *, failed_step: bool):
        """Restart worker ``i`` after ``exc`` and reset it; the result stands for the lost one."""
        self._restart(i)
        obs, info = self._workers[i].request("reset", self._last_reset[i])
        info = dict(info, infrastructure_failure=True, error=str(exc))
        if not failed_step:
            return obs, info
        return obs, 0.0, False, True, info

    def call(self, name: str, *args, **kwargs) -> list[Any]:
        """Call method ``name`` of every environment; returns the results."""
        return [w.request("call", (name, args, kwargs)) for w in self._workers]

    def close(self) -> None:
        """Stop every worker (each closes its environment); safe to call twice."""
        if getattr(self, "_closed", False):
            return
        for w in getattr(self, "_workers", []):
            w.close()
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

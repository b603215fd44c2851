"""Built LIBERO environments kept for reuse, keyed by their constructor arguments.

Building a LIBERO environment (parsing the BDDL file, compiling the MuJoCo model) takes
2-7 s on a CPU; resetting one to a stored init state takes milliseconds. A simulator slot
(a worker process, or the calling process) therefore keeps the environments it has built
and switches between them, building only for a task (or camera setting) it has not seen,
and closing the least recently used one beyond ``capacity``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["EnvCache", "env_key"]


def env_key(env_kwargs: dict[str, Any]) -> Hashable:
    """A hashable key for ``LiberoGymEnv(**env_kwargs)`` (the arguments, order-free)."""
    return tuple(sorted(env_kwargs.items()))


class EnvCache:
    """Least-recently-used cache of built environments.

    :param build: ``build(**env_kwargs) -> env`` (default :class:`~wmrl_libero.gym_env.LiberoGymEnv`).
    :param capacity: environments kept at most; the least recently used one is closed first.
    """

    def __init__(self, build: Callable[..., Any] | None = None, *, capacity: int = 4):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1 environment, got {capacity}")
        if build is None:
            from wmrl_libero.gym_env import LiberoGymEnv

            build = LiberoGymEnv
        self._build = build
        self.capacity = capacity
        self._envs: OrderedDict[Hashable, Any] = OrderedDict()
        self.builds = 0  # environments built so far (each one costs seconds)

    def use(self, env_kwargs: dict[str, Any]) -> tuple[Any, bool]:
        """The environment for ``env_kwargs``, built if not cached. Returns ``(env, built)``."""
        key = env_key(env_kwargs)
        if key in self._envs:
            self._envs.move_to_end(key)
            return self._envs[key], False
        while len(self._envs) >= self.capacity:
            _, old = self._envs.popitem(last=False)
            old.close()
        env = self._build(**env_kwargs)
        self.builds += 1
        self._envs[key] = env
        return env, True

    def keys(self) -> list[Hashable]:
        """Keys of the cached environments, least recently used first."""
        return list(self._envs)

    def close(self) -> None:
        while self._envs:
            _, env = self._envs.popitem(last=False)
            env.close()

"""The LIBERO suites as gymnasium ids: ``gymnasium.make("wmrl/LiberoLong-v0", task_index=3)``.

Each id makes a :class:`~wmrl_libero.gym_env.LiberoGymEnv` of one suite; every other keyword of
``make`` (``task_index``, ``image_size``, ``action_chunk``, ...) goes to its constructor. The ids
are registered when ``wmrl_libero`` is imported; ``gymnasium.make("wmrl_libero:wmrl/LiberoLong-v0")``
imports it first (gymnasium 1.x reads no entry points of its own). No ``max_episode_steps`` is
registered: the environment truncates episodes itself, counting control steps, which with
``action_chunk=k`` are k per ``step`` call (a ``TimeLimit`` wrapper would count calls).
"""

from __future__ import annotations

__all__ = ["GYM_IDS", "ENTRY_POINT", "register_gym_envs"]

ENTRY_POINT = "wmrl_libero.gym_env:LiberoGymEnv"
GYM_IDS = {
    "libero_10": "wmrl/LiberoLong-v0",
    "libero_spatial": "wmrl/LiberoSpatial-v0",
    "libero_object": "wmrl/LiberoObject-v0",
    "libero_goal": "wmrl/LiberoGoal-v0",
    "libero_90": "wmrl/Libero90-v0",
}
"""LIBERO suite name -> its gymnasium id (LIBERO-10 is LIBERO-Long)."""


def register_gym_envs() -> None:
    """Register every id of :data:`GYM_IDS` that gymnasium does not know yet (importing twice, or a
    reload, registers nothing new and so warns about no override)."""
    import gymnasium

    for suite, env_id in GYM_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"suite": suite})

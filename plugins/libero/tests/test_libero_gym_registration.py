"""The LIBERO suites as gymnasium ids, and the world models' modules under the names they register."""

import gymnasium
import numpy as np
from gymnasium.utils.env_checker import check_env
from wmrl_libero.gym_registration import ENTRY_POINT, GYM_IDS
from wmrl_libero.runtime import libero_available
from wmrl_libero.suites import SUITE_NAMES

from wmrl_core.plugins import build_registry
from wmrl_core.testing import require

NEEDS = "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`"


def test_every_suite_has_a_registered_gymnasium_id():
    assert set(GYM_IDS) == set(SUITE_NAMES)
    for suite, env_id in GYM_IDS.items():
        spec = gymnasium.spec(env_id)  # registered by importing wmrl_libero; no simulator needed
        assert spec.entry_point == ENTRY_POINT and spec.kwargs == {"suite": suite}
        assert spec.max_episode_steps is None  # the environment truncates in control steps itself


def test_gymnasium_make_builds_a_libero_env_that_passes_check_env():
    require(libero_available(), NEEDS)
    from wmrl_libero.gym_env import LiberoGymEnv

    env = gymnasium.make("wmrl/LiberoLong-v0", task_index=5, settle_steps=2)
    try:
        inner = env.unwrapped
        assert isinstance(inner, LiberoGymEnv) and (inner.suite, inner.task_index) == ("libero_10", 5)
        assert inner.max_episode_steps == 520 and inner.settle_steps == 2  # make's keywords reach the constructor
        check_env(inner, skip_render_check=True)
        obs, info = env.reset(seed=0, options={"init_state": 1})  # through gymnasium's wrappers too
        assert info["init_state"] == 1 and obs["proprio"].shape == (16,)
        obs, reward, terminated, truncated, info = env.step(np.zeros(7, dtype=np.float32))
        assert reward == 0.0 and not terminated and not truncated and info["elapsed_steps"] == 1
    finally:
        env.close()


def test_the_progress_world_model_lives_in_its_own_module():
    from wmrl_libero.world_models import progress, trajectory

    spec = build_registry().world_models.get("libero-progress")
    assert spec.entry_point == "wmrl_libero.world_models.progress:TrajectoryProgressWorldModel"
    assert spec.load() is progress.TrajectoryProgressWorldModel
    # the module's other import path gives the same objects
    assert trajectory.TrajectoryProgressWorldModel is progress.TrajectoryProgressWorldModel
    assert trajectory.trajectory_progress is progress.trajectory_progress

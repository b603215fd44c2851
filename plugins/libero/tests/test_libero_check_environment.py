"""The core's environment checker on every LIBERO suite: one task (its first init state), two
short action sequences, executed in the real simulator (physics only, 4 control steps)."""

import warnings

import numpy as np
import pytest
from wmrl_libero.runtime import libero_available

from wmrl_core.checkers import check_environment
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.testing import require

PM = get_plugin_manager()
REGISTRY = build_registry(PM)
LIBERO_ENVIRONMENTS = [s.name for s in REGISTRY.environments if s.plugin == "libero"]
STEPS = 4


def test_every_suite_is_registered():
    assert sorted(LIBERO_ENVIRONMENTS) == ["libero-10", "libero-90", "libero-goal", "libero-object", "libero-spatial"]


@pytest.mark.parametrize("name", LIBERO_ENVIRONMENTS)
def test_libero_environment_passes_the_checker_on_the_simulator(name):
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    env = REGISTRY.environments.make(name, task_indices=[0], max_episode_steps=STEPS)
    reward = REGISTRY.reward_extractors.make(
        PM.hook.wmrl_default_reward_extractor(environment_name=name) or "score", env=env
    )
    hold = np.tile([0, 0, 0, 0, 0, 0, -1.0], (STEPS, 1))
    lift = np.tile([0, 0, 1.0, 0, 0, 0, -1.0], (STEPS, 1))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # an all-sandbox_error execution would warn
            outcomes = check_environment(env, [hold, lift], reward=reward)
    finally:
        env.close()
    assert [o.status for o in outcomes] == ["ok", "ok"] and [o.score for o in outcomes] == [0.0, 0.0]
    assert all(o.info["steps"] == STEPS and o.info["cost_s"] > 0 for o in outcomes)

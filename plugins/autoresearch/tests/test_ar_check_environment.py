"""The core's environment checker on AutoResearch: one task, two programs of the program policy,
executed in real Docker sandboxes."""

import warnings

from wmrl_core.checkers import check_environment
from wmrl_core.contracts import is_rewarded
from wmrl_core.plugins import build_registry, get_plugin_manager


def test_every_autoresearch_environment_passes_the_checker_in_real_sandboxes(docker_ready):
    pm = get_plugin_manager()
    registry = build_registry(pm)
    names = [s.name for s in registry.environments if s.plugin.startswith("autoresearch")]
    assert names == ["autoresearch"]
    for name in names:
        env = registry.environments.make(name, max_parallel=2, limits={"timeout_s": 60, "memory_mb": 512, "cpus": 1})
        try:
            policy = registry.policies.make("program-policy", env=env)
            reward = registry.reward_extractors.make(
                pm.hook.wmrl_default_reward_extractor(environment_name=name), env=env
            )
            with warnings.catch_warnings():
                warnings.simplefilter("error", UserWarning)  # an all-sandbox_error execution would warn
                outcomes = check_environment(env, policy=policy, reward=reward, n_solutions=2)
        finally:
            env.close()
        assert len(outcomes) == 2
        assert all(is_rewarded(o.status) for o in outcomes), [o.info for o in outcomes]  # the scripts ran
        assert all(o.info["cost_s"] > 0 for o in outcomes)  # CPU seconds measured in the container

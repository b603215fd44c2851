"""make_scoring_components: what a trainer with its own policy (TRL, verl) gets of a WMRL config."""

from wmrl_core.components import make_scoring_components
from wmrl_core.config import load_config
from wmrl_core.execution_cache import CachedEnvironment
from wmrl_core.vowels import VowelsEnvironment, VowelsWorldModel, vowels_config


def test_no_policy_is_made_and_the_rest_is_built_by_name():
    c = make_scoring_components(vowels_config())
    assert c.policy is None
    assert isinstance(c.environment, VowelsEnvironment) and isinstance(c.world_model, VowelsWorldModel)
    assert c.reward_name == "score" and c.names["world_model"] == "vowels-biased"


def test_the_execution_cache_wraps_the_environment_as_in_wmrl_train(tmp_path):
    cfg = load_config(
        None,
        [
            "environment.name=vowels",
            "policy.name=trl-model",
            "world_model.name=vowels-biased",
            f"environment.cache={tmp_path / 'cache.jsonl'}",
        ],
    )
    c = make_scoring_components(cfg)
    assert isinstance(c.environment, CachedEnvironment)
    task = c.environment.tasks("train")[0]
    first = c.environment.execute([task], ["banana"])
    again = c.environment.execute([task], ["banana"])
    assert first[0].score == again[0].score == 0.5 and c.environment.replayed == 1


def test_a_world_model_that_would_share_the_policys_engine_is_refused_by_name():
    import pytest

    from wmrl_core.errors import ConfigError

    cfg = load_config(
        None,
        [
            "environment.name=vowels",
            "policy.name=trl-model",
            "world_model.name=vowels-biased",
            "world_model.kwargs={share_policy: true}",
        ],
    )
    with pytest.raises(ConfigError, match=r"share_policy=true.*the trainer \(TRL, verl\) owns the policy"):
        make_scoring_components(cfg)

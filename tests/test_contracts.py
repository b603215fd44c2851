"""The contracts as types: protocols, the status vocabulary, the component-kind table, and
how factories are called (env=, the run's policy for world models that ask for it)."""

import subprocess
import sys

import pytest

from wmrl_core import hookspecs
from wmrl_core.builtin_rewards import ScoreReward
from wmrl_core.checkers import check_environment, check_policy, check_world_model
from wmrl_core.components import make_with_env
from wmrl_core.contracts import (
    COMPONENT_KINDS, STATUSES, Environment, Policy, RewardExtractor, WorldModel, check_status, component_kind,
    is_rewarded, required_methods,
)
from wmrl_core.errors import ContractError
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.registry import KINDS, ComponentTable, Registry
from wmrl_core.types import Outcome, Task, as_outcome


def test_every_status_says_whether_it_is_rewarded():
    assert is_rewarded("ok") and is_rewarded("crashed") and is_rewarded("invalid_solution")
    assert not is_rewarded("sandbox_error") and not is_rewarded("no_prediction")
    assert all(spec.meaning for spec in STATUSES.values())
    with pytest.raises(ValueError, match="unknown outcome status 'crash'.*crashed"):
        check_status("crash")


def test_the_kind_table_is_the_one_source_of_registry_tables_and_hooks():
    assert KINDS == tuple(k.kind for k in COMPONENT_KINDS)
    registry = Registry()
    assert list(registry.tables()) == list(KINDS)
    for k in COMPONENT_KINDS:
        assert isinstance(getattr(registry, k.table), ComponentTable)
        assert callable(getattr(hookspecs, k.hook)), k.hook
    assert component_kind("world_model").protocol is WorldModel
    with pytest.raises(KeyError, match="known: environment"):
        component_kind("critic")


def test_protocols_list_what_the_checkers_require():
    assert required_methods(Environment) == ("tasks", "execute")
    assert required_methods(WorldModel) == ("predict",)
    assert required_methods(RewardExtractor) == ("__call__",)
    assert {"generate", "log_probs", "parameters"} <= set(required_methods(Policy))


def test_builtin_components_satisfy_their_protocols():
    registry = build_registry(get_plugin_manager(entry_points=False))
    env = registry.environments.make("synthetic-bandit")
    policy = registry.policies.make("tabular-softmax", env=env)
    world_model = registry.world_models.make("synthetic-world-model", env=env)
    assert isinstance(env, Environment) and isinstance(policy, Policy) and isinstance(world_model, WorldModel)
    check_environment(env), check_policy(policy), check_world_model(world_model)


def test_a_component_missing_a_method_is_named_with_its_protocol():
    class NoExecute:
        def tasks(self, split):
            return []

    with pytest.raises(ContractError, match="lacks execute; see wmrl_core.contracts.Environment"):
        check_environment(NoExecute())


def _table(factory):
    table = ComponentTable("world_model")
    table._current_plugin = "my_plugin"
    table.add("mine", factory)
    return table


def test_a_factory_without_env_fails_naming_the_component_and_the_fix():
    class NoEnv:
        def __init__(self, *, scale=1.0):
            self.scale = scale

    with pytest.raises(ContractError) as err:
        make_with_env(_table(NoEnv), "mine", env=object(), kwargs={"scale": 2.0})
    msg = str(err.value)
    assert "world_model `mine` (plugin my_plugin)" in msg and "add `env=None` to its signature" in msg


def test_world_model_factories_get_the_policy_only_when_they_ask_for_it():
    env, policy = object(), object()

    class Sharing:
        def __init__(self, env=None, *, policy=None, width=1):
            self.env, self.policy, self.width = env, policy, width

    class Plain:
        def __init__(self, env=None, **kwargs):
            self.env, self.kwargs = env, kwargs

    shared = make_with_env(_table(Sharing), "mine", env, {"width": 3}, policy=policy)
    assert shared.policy is policy and shared.env is env and shared.width == 3
    plain = make_with_env(_table(Plain), "mine", env, {"width": 3}, policy=policy)
    assert plain.kwargs == {"width": 3}  # **kwargs is not a request for the policy


def test_no_prediction_gives_no_reward_even_with_a_failure_reward():
    task = Task("t")
    reward = ScoreReward(failure_reward=-1.0)
    assert as_outcome(None).status == "no_prediction"
    assert reward(task, as_outcome(None)) is None
    assert reward(task, Outcome("sandbox_error")) is None
    assert reward(task, Outcome("crashed")) == -1.0
    assert reward(task, Outcome("ok", 0.5)) == 0.5
    assert reward(task, Outcome("ok", float("nan"))) == -1.0
    with pytest.raises(ValueError, match="unknown outcome status"):
        reward(task, Outcome("exploded"))


def test_importing_the_data_types_does_not_import_torch():
    code = "import sys, wmrl_core.types, wmrl_core.contracts; assert 'torch' not in sys.modules, 'torch imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr

import pytest
import torch

from wmrl_core import checkers
from wmrl_core.errors import ContractError
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.types import CostModel


def test_every_builtin_component_passes_its_checker():
    reg = build_registry(get_plugin_manager(entry_points=False))
    env = reg.environments.make("synthetic-bandit")
    checkers.check_environment(env)
    for spec in reg.policies:
        policy = spec.make(env=env)
        checkers.check_policy(policy)
        tasks = env.tasks("train")[:3]
        checkers.check_rollouts(policy.generate(tasks, 4), 3, 4)
    for spec in reg.world_models:
        checkers.check_world_model(spec.make(env=env))
    for spec in reg.reward_extractors:
        checkers.check_reward_extractor(spec.make(env=env))


def test_contract_violations_are_named():
    class NoExecute:
        def tasks(self, split):
            return []

    with pytest.raises(ContractError, match="lacks execute"):
        checkers.check_environment(NoExecute())

    class BadCost:
        cost = 3.0

        def predict(self, tasks, solutions):
            return []

    with pytest.raises(ContractError, match="CostModel"):
        checkers.check_world_model(BadCost())

    class Frozen(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1), requires_grad=False)

        def generate(self, tasks, group_size): ...
        def log_probs(self, rollouts): ...

    with pytest.raises(ContractError, match="no trainable parameters"):
        checkers.check_policy(Frozen())
    with pytest.raises(ContractError, match="Rollouts"):
        checkers.check_rollouts([1, 2], 1, 2)
    assert CostModel(1.0, 2.0).cost(3) == 7.0

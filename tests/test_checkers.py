import math
import warnings

import pytest
import torch

from wmrl_core import checkers
from wmrl_core.errors import ContractError
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.types import CostModel, Outcome, Task

SOLUTION_SOURCES = {
    "synthetic-bandit": lambda reg, env: {"policy": reg.policies.make("tabular-softmax", env=env)},
    "vowels": lambda reg, env: {"solutions": ["banana", "rhythm"]},
}
"""How each built-in environment gets the solutions its check executes; a new one must be added."""


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


def test_every_builtin_environment_executes_one_task_within_its_contract():
    pm = get_plugin_manager(entry_points=False)
    reg = build_registry(pm)
    assert set(reg.environments.names()) == set(SOLUTION_SOURCES)
    outcomes = {}
    for name in reg.environments.names():
        env = reg.environments.make(name)
        reward = reg.reward_extractors.make(
            pm.hook.wmrl_default_reward_extractor(environment_name=name) or "score", env=env
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a doubtful behaviour of a built-in is a bug too
            outcomes[name] = checkers.check_environment(env, **SOLUTION_SOURCES[name](reg, env), reward=reward)
        assert len(outcomes[name]) == 2 and all(o.status == "ok" for o in outcomes[name])
    # banana: 3 vowels of 6 letters; rhythm: none of 6
    assert [o.score for o in outcomes["vowels"]] == [0.5, 0.0]


class _Domain:
    """An environment with two tasks whose ``execute`` returns what ``outcomes(n)`` makes."""

    def __init__(self, outcomes=None, ids=("a", "b")):
        self.outcomes, self.ids, self.tasks_called = outcomes, ids, 0

    def tasks(self, split):
        self.tasks_called += 1
        return [Task(id=i) for i in self.ids]

    def execute(self, tasks, solutions):
        return self.outcomes(len(solutions))


def _ok(n):
    return [Outcome("ok", 0.5, {"cost_s": 0.1}) for _ in range(n)]


@pytest.mark.parametrize(
    ("outcomes", "message"),
    [
        (lambda n: _ok(n - 1), "returned 1 outcomes for 2 solutions"),
        (lambda n: [Outcome("error", 0.0)] * n, "use one of ok, timeout"),
        (lambda n: [Outcome("ok", math.nan)] * n, "an ok outcome carries its finite score"),
        (lambda n: [Outcome("ok", None)] * n, "an ok outcome carries its finite score"),
        (lambda n: [0.5] * n, "bare numbers are for world models"),
        (lambda n: [Outcome("ok", 0.5, {"cost_s": -1.0})] * n, "finite number of seconds >= 0"),
        (lambda n: [Outcome("ok", 0.5, info=[])] * n, "must be a dict"),
        (lambda n: 1 / 0, "execute\\(\\) raised ZeroDivisionError"),
    ],
)
def test_broken_outcomes_are_named(outcomes, message):
    with pytest.raises(ContractError, match=message):
        checkers.check_environment(_Domain(outcomes), ["x", "y"])


def test_broken_tasks_and_rewards_are_named():
    with pytest.raises(ContractError, match="returned no tasks"):
        checkers.check_environment(_Domain(_ok, ids=()), ["x"])
    with pytest.raises(ContractError, match="repeated ids \\['a'\\]"):
        checkers.check_environment(_Domain(_ok, ids=("a", "b", "a")), ["x"])
    with pytest.raises(ContractError, match="None or NaN \\(no reward\\) only for a status other than 'ok'"):
        checkers.check_environment(_Domain(_ok), ["x"], reward=lambda task, outcome: None)
    with pytest.raises(ContractError, match="a reward is finite"):
        checkers.check_environment(_Domain(_ok), ["x"], reward=lambda task, outcome: math.inf)
    with pytest.raises(ContractError, match="return a float or None"):
        checkers.check_environment(_Domain(_ok), ["x"], reward=lambda task, outcome: "high")
    with pytest.raises(ValueError, match="at least one solution"):
        checkers.check_environment(_Domain(_ok), [])


def test_legal_failures_pass_and_an_infrastructure_failure_warns():
    crashed = _Domain(lambda n: [Outcome("crashed", math.nan), Outcome("timeout", None)][:n])
    out = checkers.check_environment(crashed, ["x", "y"], reward=lambda task, outcome: None)
    assert [o.status for o in out] == ["crashed", "timeout"]  # no reward for a failure is allowed
    down = _Domain(lambda n: [Outcome("sandbox_error", None)] * n)
    with pytest.warns(UserWarning, match="the infrastructure failed"):
        checkers.check_environment(down, ["x"], reward=lambda task, outcome: 1.0)
    interface_only = _Domain(_ok)
    assert checkers.check_environment(interface_only) is None and interface_only.tasks_called == 0

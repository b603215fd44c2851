"""Registers the synthetic domain through the same hooks as any installed plugin (its studies live in
``experiments/synthetic/`` of the checkout)."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_environments(table):
    table.add(
        "synthetic-bandit",
        "wmrl_core.synthetic.bandit:SyntheticBanditEnvironment",
        description="contextual bandit with known truth and a declared execution cost",
    )


@hookimpl
def wmrl_register_policies(table):
    table.add(
        "tabular-softmax",
        "wmrl_core.synthetic.policy:TabularSoftmaxPolicy",
        description="softmax over arms per task (synthetic domain)",
    )


@hookimpl
def wmrl_register_world_models(table):
    table.add(
        "synthetic-world-model",
        "wmrl_core.synthetic.world_model:SyntheticWorldModel",
        description="miscalibrated / independent / perfect predictor of the bandit's rewards",
    )


@hookimpl
def wmrl_default_reward_extractor(environment_name):
    return "score" if environment_name == "synthetic-bandit" else None

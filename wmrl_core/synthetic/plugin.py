"""Registers the synthetic domain and its theorem experiment through the same hooks as any installed plugin."""

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


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "synthetic",
        "wmrl_core.experiments.synthetic:main",
        description="the theorem experiment: every mode, fusion and ablation on the synthetic bandit over seeds",
    )
    table.add(
        "compute-to-target",
        "wmrl_core.experiments.compute_to_target:main",
        description="compute each arm needs to reach real's final score, with plots (--suite synthetic | autoresearch)",
    )
    table.add(
        "cache-agreement",
        "wmrl_core.experiments.cache_agreement:main",
        description="a benchmark replayed from the execution cache against the same arms and seeds run fresh",
    )
    table.add(
        "ray-execution",
        "wmrl_core.experiments.ray_execution:main",
        description="wall time of real execution, local vs the Ray backend with 1, 2 ... workers (synthetic job)",
    )

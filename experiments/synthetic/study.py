"""The synthetic bandit's studies: the theorem experiment and the fusion's measurements on it."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "synthetic",
        "experiments.synthetic.theorem:main",
        description="the theorem experiment: every mode, fusion and ablation on the synthetic bandit over seeds",
    )

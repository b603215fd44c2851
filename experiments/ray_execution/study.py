"""Real execution on Ray against local execution, on the synthetic job."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "ray-execution",
        "experiments.ray_execution.ray_execution:main",
        description="wall time of real execution, local vs the Ray backend with 1, 2 ... workers (synthetic job)",
    )

"""Compute to reach `real`'s final score, per arm and suite, and the execution cache's agreement."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "compute-to-target",
        "experiments.compute_to_target.compute_to_target:main",
        description="compute each arm needs to reach real's final score, with plots (--suite synthetic | autoresearch)",
    )
    table.add(
        "cache-agreement",
        "experiments.compute_to_target.cache_agreement:main",
        description="a benchmark replayed from the execution cache against the same arms and seeds run fresh",
    )

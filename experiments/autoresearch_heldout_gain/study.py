"""AutoResearch's main job against the same settings on pure-noise rewards, over seeds."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "heldout-gain",
        "experiments.autoresearch_heldout_gain.heldout_gain:main",
        description="the main job's held-out gain against the same settings on pure-noise rewards, over seeds",
    )

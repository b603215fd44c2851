"""Can a LIBERO world model rank the rollouts of one GRPO group? (results:
``docs/results/libero/group_ranking.md``)."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "libero-group-ranking",
        "experiments.libero_group_ranking.group_ranking:main",
        description="within-group ranking (AUROC) of the LIBERO world models on the base policy's own groups",
    )

"""The small VLA's behaviour-cloning recipe, chosen offline on held-out demo episodes
(``plugins/libero/docs/base_policy.md``)."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "libero-bc-recipe",
        "experiments.libero_bc_recipe.bc_recipe:main",
        description="the small VLA's behaviour-cloning recipe chosen offline on held-out demo episodes",
    )

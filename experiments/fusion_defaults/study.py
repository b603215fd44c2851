"""The engine's fusion defaults: the synthetic floors, a user domain and AutoResearch,
each pre-registered in this folder."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    here = "experiments.fusion_defaults"
    table.add(
        "fusion-defaults-synthetic",
        f"{here}.synthetic:main",
        description="the default fusion on the synthetic world models: calibration, the floors, the page",
    )
    table.add(
        "fusion-defaults-user-domain",
        f"{here}.user_domain:main",
        description="the calibrators on the symbolic-regression user domain, every seed",
    )
    table.add(
        "fusion-defaults-autoresearch",
        f"{here}.autoresearch:main",
        description="the new defaults on AutoResearch, pre-registered: six arms, ten seeds (resumable)",
    )
    table.add(
        "fusion-defaults-ar-calibration",
        f"{here}.autoresearch_archive:main",
        description="the calibrators replayed on the AutoResearch equal-execution archive's anchor pairs",
    )

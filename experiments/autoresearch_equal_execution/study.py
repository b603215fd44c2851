"""AutoResearch at equal execution: every arm's held-out score at WMRL's charged execution, with
the anchors-only and noise controls (pre-registered in ``PREREGISTRATION.md`` beside this file)."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "equal-execution",
        "experiments.autoresearch_equal_execution.equal_execution:main",
        description="the equal-execution benchmark: 8 arms at 32 steps, held-out score at WMRL's execution, anchors-only "
        "and noise controls, over seeds",
    )

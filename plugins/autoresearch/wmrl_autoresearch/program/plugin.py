"""Registers the embedded default: the program policy and its learned world model."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_policies(table):
    table.add(
        "program-policy",
        "wmrl_autoresearch.program.policy:ProgramPolicy",
        description="autoregressive policy over a grammar of ML experiments; renders sklearn scripts (CPU)",
    )


@hookimpl
def wmrl_register_world_models(table):
    table.add(
        "program-world-model",
        "wmrl_autoresearch.program.world_model:LearnedWorldModel",
        description="gradient-boosted outcome model: P(failure) and score given success from task meta-features + "
        "program decisions, with a spread per prediction; fitted on the training tasks' executions "
        "(checkpoint=*.pt: the ridge baseline)",
    )

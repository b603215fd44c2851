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
        description="ridge model on task meta-features + program decisions, fitted on the training suite's executions",
    )

"""The program policy's optimiser on pure-noise rewards: which settings keep its entropy."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "noise-control",
        "experiments.autoresearch_noise_control.noise_control:main",
        description="program policy: entropy kept on noise rewards vs gain on the learned world model, per lr x coef",
    )

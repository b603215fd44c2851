"""GRPO on LIBERO: does `real` itself learn here, and with which recipe."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "libero-positive-control",
        "experiments.libero_grpo.positive_control:main",
        description="LIBERO: real recovers the success lost to a 3x wider sigma, against the noise control (3 seeds)",
    )
    table.add(
        "libero-gradient-snr",
        "experiments.libero_grpo.gradient_snr:main",
        description="LIBERO: how much of a GRPO step's gradient is signal, per exploration setting (sizes the recipe)",
    )
    table.add(
        "libero-real-learns",
        "experiments.libero_grpo.real_learns:main",
        description="LIBERO: does GRPO improve the behaviour-cloned small VLA? real against the noise control (6 seeds)",
    )

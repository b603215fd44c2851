"""LIBERO-Long transfer: the base policy against the post-training arms and the noise control, on
one base checkpoint; the resolving run pre-registered in ``PREREGISTRATION_RESOLVING.md`` beside
this file. Finished arm-seeds are archived under ``archive/`` (``full``, ``resolving``)."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    here = "experiments.libero_transfer"
    table.add(
        "libero-transfer",
        f"{here}.transfer:main",
        description="LIBERO-Long: base policy vs real / world_model / WMRL arms and the noise control, one base checkpoint",
    )
    table.add(
        "libero-transfer-resolving",
        f"{here}.resolving:main",
        description="LIBERO-Long, pre-registered: base / noise control / real / wmrl-progress / raw-progress / "
        "wmrl-partial-progress, 6 seeds, 200 held-out episodes per arm-seed",
    )

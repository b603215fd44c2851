"""The LIBERO experiments and benchmarks (``wmrl experiment NAME``, registered in
:mod:`wmrl_libero.plugin`, or called by ``wmrl-libero``):

* :mod:`~wmrl_libero.experiments.transfer` (``libero-transfer``): the LIBERO-Long transfer
  experiment, base policy against the post-training arms and the noise control;
* :mod:`~wmrl_libero.experiments.bc_recipe` (``libero-bc-recipe``): the offline choice of the
  small VLA's behaviour-cloning recipe on held-out demo episodes;
* :mod:`~wmrl_libero.experiments.benchmark_speed`: simulator speed (``wmrl-libero bench``,
  ``bench-batch``, ``bench-sim``);
* :mod:`~wmrl_libero.experiments.gpu_checks`: the plugin's check in ``benchmarks/gpu_check.py``.

:func:`config_path` finds the configs shipped with the package (``configs/libero`` in the
repository links to the same folder).
"""

from __future__ import annotations

from pathlib import Path

from wmrl_core.experiments.package_data import shipped_config


def config_path(name: str) -> Path:
    """The config ``name`` shipped with the package (``configs/`` inside it), e.g. ``libero_long.yaml``.

    :raises FileNotFoundError: naming the configs the package ships.
    """
    return shipped_config("wmrl_libero", name)

"""The LIBERO plugin's measurements that the product commands run (the studies built on them live
in the repository's ``experiments/libero_*`` folders, not in the package):

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

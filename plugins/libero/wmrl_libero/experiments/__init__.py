"""The LIBERO experiments and benchmarks, each a module with a ``main(argv)`` or called by ``wmrl-libero``:

* :mod:`~wmrl_libero.experiments.benchmark_speed`: simulator speed (``wmrl-libero bench``,
  ``bench-batch``, ``bench-sim``);
* :mod:`~wmrl_libero.experiments.bc_recipe`: the offline choice of the small VLA's
  behaviour-cloning recipe on held-out demo episodes.

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

"""The AutoResearch experiments and benchmarks, each a module with a ``main(argv)``:

* :mod:`~wmrl_autoresearch.experiments.sandbox_bench`: sandbox start-up latency and throughput
  (``wmrl-autoresearch bench``);
* :mod:`~wmrl_autoresearch.experiments.sandbox_load`: many executions at full parallelism, mixed scripts;
* :mod:`~wmrl_autoresearch.experiments.wm_online_update`: the program world model's ranking after
  learning from anchors, offline on the shipped corpus.

:func:`config_path` finds the configs shipped with the package (``configs/autoresearch`` in the
repository links to the same folder).
"""

from __future__ import annotations

from pathlib import Path

from wmrl_core.experiments.package_data import shipped_config


def config_path(name: str) -> Path:
    """The config ``name`` shipped with the package (``configs/`` inside it), e.g. ``quickstart.yaml``.

    :raises FileNotFoundError: naming the configs the package ships.
    """
    return shipped_config("wmrl_autoresearch", name)

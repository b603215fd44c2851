"""The AutoResearch benchmarks that ship with the plugin, and its configs:

* :mod:`~wmrl_autoresearch.experiments.sandbox_load` (``wmrl experiment sandbox-load``, registered in
  :mod:`wmrl_autoresearch.plugin`): many executions at full parallelism, mixed scripts;
* :mod:`~wmrl_autoresearch.experiments.sandbox_bench`: sandbox start-up latency and throughput
  (``wmrl-autoresearch bench-sandbox``);
* :mod:`~wmrl_autoresearch.experiments.gpu_checks`: the plugin's checks in ``benchmarks/gpu_check.py``.

The pre-registered studies on this plugin (held-out gain, equal execution, noise control, the world
model's online update, λ estimates) and the ``autoresearch`` suite of the compute-to-target
benchmark are research, not product: they sit in a checkout's ``experiments/autoresearch_*/`` and
``experiments/compute_to_target/`` folders and ``wmrl experiment`` finds them there.

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

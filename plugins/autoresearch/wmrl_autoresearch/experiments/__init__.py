"""The AutoResearch experiments and benchmarks (``wmrl experiment NAME``, registered in
:mod:`wmrl_autoresearch.plugin`; each module's ``main(argv, prog)`` parses its own options):

* :mod:`~wmrl_autoresearch.experiments.heldout_gain` (``heldout-gain``): the main job's held-out
  gain against the same settings on pure-noise rewards;
* :mod:`~wmrl_autoresearch.experiments.equal_execution` (``equal-execution``): issue 31's
  benchmark, every arm's held-out score at WMRL's charged execution, with the anchors-only and
  noise controls (endpoints in :mod:`~wmrl_autoresearch.experiments.equal_execution_analysis`);
* :mod:`~wmrl_autoresearch.experiments.noise_control` (``noise-control``): does the program
  policy's optimiser keep its entropy on noise rewards;
* :mod:`~wmrl_autoresearch.experiments.compute_to_target`: the ``autoresearch`` suite of
  ``wmrl experiment compute-to-target``;
* :mod:`~wmrl_autoresearch.experiments.sandbox_load` (``sandbox-load``): many executions at full
  parallelism, mixed scripts;
* :mod:`~wmrl_autoresearch.experiments.wm_online_update` (``wm-online-update``): the program world
  model's ranking after learning from anchors, offline on the shipped corpus;
* :mod:`~wmrl_autoresearch.experiments.lambda_estimates` (``lambda-estimates``): the rectified
  fuser's λ from advantage moments and from per-group gradients against the trace-optimal λ*, at
  one fixed program policy;
* :mod:`~wmrl_autoresearch.experiments.sandbox_bench`: sandbox start-up latency and throughput
  (``wmrl-autoresearch bench``);
* :mod:`~wmrl_autoresearch.experiments.gpu_checks`: the plugin's checks in ``benchmarks/gpu_check.py``.

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

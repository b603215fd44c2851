"""Experiments: arms run side by side over seeds, and the statistics their reports use.

* :mod:`wmrl_core.experiments.runner`: :func:`~wmrl_core.experiments.runner.run_arms`, train
  every arm for every seed (seeds interleaved), resume, skip finished arm-seeds, archive, and
  refuse changed settings.
* :mod:`wmrl_core.experiments.stats`: means with t-intervals, stratified standard errors,
  Wilson intervals, the paired bootstrap, within-group Spearman and AUROC.
* :mod:`wmrl_core.experiments.noise`: the noise controls (a world model and a reward that carry
  no information), usable with any domain.
* :mod:`wmrl_core.experiments.synthetic`: the synthetic theorem experiment's arms and report
  (``wmrl experiment synthetic``).

Experiments are registered by plugins through the ``wmrl_register_experiments`` hook and run
with ``wmrl experiment NAME``; nothing here is imported by ``import wmrl_core``.
"""

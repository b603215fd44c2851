"""The experiment kit: what every study is built from.

* :mod:`wmrl_core.experiments.runner`: :func:`~wmrl_core.experiments.runner.run_arms`, train
  every arm for every seed (seeds interleaved), resume, skip finished arm-seeds, archive, and
  refuse changed settings.
* :mod:`wmrl_core.experiments.stats`: means with t-intervals, stratified standard errors,
  Wilson intervals, the paired bootstrap, within-group Spearman and AUROC.
* :mod:`wmrl_core.experiments.report`: markdown tables, intervals and per-seed tables, the
  flags every study takes (``--seeds``, ``--runs``, ``--archive``, ``--out``, ``--quick``) and the
  one parser of seed and index lists.
* :mod:`wmrl_core.experiments.studies`: how ``wmrl experiment`` finds the studies of a checkout.
* :mod:`wmrl_core.experiments.noise`: the noise controls (a world model and a reward that carry
  no information), usable with any domain.

The studies themselves (pre-registrations, run modules, analyses, archives and page builders)
are not installed: they live in the repository's top-level ``experiments/<study>/`` folders and
register their experiments through the ``wmrl_register_experiments`` hook; installed plugins
register theirs the same way. Nothing here is imported by ``import wmrl_core``.
"""

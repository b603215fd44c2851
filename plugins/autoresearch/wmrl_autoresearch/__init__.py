"""wmrl-autoresearch: machine-learning tasks solved by Python scripts, executed in hardened
Docker sandboxes and graded against hidden labels (the ``autoresearch`` WMRL environment).

Layers, each importing only those listed before it:

* :mod:`wmrl_autoresearch.tasks`: what a task is, its metrics, the built-in suite, task files;
* :mod:`wmrl_autoresearch.sandbox`: running a script (Docker sandbox, local fallback, pool);
* :mod:`wmrl_autoresearch.grading`: grading predictions, outcomes, rewards;
* :mod:`wmrl_autoresearch.environment`, :mod:`wmrl_autoresearch.plugin`,
  :mod:`wmrl_autoresearch.cli`: the environment, its WMRL registrations and the command line;
* :mod:`wmrl_autoresearch.program` and :mod:`wmrl_autoresearch.llm`: policies and world models;
* :mod:`wmrl_autoresearch.experiments`: the benchmarks that ship with the plugin (sandbox speed and
  load, the compute-to-target suite, the GPU checks) and its configs.
"""

__version__ = "0.1.0"

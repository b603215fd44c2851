"""wmrl-autoresearch: machine-learning tasks solved by Python scripts, executed in hardened
Docker sandboxes and graded against hidden labels (the ``autoresearch`` WMRL environment).

Layers, each importing only those listed before it:

* :mod:`wmrl_autoresearch.tasks`: what a task is, its metrics, the built-in suite, task files;
* :mod:`wmrl_autoresearch.sandbox`: running a script (Docker sandbox, local fallback, pool);
* :mod:`wmrl_autoresearch.grading`: grading predictions, outcomes, rewards;
* :mod:`wmrl_autoresearch.environment`, :mod:`wmrl_autoresearch.plugin`,
  :mod:`wmrl_autoresearch.cli`, :mod:`wmrl_autoresearch.sandbox_bench`: the environment, its
  WMRL registrations, the command line and the sandbox benchmark;
* :mod:`wmrl_autoresearch.program` and :mod:`wmrl_autoresearch.llm`: policies and world models.
"""

__version__ = "0.1.0"

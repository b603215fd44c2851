"""wmrl-autoresearch: machine-learning tasks solved by Python scripts, executed in hardened
Docker sandboxes and graded against hidden labels (the ``autoresearch`` WMRL environment).

Start at :mod:`wmrl_autoresearch.environment` (the environment), :mod:`wmrl_autoresearch.tasks`
and :mod:`wmrl_autoresearch.suite` (tasks), :mod:`wmrl_autoresearch.sandbox` and
:mod:`wmrl_autoresearch.pool` (execution), :mod:`wmrl_autoresearch.outcomes` and
:mod:`wmrl_autoresearch.rewards` (grading and rewards).
"""

__version__ = "0.1.0"

"""Language-model components of AutoResearch: the LLM code agent (policy) and the LLM
world model. See README.md beside this file.

Importing this package is cheap (no transformers, no vLLM); the heavy modules
(:mod:`.policy`, :mod:`.world_model`) import ``transformers`` when used.

Solutions: the code agent emits a ``str`` (a Python script) or an
:class:`~wmrl_autoresearch.llm.solution.InvalidSolution` marker, which environments report
as ``Outcome(status="invalid_solution")`` without running anything.
"""

from wmrl_autoresearch.llm.solution import INVALID_STATUS, InvalidSolution, is_invalid_solution

__all__ = ["InvalidSolution", "is_invalid_solution", "INVALID_STATUS"]

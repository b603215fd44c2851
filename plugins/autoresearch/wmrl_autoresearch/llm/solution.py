"""What the LLM code agent hands to the environment: a script, or an explicit marker.

The convention (the AutoResearch environment relies on it)
---------------------------------------------------------
Every rollout of :class:`~wmrl_autoresearch.llm.policy.LLMCodeAgent` yields exactly one
solution, and it is one of two types:

``str``
    A Python script (the body of the answer's fenced ```python block), non-empty, which
    compiled without ``SyntaxError`` when ``check_syntax`` is on (the default). The
    environment runs it.

:class:`InvalidSolution`
    The answer could not be turned into a script: no fenced block, a block left open
    (generation hit ``max_new_tokens``), an empty block, or a syntax error. The environment
    must not run it and reports ``Outcome(status="invalid_solution", score=None,
    info={"reason": solution.reason})``; the LLM world model predicts the same outcome
    without querying its model.

``InvalidSolution`` is deliberately *not* a ``str`` subclass, so ``isinstance(solution,
str)`` is the test for "a runnable script". Code that must not import this package can
duck-type with :func:`is_invalid_solution` semantics: ``getattr(solution, "wmrl_invalid",
False) is True``. This module imports nothing heavy (no torch, no transformers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["InvalidSolution", "is_invalid_solution", "INVALID_STATUS"]

INVALID_STATUS = "invalid_solution"
"""The ``Outcome.status`` an environment reports for an :class:`InvalidSolution`."""


@dataclass(frozen=True)
class InvalidSolution:
    """A model answer that contains no runnable script.

    :param reason: one line saying what was wrong (``"no fenced python block"``, ...).
    :param raw_text: the model's full answer, kept for logging and debugging.
    """

    reason: str
    raw_text: str = ""

    wmrl_invalid = True  # class attribute: the duck-typed marker, not a dataclass field

    def __str__(self) -> str:  # readable in logs, never mistaken for a script
        return f"<InvalidSolution: {self.reason}>"


def is_invalid_solution(solution: Any) -> bool:
    """True when ``solution`` is an :class:`InvalidSolution` (or duck-types as one)."""
    return getattr(solution, "wmrl_invalid", False) is True

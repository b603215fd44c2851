"""A typed grammar of ML experiments: a fixed sequence of decisions, each from a fixed menu.

A *program* is one choice per decision, in :data:`DECISIONS` order. It renders to a complete
Python script (``render.py``) for classification and regression alike, so every program is
valid for every task; how well it does is what the sandbox measures.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["DECISIONS", "Program", "N_DECISIONS", "N_OPTIONS", "MAX_OPTIONS", "ONE_HOT_SIZE", "ProgramScript"]

DECISIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("impute", ("mean", "median")),
    ("scale", ("none", "standard", "robust", "quantile")),
    ("features", ("none", "poly2", "pca", "select_half")),
    ("model", ("linear", "knn", "tree", "random_forest", "extra_trees", "hist_gb", "mlp", "svm")),
    ("complexity", ("low", "medium", "high")),
    ("regularization", ("weak", "default", "strong")),
    ("ensemble", ("none", "bagging")),
    ("budget", ("fast", "balanced", "thorough")),
)
"""(decision name, options). Order matters: the policy emits decisions in this order."""

N_DECISIONS = len(DECISIONS)
N_OPTIONS = tuple(len(options) for _, options in DECISIONS)
MAX_OPTIONS = max(N_OPTIONS)
ONE_HOT_SIZE = sum(N_OPTIONS)
_HEADER = re.compile(r"^# wmrl-program: (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Program:
    """One choice index per decision."""

    choices: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.choices) != N_DECISIONS:
            raise ValueError(f"a program has {N_DECISIONS} choices, got {len(self.choices)}")
        for (name, options), c in zip(DECISIONS, self.choices):
            if not 0 <= c < len(options):
                raise ValueError(f"choice {c} out of range for decision {name!r} ({len(options)} options)")

    @classmethod
    def from_names(cls, names: Mapping[str, str]) -> Program:
        try:
            return cls(tuple(options.index(names[name]) for name, options in DECISIONS))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"invalid program {dict(names)}: {exc}; decisions are {dict(DECISIONS)}") from None

    @classmethod
    def sample(cls, rng: np.random.Generator) -> Program:
        return cls(tuple(int(rng.integers(n)) for n in N_OPTIONS))

    @property
    def names(self) -> dict[str, str]:
        return {name: options[c] for (name, options), c in zip(DECISIONS, self.choices)}

    def one_hot(self) -> np.ndarray:
        out = np.zeros(ONE_HOT_SIZE, dtype=np.float32)
        offset = 0
        for n, c in zip(N_OPTIONS, self.choices):
            out[offset + c] = 1.0
            offset += n
        return out

    def header(self) -> str:
        return "# wmrl-program: " + " ".join(f"{k}={v}" for k, v in self.names.items())

    @classmethod
    def parse(cls, script: str) -> Program | None:
        """Recover the program from a rendered script's header; ``None`` for other scripts."""
        match = _HEADER.search(script or "")
        if not match:
            return None
        try:
            return cls.from_names(dict(part.split("=", 1) for part in match.group(1).split()))
        except ValueError:
            return None


class ProgramScript(str):
    """A rendered script that remembers its program (a plain ``str`` to the environment)."""

    program: Program

    def __new__(cls, text: str, program: Program) -> ProgramScript:
        obj = super().__new__(cls, text)
        obj.program = program
        return obj

    def __reduce__(self):  # keep the program through pickling (worker processes, checkpoints)
        return (ProgramScript, (str(self), self.program))


def programs_of(solutions: Sequence[object]) -> list[Program | None]:
    return [s.program if isinstance(s, ProgramScript) else Program.parse(str(s)) for s in solutions]

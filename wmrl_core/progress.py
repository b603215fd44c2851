"""Training progress: a rich progress bar on a terminal, one plain line per step otherwise (a run
under ``nohup`` logging to a file gets a readable record instead of nothing)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

SHOWN = (
    ("reward/train_mean", "reward"),
    ("eval/true_reward", "true"),
    ("eval/reward", "eval"),
    ("fusion/w_world_model", "w_wm"),
    ("value/n_eff", "n_eff"),
    ("value/ratio_vs_real", "x_vs_real"),
    ("value/ratio_vs_anchors", "x_vs_anchors"),
    ("policy/entropy", "entropy"),
    ("compute/total_s", "compute_s"),
)
"""Metrics shown after the step count: ``(key in the step's record, label)``."""


def progress_info(record: dict[str, Any]) -> str:
    """``"reward=0.5 entropy=2.3 ..."``: the finite ``SHOWN`` metrics of one step's record."""
    parts = []
    for key, label in SHOWN:
        value = record.get(key)
        if isinstance(value, (int, float)) and math.isfinite(value):
            parts.append(f"{label}={value:.3g}")
    return " ".join(parts)


class TrainingProgress:
    """Steps done of ``total`` with :func:`progress_info`; ``enabled=False`` shows nothing."""

    def __init__(
        self, *, total: int, start: int = 0, enabled: bool = True, label: str = "train", console: Console | None = None
    ):
        self._progress = None
        self._console = None
        self.total, self.label = total, label
        if not enabled:
            return
        console = console or Console()
        if not console.is_terminal:
            self._console = console  # plain lines: a live bar would print nothing to a file until the end
            return
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
            transient=False,
            console=console,
        )
        self._progress.start()
        self._task = self._progress.add_task(label, total=total, completed=start, info="")

    def update(self, step: int, record: dict[str, Any]) -> None:
        info = progress_info(record)
        if self._console is not None:
            self._console.print(
                f"{self.label}: step {step}/{self.total} {info}".rstrip(), highlight=False, soft_wrap=True
            )
            self._console.file.flush()
        elif self._progress is not None:
            self._progress.update(self._task, completed=step, info=info)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()

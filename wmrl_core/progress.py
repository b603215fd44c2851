"""A progress bar showing steps, reward, policy entropy and compute (rich)."""

from __future__ import annotations

import math
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class TrainingProgress:
    def __init__(self, *, total: int, start: int = 0, enabled: bool = True, label: str = "train"):
        self._progress = None
        if enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(label, total=total, completed=start, info="")

    def update(self, step: int, record: dict[str, Any]) -> None:
        if self._progress is None:
            return
        parts = []
        for key, label in (
            ("reward/train_mean", "reward"),
            ("eval/true_reward", "true"),
            ("eval/reward", "eval"),
            ("fusion/w_world_model", "w_wm"),
            ("policy/entropy", "entropy"),
            ("compute/total_s", "compute_s"),
        ):
            value = record.get(key)
            if isinstance(value, (int, float)) and math.isfinite(value):
                parts.append(f"{label}={value:.3g}")
        self._progress.update(self._task, completed=step, info=" ".join(parts))

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()

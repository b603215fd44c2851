"""Where metrics go: ``metrics.jsonl`` (flushed every step), TensorBoard, and wandb if asked."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["MetricsWriter", "read_metrics"]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; None keeps "no value" distinct from 0
    return value


class MetricsWriter:
    """Appends one JSON object per step; mirrors scalars to TensorBoard and wandb.

    :param run_dir: the run directory.
    :param tensorboard: also write ``run_dir/tensorboard``.
    :param wandb_project: log to wandb as well (import fails with the fix if not installed).
    :param truncate_after_step: on resume, drop lines written after the checkpoint's step.
    """

    def __init__(self, run_dir: Path, *, tensorboard: bool = True, wandb_project: str | None = None,
                 config: dict | None = None, truncate_after_step: int | None = None):
        self.path = Path(run_dir) / "metrics.jsonl"
        if truncate_after_step is not None and self.path.exists():
            kept = [r for r in read_metrics(self.path) if r["step"] <= truncate_after_step]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self._file = self.path.open("a", encoding="utf-8")
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))
        self._wandb = None
        if wandb_project:
            try:
                import wandb
            except ImportError as exc:
                raise ImportError("logging.wandb_project is set but wandb is not installed: pip install wandb") from exc
            self._wandb = wandb.init(project=wandb_project, dir=str(run_dir), config=config, resume="allow")

    def write(self, record: dict[str, Any]) -> None:
        clean = {k: _clean(v) for k, v in record.items()}
        self._file.write(json.dumps(clean) + "\n")
        self._file.flush()
        step = int(record["step"])
        scalars = {k: v for k, v in clean.items() if isinstance(v, (int, float)) and k != "step" and v is not None}
        if self._tb is not None:
            for key, value in scalars.items():
                self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

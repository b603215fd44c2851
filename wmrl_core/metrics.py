"""Where metrics go: ``metrics.jsonl`` (one line per step, in the file before the next step
starts), TensorBoard, and wandb if asked.

A line is appended with one unbuffered write; if the disk fills up mid-line the file is cut back
to its last complete line and :class:`~wmrl_core.faults.DiskFullError` is raised. Reading
tolerates a partial last line (a process killed mid-write) and skips it with a warning, and gives
metrics written under an earlier name (:data:`LEGACY_METRICS`) back under the current one.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_core.errors import DataError
from wmrl_core.faults import atomic_write_text, disk_full_guard

__all__ = ["MetricsWriter", "nanmean", "read_metrics", "strict_json", "LEGACY_METRICS"]

LEGACY_METRICS = {
    "debias/residual_var": "calibration/residual_var",
    "debias/raw_residual_var": "calibration/raw_residual_var",
    "debias/n_pairs": "calibration/n_pairs",
}
"""Metrics that runs before the calibration rename wrote under ``debias/``, and their current names."""


def nanmean(values: Iterable[float | None]) -> float:
    """Mean of the finite values, skipping NaN, infinities and ``None`` (a metric ``read_metrics``
    gives back as "no value"); NaN when none is left, never a warning."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def _clean(value: Any) -> Any:
    """``value`` with every non-finite float (also nested, also numpy) replaced by ``None``."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; None keeps "no value" distinct from 0
    return value


def _default(value: Any) -> Any:
    try:
        return _clean(float(value))
    except (TypeError, ValueError):
        return str(value)


def strict_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that writes strict JSON: NaN and infinities (anywhere) become ``null``,
    numpy scalars and other numbers become floats, anything else its ``str``."""
    return json.dumps(_clean(obj), allow_nan=False, default=_default, **kwargs)


class MetricsWriter:
    """Appends one JSON object per step; mirrors scalars to TensorBoard and wandb.

    :param run_dir: the run directory.
    :param tensorboard: also write ``run_dir/tensorboard``.
    :param wandb_project: log to wandb as well (import fails with the fix if not installed).
    :param truncate_after_step: on resume, drop lines written after the checkpoint's step.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        tensorboard: bool = True,
        wandb_project: str | None = None,
        config: dict | None = None,
        truncate_after_step: int | None = None,
    ):
        self.path = Path(run_dir) / "metrics.jsonl"
        if truncate_after_step is not None and self.path.exists():
            kept = [r for r in _records(self.path) if r["step"] <= truncate_after_step]  # as written
            atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept), "metrics")
        self._file = self.path.open("ab", buffering=0)
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
        self._append((strict_json(clean) + "\n").encode("utf-8"))
        step = int(record["step"])
        scalars = {k: v for k, v in clean.items() if isinstance(v, (int, float)) and k != "step" and v is not None}
        if self._tb is not None:
            for key, value in scalars.items():
                self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)

    def _append(self, line: bytes) -> None:
        """Append a whole line or nothing (a partial line is cut off again on error)."""
        start = os.fstat(self._file.fileno()).st_size
        with disk_full_guard(self.path, "metrics"):
            try:
                view = memoryview(line)
                while view:
                    view = view[self._file.write(view) :]
            except OSError:
                os.ftruncate(self._file.fileno(), start)  # needs no free space
                raise

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl`` (or of the run directory holding it), each metric under its
    current name (one of :data:`LEGACY_METRICS` under its new name, unless both are there).

    A partial last line (the writer was killed mid-line) is skipped with a warning; a corrupt
    line elsewhere raises ``ValueError`` naming its line number.
    """
    records = _records(path)
    for record in records:
        for old, new in LEGACY_METRICS.items():
            if old in record and new not in record:
                record[new] = record.pop(old)
    return records


def _records(path: str | Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl`` as written (:func:`read_metrics`)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    records = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if i == len(lines):  # no newline after it: the write was cut short
                warnings.warn(
                    f"{path}: skipped a partial last line ({len(line)} characters, {exc.msg})",
                    RuntimeWarning,
                    stacklevel=3,
                )
                continue
            raise DataError(f"{path}, line {i}: not a JSON record ({exc.msg}); the file is corrupt") from None
    return records

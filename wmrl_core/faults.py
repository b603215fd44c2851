"""Faults a training run survives, and the errors for those it cannot.

Each function states its promise:

* :func:`atomic_write_bytes` / :func:`atomic_write_text` / :func:`atomic_torch_save`: a file
  is either its old version or its complete new one, never a torn mix (write a temporary file
  in the same directory, ``fsync``, ``os.replace``). A crash or a full disk mid-write leaves
  the previous version readable.
* :func:`disk_full_guard`: a write that fails for lack of space raises :class:`DiskFullError`
  naming the directory, the free space and the fix, instead of a bare ``OSError``.
* :class:`StepFaults`: a world model that raises, hangs past ``timeout_s`` or returns NaN for
  some items, and a reward extractor that raises on one outcome, cost only the rewards they
  concern. Those rewards become NaN (dropped from the update, never 0), the step goes on, and
  the counts appear in the step's metrics under ``faults/``.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import math
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_core.contracts import is_rewarded
from wmrl_core.errors import ComponentError, WMRLError
from wmrl_core.types import Outcome, Task, as_outcome
from wmrl_core.waits import DEFAULT_PREDICT_TIMEOUT_S, deadline_s, heartbeat

__all__ = [
    "DiskFullError",
    "raise_if_disk_full",
    "disk_full_guard",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_torch_save",
    "StepFaults",
    "CallTimedOut",
    "call_with_deadline",
    "DROPPED",
    "FAULT_METRICS",
]

log = logging.getLogger(__name__)

_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}

FAULT_METRICS = (
    "faults/world_model_errors",
    "faults/world_model_timeouts",
    "faults/world_model_dropped",
    "faults/reward_errors",
)
"""Per-step counts: world-model calls that raised, calls that passed the timeout, rollouts whose
world-model reward was dropped (every rollout of a failed call, plus non-finite predictions), and
reward-extractor calls that raised (their rewards dropped)."""


# ------------------------------------------------------------------ files


class DiskFullError(WMRLError, OSError):
    """No space left where the run writes; what was written before stays readable."""


def _free_bytes(directory: Path) -> int | None:
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def _mib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**20:.1f} MiB"


def raise_if_disk_full(exc: OSError, directory: str | os.PathLike, what: str = "run files") -> None:
    """Raise :class:`DiskFullError` from ``exc`` when it is ``ENOSPC``/``EDQUOT``; else return.

    The message names the directory, its free space and the fix.
    """
    if exc.errno not in _NO_SPACE or isinstance(exc, DiskFullError):
        return
    directory = Path(directory)
    raise DiskFullError(
        exc.errno,
        f"no space left to write the {what} in {directory} ({_mib(_free_bytes(directory))} free). The metrics "
        "and checkpoints written before are intact. Free space there (or copy the run to a larger disk), "
        "then continue with resume=true",
    ) from exc


@contextlib.contextmanager
def disk_full_guard(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Turn ``ENOSPC``/``EDQUOT`` raised inside the block into :class:`DiskFullError`.

    :param path: the file being written (its directory is named in the message).
    :param what: what was being written, for the message (``"checkpoint"``, ``"metrics"``).
    """
    try:
        yield
    except OSError as exc:
        raise_if_disk_full(exc, Path(path).parent, f"{what} {Path(path).name}")
        raise


def atomic_write_bytes(
    path: str | os.PathLike, data: bytes | Callable[[io.BufferedWriter], None], what: str = "file"
) -> Path:
    """Write ``path`` atomically: temporary file in the same directory, ``fsync``, ``os.replace``.

    :param data: the bytes, or a function that writes into the open binary file.
    :raises DiskFullError: when the disk is full (the old ``path`` is left as it was).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with disk_full_guard(path, what):
        try:
            with open(tmp, "wb") as f:
                if callable(data):
                    data(f)
                else:
                    f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str, what: str = "file") -> Path:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"), what)


def atomic_torch_save(obj: Any, path: str | os.PathLike, what: str = "checkpoint") -> Path:
    """``torch.save`` through :func:`atomic_write_bytes`."""
    import torch

    return atomic_write_bytes(path, lambda f: torch.save(obj, f), what)


# ------------------------------------------------------------------ world model and rewards


DROPPED = Outcome(
    status="no_prediction", info={"error": "the world model gave no usable prediction (error, timeout, NaN)"}
)
"""Stands for a world-model prediction that was dropped; :meth:`StepFaults.rewards` gives it NaN."""


class _PastDeadline(Exception):
    """The world model did not answer within the timeout (distinct from a TimeoutError it raises)."""


class _Call:
    """One world-model call on a daemon thread (a hung call cannot be killed, only abandoned)."""

    def __init__(self, fn: Callable[[], Any]):
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), name="wmrl-world-model", daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:  # handed to the caller, which decides
            self.error = exc


class CallTimedOut(ComponentError):
    """A call did not return within its deadline; it was abandoned on its thread."""


def call_with_deadline(fn: Callable[[], Any], timeout_s: float | None) -> Any:
    """``fn()``, on a daemon thread when ``timeout_s`` is set; raises what it raised, or
    :class:`CallTimedOut` after ``timeout_s`` seconds (the call keeps running, abandoned:
    Python cannot kill a thread)."""
    if timeout_s is None:
        return fn()
    call = _Call(fn)
    call.thread.join(timeout_s)
    if call.thread.is_alive():
        raise CallTimedOut(f"the call did not return within {timeout_s:g} s; it runs on, abandoned")
    if call.error is not None:
        raise call.error
    return call.result


def _usable(prediction: Any) -> bool:
    """A prediction is usable unless it is missing, ``no_prediction`` or a non-finite number (an
    Outcome with another non-ok status is a usable prediction of a failure)."""
    if prediction is None:
        return False
    if isinstance(prediction, Outcome):
        if prediction.status == "no_prediction":
            return False
        return not (prediction.status == "ok" and (prediction.score is None or not math.isfinite(prediction.score)))
    try:
        return math.isfinite(float(prediction))
    except (TypeError, ValueError):
        return False


class StepFaults:
    """Guards one step's world-model call and reward extraction; counts what it dropped.

    :param world_model_timeout_s: seconds a ``predict`` call may take; ``None``: the world
        model's own ``timeout_s(n)``, else :data:`~wmrl_core.waits.DEFAULT_PREDICT_TIMEOUT_S`;
        ``inf``: no deadline (the call then runs on the calling thread). A call past the deadline
        is abandoned on its thread (Python cannot kill a thread): while it is still running,
        later steps do not call the world model again and drop its rewards.
    :param heartbeat_s: seconds between progress lines while a call runs (0: none).
    """

    def __init__(self, *, world_model_timeout_s: float | None = None, heartbeat_s: float = 0.0):
        if world_model_timeout_s is not None and not world_model_timeout_s > 0:
            raise ValueError(f"world_model_timeout_s must be > 0 or None, got {world_model_timeout_s}")
        self.world_model_timeout_s = world_model_timeout_s
        self.heartbeat_s = heartbeat_s
        self._hung: _Call | None = None
        self.counts = dict.fromkeys(FAULT_METRICS, 0)

    def metrics(self) -> dict[str, int]:
        """This step's counts; resets them for the next step."""
        out, self.counts = self.counts, dict.fromkeys(FAULT_METRICS, 0)
        return out

    def predict(
        self,
        world_model: Any,
        tasks: Sequence[Task],
        solutions: Sequence[Any],
        outcomes: Sequence[Outcome] | None = None,
        *,
        check: Callable[[Any], list[Any]] | None = None,
    ) -> list[Any]:
        """``world_model.predict(tasks, solutions)`` with every unusable item replaced by :data:`DROPPED`;
        with ``outcomes`` (executed rollouts), ``world_model.predict_from_outcomes(tasks, solutions, outcomes)``.

        A call that raises or passes the timeout yields :data:`DROPPED` for every item.

        :param check: called on what the call returned, before any item is dropped; raises for a
            broken contract (another count of predictions, an unknown status), which is the
            plugin's bug, not a fault to survive (``wmrl_core.checkers.check_outcomes``).
        """
        n = len(solutions)
        if self._hung is not None and self._hung.thread.is_alive():
            return self._drop_all("faults/world_model_timeouts", n, "is still running a call that timed out")
        self._hung = None
        timeout_s = deadline_s(self.world_model_timeout_s, world_model, n, DEFAULT_PREDICT_TIMEOUT_S)
        method = "predict" if outcomes is None else "predict_from_outcomes"
        try:
            with heartbeat(f"world model {method}() of {n} solutions", self.heartbeat_s, timeout_s):
                if outcomes is None:
                    predictions = self._call(lambda: world_model.predict(tasks, solutions), timeout_s)
                else:
                    predictions = self._call(
                        lambda: world_model.predict_from_outcomes(tasks, solutions, outcomes), timeout_s
                    )
        except _PastDeadline:
            return self._drop_all("faults/world_model_timeouts", n, f"took longer than its deadline of {timeout_s:g} s")
        except Exception as exc:
            return self._drop_all("faults/world_model_errors", n, f"raised {type(exc).__name__}: {exc}")
        if check is not None:
            predictions = check(predictions)
        if not hasattr(predictions, "__len__"):
            return predictions  # a contract violation, reported by the caller
        predictions = list(predictions)
        if len(predictions) != n:
            return predictions  # a contract violation, reported by the caller
        usable = [p if _usable(p) else DROPPED for p in predictions]
        self.counts["faults/world_model_dropped"] += sum(p is DROPPED for p in usable)
        return usable

    def _drop_all(self, counter: str, n: int, why: str) -> list[Outcome]:
        log.warning("world model predict() %s; the rewards of its %d items are dropped", why, n)
        self.counts[counter] += 1
        self.counts["faults/world_model_dropped"] += n
        return [DROPPED] * n

    def _call(self, fn: Callable[[], Any], timeout_s: float | None) -> Any:
        """``fn()``'s predictions; raises what the model raised, or :class:`_PastDeadline`."""
        if timeout_s is None:
            return fn()
        call = _Call(fn)
        call.thread.join(timeout_s)
        if call.thread.is_alive():
            self._hung = call
            raise _PastDeadline
        if call.error is not None:
            raise call.error  # KeyboardInterrupt and SystemExit propagate: not the model's fault
        return call.result

    def rewards(self, reward_fn: Any, tasks: Sequence[Task], outcomes: Sequence[Any]) -> np.ndarray:
        """Rewards as float64, NaN (never 0) where the outcome is :data:`DROPPED`, its status gives
        no reward (``wmrl_core.contracts.STATUSES``), the extractor returned ``None`` or a
        non-finite value, or the extractor raised (counted)."""
        values = np.full(len(outcomes), np.nan)
        for i, (task, outcome) in enumerate(zip(tasks, outcomes, strict=True)):
            if outcome is DROPPED:
                continue
            outcome = as_outcome(outcome)
            if not is_rewarded(outcome.status):  # not the solution's fault; an unknown status is a contract error
                continue
            try:
                r = reward_fn(task, outcome)
                r = math.nan if r is None else float(r)
            except Exception as exc:
                log.warning(
                    "reward extractor raised %s on task %s: %s; that reward is dropped",
                    type(exc).__name__,
                    getattr(task, "id", "?"),
                    exc,
                )
                self.counts["faults/reward_errors"] += 1
                continue
            if math.isfinite(r):
                values[i] = r
        return values

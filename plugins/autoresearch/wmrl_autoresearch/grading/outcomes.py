"""From an :class:`~wmrl_autoresearch.sandbox.result.Execution` and its grade to a WMRL ``Outcome``.

Statuses, in the order they are decided:

================  ==============================================================
sandbox_error     the sandbox itself failed (engine down, image missing); not the script's fault
timeout           killed at the wall-clock limit
oom               killed by the memory limit (or died of ``MemoryError``)
crashed           non-zero exit status (syntax error, exception, killed ...)
missing_output    exited 0 but wrote no ``predictions.csv``
invalid_output    predictions too large, binary, wrong shape, NaN/inf, unparsable
ok                graded: ``score`` is the raw metric value
================  ==============================================================

``Outcome.info`` holds ``runtime_s``, ``startup_s``, ``warm``, ``exit_code``, ``logs``
(stdout and stderr, each capped), ``stdout_bytes``, ``stderr_bytes``, ``logs_truncated``,
``resources`` (``memory_peak_bytes``, ``cpu_s`` ...), ``backend``, ``metric``,
``higher_is_better``, ``normalized_score`` (see :mod:`wmrl_autoresearch.tasks.task_metrics`) and
``error`` (why the status is not ok).
"""

from __future__ import annotations

from typing import Any

from wmrl_autoresearch.grading.grader import grade_predictions
from wmrl_autoresearch.sandbox.result import Execution
from wmrl_autoresearch.tasks.task import AutoResearchTask
from wmrl_autoresearch.tasks.task_metrics import normalized_score

__all__ = ["STATUSES", "to_outcome", "rejected_outcome", "outcome_to_dict"]

STATUSES = ("ok", "timeout", "oom", "crashed", "invalid_output", "missing_output", "sandbox_error")


def _status(task: AutoResearchTask, ex: Execution) -> tuple[str, float | None, str | None]:
    if ex.sandbox_error:
        return "sandbox_error", None, ex.sandbox_error
    if ex.timed_out:
        return "timeout", None, f"killed after the {ex.resources.get('timeout_s', '?')} s wall-clock limit"
    if ex.oom_killed:
        return "oom", None, "killed by the memory limit"
    if ex.exit_code != 0:
        return "crashed", None, f"exit status {ex.exit_code}"
    if ex.predictions is None:
        return "missing_output", None, "the script exited 0 but wrote no $OUTPUT_DIR/predictions.csv"
    if ex.predictions_truncated:
        return "invalid_output", None, "predictions.csv is larger than the size limit"
    grade = grade_predictions(task, ex.predictions)
    if grade.score is None:
        return "invalid_output", None, grade.error
    return "ok", grade.score, None


def to_outcome(task: AutoResearchTask, ex: Execution):
    """Grade ``ex`` for ``task`` and build the structured ``wmrl_core.types.Outcome``."""
    from wmrl_core.types import Outcome

    status, score, error = _status(task, ex)
    info: dict[str, Any] = {
        "runtime_s": round(ex.runtime_s, 4),
        "startup_s": round(ex.startup_s, 4),
        "warm": ex.warm,
        "backend": ex.backend,
        "exit_code": ex.exit_code,
        "logs": {"stdout": ex.stdout, "stderr": ex.stderr},
        "stdout_bytes": ex.stdout_bytes,
        "stderr_bytes": ex.stderr_bytes,
        "logs_truncated": ex.logs_truncated,
        "resources": dict(ex.resources),
        "metric": task.metric,
        "higher_is_better": task.metric_spec.higher_is_better,
        "error": error,
    }
    if ex.notes:
        info["notes"] = list(ex.notes)
    if score is not None:
        info["normalized_score"] = normalized_score(task.metric_spec, score, task.baseline)
    return Outcome(status=status, score=score, info=info)


def rejected_outcome(task: AutoResearchTask, reason: str):
    """``invalid_output`` for a solution that is not a script at all (never executed)."""
    from wmrl_core.types import Outcome

    return Outcome(status="invalid_output", score=None,
                   info={"runtime_s": 0.0, "metric": task.metric, "error": reason,
                         "higher_is_better": task.metric_spec.higher_is_better})


def outcome_to_dict(task_id: str, outcome) -> dict[str, Any]:
    """JSON-ready view of an outcome (what ``wmrl-autoresearch run-solution`` prints)."""
    return {"task": task_id, "status": outcome.status, "score": outcome.score, **outcome.info}

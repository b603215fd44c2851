"""From an :class:`~wmrl_autoresearch.sandbox.result.Execution` and its grade to a WMRL ``Outcome``.

Statuses, in the order they are decided:

================  ==============================================================
invalid_solution  (first) refused without running: larger than ``script_bytes``, or not a script
                  at all (``rejected_outcome``)
sandbox_error     the sandbox itself failed (engine down, image missing, starved twice by an
                  overloaded host); not the script's fault
timeout           used its CPU-time limit, or sat idle until the wall-clock safety net
oom               killed by the memory limit (or died of ``MemoryError``)
crashed           non-zero exit status (syntax error, exception, killed ...)
missing_output    exited 0 but wrote no ``predictions.csv``
invalid_output    predictions too large, binary, wrong shape, NaN/inf, unparsable
ok                graded: ``score`` is the raw metric value
================  ==============================================================

``Outcome.info`` holds ``runtime_s``, ``startup_s``, ``warm``, ``exit_code``, ``logs``
(stdout and stderr, each capped), ``stdout_bytes``, ``stderr_bytes``, ``logs_truncated``,
``resources`` (``memory_peak_bytes``, ``cpu_s`` ...), ``backend``, ``metric``,
``higher_is_better``, ``normalized_score`` (see :mod:`wmrl_autoresearch.tasks.task_metrics`),
``error`` (why the status is not ok), ``preimported``, ``attempts``; for a competition
(:mod:`wmrl_autoresearch.tasks.competition_task`) also ``raw_score``, ``leaderboard_percentile``,
``reward_basis`` and ``sample_submission_score``; and ``cost_s``: the measured
CPU seconds of the script (:func:`charged_cpu_s`), which the compute ledger charges for the
execution (see ``wmrl_core.types.MEASURED_COST_KEY``).
"""

from __future__ import annotations

import sys
from typing import Any

from wmrl_autoresearch.grading.grader import grade_predictions
from wmrl_autoresearch.sandbox.result import Execution
from wmrl_autoresearch.tasks.task import AutoResearchTask

__all__ = ["STATUSES", "to_outcome", "rejected_outcome", "outcome_to_dict", "charged_cpu_s"]

STATUSES = ("ok", "timeout", "oom", "crashed", "invalid_output", "missing_output", "invalid_solution", "sandbox_error")
"""The statuses this plugin returns, all from ``wmrl_core.contracts.STATUSES``."""


def _status(task: AutoResearchTask, ex: Execution) -> tuple[str, float | None, str | None]:
    if ex.rejected:  # refused before running (e.g. larger than script_bytes): not a runnable solution
        return "invalid_solution", None, ex.rejected
    if ex.sandbox_error:
        return "sandbox_error", None, ex.sandbox_error
    if ex.starved:  # a run not retried by the pool (the pool turns a second starvation into sandbox_error)
        return "sandbox_error", None, ex.notes[-1] if ex.notes else "starved at the wall-clock safety net"
    if ex.timed_out:
        return "timeout", None, ex.timeout_reason or "killed at its time limit"
    if ex.oom_killed:
        return "oom", None, "killed by the memory limit"
    if ex.exit_code != 0:
        return "crashed", None, f"exit status {ex.exit_code}"
    if ex.predictions is None:
        return "missing_output", None, "the script exited 0 but wrote no $OUTPUT_DIR/predictions.csv"
    if ex.predictions_truncated:
        return "invalid_output", None, "predictions.csv is larger than the size limit"
    if _is_competition(task):  # the competition's own grader, in this process
        from wmrl_autoresearch.grading.submission import grade_submission

        grade = grade_submission(task, ex.predictions)
    else:
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
        "cost_s": charged_cpu_s(ex),
        "preimported": ex.preimported,
        "attempts": ex.attempts,
    }
    if ex.notes:
        info["notes"] = list(ex.notes)
    if score is not None:
        info["normalized_score"] = task.normalize(score)
        if _is_competition(task):
            info.update(task.score_info(score))
    return Outcome(status=status, score=score, info=info)


def charged_cpu_s(ex: Execution) -> float:
    """What the run is charged, seconds: the CPU seconds of every attempt (wall seconds where the CPU
    time could not be measured); 0 for a script refused without running."""
    if ex.rejected:
        return 0.0
    attempts = ex.resources.get("cpu_s_attempts") or [ex.resources.get("cpu_s")]
    return round(sum(float(a) if a is not None else ex.runtime_s for a in attempts), 4)


def rejected_outcome(task: AutoResearchTask, reason: str):
    """``invalid_solution`` for a solution that is not a script at all (never executed)."""
    from wmrl_core.types import Outcome

    return Outcome(
        status="invalid_solution",
        score=None,
        info={
            "runtime_s": 0.0,
            "cost_s": 0.0,
            "metric": task.metric,
            "error": reason,
            "higher_is_better": task.metric_spec.higher_is_better,
        },
    )


def outcome_to_dict(task_id: str, outcome) -> dict[str, Any]:
    """JSON-ready view of an outcome (what ``wmrl-autoresearch run-solution`` prints)."""
    return {"task": task_id, "status": outcome.status, "score": outcome.score, **outcome.info}


def _is_competition(task: Any) -> bool:
    """Whether ``task`` is an MLE-bench-format competition. Its module (pandas) is imported only
    where a competition exists, so ``wmrl train --help`` and the pool's tasks do not pay for it."""
    module = sys.modules.get("wmrl_autoresearch.tasks.competition_task")
    return module is not None and isinstance(task, module.CompetitionTask)

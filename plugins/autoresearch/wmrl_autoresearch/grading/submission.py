"""Grading a competition's submission with the competition's own grader, outside the sandbox.

The sandbox hands back the bytes of ``predictions.csv`` (the submission); here, in the host
process, they are read as MLE-bench reads a submission (``pandas.read_csv``, floats round-tripped)
and given to the competition's ``grade(submission, answers)`` with a fresh copy of the private
answers. Whatever the grader raises for a malformed submission (MLE-bench's
``InvalidSubmissionError``, a ``KeyError`` of a missing column ...) becomes ``invalid_output`` with
the grader's message; so does a score that is not a finite number. Nothing the script printed is
read.
"""

from __future__ import annotations

import math
import numbers

from wmrl_autoresearch.grading.grader import Grade
from wmrl_autoresearch.tasks.competition_task import CompetitionTask
from wmrl_autoresearch.tasks.mlebench import read_submission

__all__ = ["grade_submission", "grade_frame"]


def grade_frame(task: CompetitionTask, submission) -> Grade:
    """Score a submission DataFrame with the competition's grader; never raises for the submission's faults."""
    answers = task.answers()  # read when the competition was vetted: a failure here is the host's, not the script's
    try:
        score = task.grade_fn(submission, answers)
    except Exception as exc:  # the grader's refusal of a malformed submission, in its own words
        return Grade(None, f"the competition's grader refused the submission: {type(exc).__name__}: {exc}")
    if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(float(score)):
        return Grade(None, f"the competition's grader returned {score!r}, not a finite number")
    return Grade(float(score))


def grade_submission(task: CompetitionTask, data: bytes | None) -> Grade:
    """Score the submission's bytes (``None``: the script wrote none); never raises for bad content."""
    if data is None:
        return Grade(None, "no predictions.csv in the output directory: write the submission there")
    if b"\x00" in data:
        return Grade(None, "predictions.csv is binary (contains NUL bytes); write a text CSV")
    try:
        submission = read_submission(data)
    except Exception as exc:  # pandas' parser errors are of several types
        return Grade(None, f"predictions.csv is not a readable CSV: {type(exc).__name__}: {exc}")
    return grade_frame(task, submission)

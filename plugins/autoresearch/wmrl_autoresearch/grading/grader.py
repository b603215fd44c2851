"""The grader: runs outside the sandbox and scores ``predictions.csv`` against the hidden targets.

Accepted file: UTF-8 CSV with a header. Either ``id,prediction`` (rows in any order, each test
id exactly once) or a single column (any name) in test-row order. Classification predictions
are class labels (``1`` and ``1.0`` are the same label; an unknown label is simply wrong);
regression predictions must be finite numbers. Numbers (ids, regression values, numeric labels)
must be written with ASCII digits as a CSV writer would (``-1.5e3``): Python's ``float`` also
accepts other scripts' digits (``"١٢"``), full-width digits and underscores (``"1_0"``), which
no CSV reader of the tasks' own data would. Anything else is ``invalid_output`` with a reason;
nothing the script prints is read.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass

import numpy as np

from wmrl_autoresearch.tasks.labels import label_string
from wmrl_autoresearch.tasks.task import AutoResearchTask
from wmrl_core.errors import DataError

__all__ = ["Grade", "grade_predictions", "InvalidPredictions", "parse_number"]


class InvalidPredictions(DataError):
    """The predictions file cannot be scored; the message says why."""


_ASCII_NUMBER = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)", re.IGNORECASE
)


def parse_number(text: str, what: str, expected: str = "a number") -> float:
    """``float(text)`` for numbers written in ASCII (``1``, ``-2.5``, ``3e-4``, ``nan``, ``inf``) only.

    :param what: names the value in the error (e.g. ``"line 3: id"``).
    :param expected: what the value should be, for the error of a non-number (``"an integer"``).
    :raises InvalidPredictions: naming the value and the fix.
    """
    text = text.strip()
    if _ASCII_NUMBER.fullmatch(text) is None:
        try:
            float(text)
        except ValueError:
            raise InvalidPredictions(f"predictions.csv {what} {text[:40]!r} is not {expected}") from None
        raise InvalidPredictions(
            f"predictions.csv {what} {text[:40]!r} is not written with ASCII digits 0-9 (non-ASCII numerals, "
            "full-width digits and underscores are refused); write numbers as a CSV writer does, e.g. -1.5e3"
        )
    return float(text)


def _check_label(text: str, what: str) -> str:
    """A class label as written; one that Python reads as a number must be an ASCII number."""
    try:
        float(text)
    except ValueError:
        return text
    parse_number(text, what)
    return text


@dataclass
class Grade:
    """Result of grading one predictions file.

    :param score: raw metric value (``None`` when invalid).
    :param error: why the file is invalid (``None`` when valid).
    """

    score: float | None
    error: str | None = None


def _parse(data: bytes, n_rows: int) -> list[str]:
    if b"\x00" in data:
        raise InvalidPredictions("predictions.csv is binary (contains NUL bytes); write a text CSV")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidPredictions(f"predictions.csv is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    except csv.Error as exc:
        raise InvalidPredictions(f"predictions.csv is not valid CSV: {exc}") from None
    if not rows:
        raise InvalidPredictions("predictions.csv is empty; write a header and one row per test row")
    header = [h.strip().lower() for h in rows[0]]
    body = rows[1:]
    if "id" in header and "prediction" in header:
        i_id, i_pred = header.index("id"), header.index("prediction")
        values: list[str | None] = [None] * n_rows
        for k, row in enumerate(body, start=2):
            if len(row) <= max(i_id, i_pred):
                raise InvalidPredictions(f"predictions.csv line {k} has {len(row)} fields, expected {len(header)}")
            number = parse_number(row[i_id], f"line {k}: id", expected="an integer")
            if not (math.isfinite(number) and number.is_integer()):
                raise InvalidPredictions(f"predictions.csv line {k}: id {row[i_id]!r} is not an integer")
            idx = int(number)
            if not 0 <= idx < n_rows:
                raise InvalidPredictions(f"predictions.csv line {k}: id {idx} is not a test id (0..{n_rows - 1})")
            if values[idx] is not None:
                raise InvalidPredictions(f"predictions.csv: id {idx} appears twice")
            values[idx] = row[i_pred].strip()
        missing = [i for i, v in enumerate(values) if v is None]
        if missing:
            raise InvalidPredictions(
                f"predictions.csv has {n_rows - len(missing)} of {n_rows} test ids; missing e.g. {missing[:5]}"
            )
        return values  # type: ignore[return-value]
    if len(header) == 1:
        if len(body) != n_rows:
            raise InvalidPredictions(f"predictions.csv has {len(body)} rows, the test set has {n_rows}")
        return [r[0].strip() for r in body]
    raise InvalidPredictions(
        f"predictions.csv header is {rows[0][:6]}; expected `id,prediction` (or a single column in test-row order)"
    )


def grade_predictions(task: AutoResearchTask, data: bytes | None) -> Grade:
    """Score predictions against ``task.y_test``; never raises for bad content."""
    if data is None:
        return Grade(None, "no predictions.csv in the output directory")
    try:
        values = _parse(data, task.n_test)
        if task.kind == "classification":
            y_pred = np.array(
                [label_string(_check_label(v, f"test row {i}: prediction")) for i, v in enumerate(values)], dtype=object
            )
            bad = [v for v in values if v.lower() in {"nan", "inf", "-inf", "", "none", "null"}]
            if bad:
                raise InvalidPredictions(f"{len(bad)} predictions are empty or NaN (e.g. {bad[0]!r})")
        else:
            y_pred = np.array([parse_number(v, f"test row {i}: prediction") for i, v in enumerate(values)], dtype=float)
            if not np.isfinite(y_pred).all():
                n_bad = int((~np.isfinite(y_pred)).sum())
                raise InvalidPredictions(f"{n_bad} predictions are NaN or infinite")
        score = task.metric_spec(task.y_test, y_pred)
    except InvalidPredictions as exc:
        return Grade(None, str(exc))
    if not math.isfinite(score):
        return Grade(None, f"{task.metric} evaluated to {score}")
    return Grade(float(score))

"""Canonical text of class labels, so that ``1``, ``1.0`` and ``"1"`` name the same class.

Task targets (when a task is created) and predicted labels (when a solution is graded) both go
through :func:`label_string`, so a prediction matches its target whatever its spelling.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["label_string", "label_strings"]


def label_strings(y: np.ndarray) -> np.ndarray:
    """:func:`label_string` of every label in ``y``, as an object array."""
    return np.array([label_string(v) for v in y.tolist()], dtype=object)


def label_string(value: Any) -> str:
    """Canonical text of a class label: ``1``, ``1.0`` and ``"1"`` are the same class."""
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if math.isfinite(number) and number.is_integer():
        return str(int(number))
    return text

"""Turning model answers into solutions (scripts) and predicted outcomes (scores).

Two pure functions, no model needed:

* :func:`extract_script` finds the fenced ```python block of a code agent's answer and
  returns the script (``str``) or an :class:`~wmrl_autoresearch.llm.solution.InvalidSolution`.
* :func:`parse_prediction` reads a world model's answer such as ``"status: ok\\nscore:
  0.87"`` and returns ``(status, score)``; ``score`` is ``None`` when no number can be read.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from wmrl_autoresearch.llm.solution import InvalidSolution

__all__ = ["extract_script", "parse_number", "parse_prediction", "STATUS_WORDS"]

# ``` or ~~~ fences; the info string (language tag) is everything up to the newline.
_FENCE = re.compile(
    r"(?P<fence>```|~~~)[ \t]*(?P<tag>[^\n`]*)\n(?P<body>.*?)(?:\n[ \t]*(?P=fence)|(?P<open>\Z))",
    re.DOTALL,
)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_PYTHON_TAGS = {"python", "py", "python3", "py3"}


def extract_script(
    text: str,
    *,
    which: Literal["first", "last", "longest"] = "last",
    allow_untagged: bool = False,
    check_syntax: bool = True,
) -> str | InvalidSolution:
    """The Python script in a model answer, or why there is none.

    Reasoning blocks ``<think>...</think>`` are removed first (an unclosed one swallows the
    rest of the answer, so a model that never stops thinking yields no script).

    :param text: the decoded answer (completion only, without the prompt).
    :param which: which python block to take when there are several; ``"last"`` suits
        models that sketch code before their final answer.
    :param allow_untagged: also accept fences without a language tag (````` ``` `````).
    :param check_syntax: ``compile()`` the script and reject a ``SyntaxError``.
    :return: the script (stripped of trailing whitespace, never empty) or an
        ``InvalidSolution`` whose ``reason`` names the problem.
    """
    visible = _THINK.sub("", text)
    blocks: list[str] = []
    open_block = False
    for m in _FENCE.finditer(visible):
        tag = m.group("tag").strip().lower().split()[0] if m.group("tag").strip() else ""
        if tag in _PYTHON_TAGS or (allow_untagged and tag == ""):
            if m.group("open") is not None:
                open_block = True  # the answer ended inside the block
                continue
            blocks.append(m.group("body"))
    if not blocks:
        if open_block:
            return InvalidSolution("unterminated ```python block (the answer was cut off; raise max_new_tokens)", text)
        return InvalidSolution("no fenced ```python block in the answer", text)
    if which == "first":
        body = blocks[0]
    elif which == "last":
        body = blocks[-1]
    elif which == "longest":
        body = max(blocks, key=len)
    else:
        raise ValueError(f"which={which!r}; use 'first', 'last' or 'longest'")
    script = body.rstrip()
    if not script.strip():
        return InvalidSolution("the ```python block is empty", text)
    if check_syntax:
        try:
            compile(script, "<solution>", "exec")
        except (SyntaxError, ValueError) as exc:  # ValueError: null bytes
            return InvalidSolution(f"syntax error in the script: {exc}", text)
    return script + "\n"


# A number: optional sign, digits with optional decimals (or .5), optional exponent,
# optional percent sign. Thousands separators are not supported on purpose ("1,5" is ambiguous).
_NUMBER = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?(?:\s*%)?"
_NUMBER_RE = re.compile(_NUMBER)

STATUS_WORDS: dict[str, str] = {
    "ok": "ok",
    "success": "ok",
    "succeeded": "ok",
    "crash": "crashed",
    "crashed": "crashed",
    "crashes": "crashed",
    "error": "crashed",
    "exception": "crashed",
    "fail": "crashed",
    "failed": "crashed",
    "timeout": "timeout",
    "time-out": "timeout",
    "timed out": "timeout",
    "timed-out": "timeout",
    "oom": "oom",
    "out of memory": "oom",
    "out-of-memory": "oom",
    "memory error": "oom",
    "missing": "missing_output",
    "missing_output": "missing_output",
    "no output": "missing_output",
    "invalid": "invalid_output",
    "invalid_output": "invalid_output",
}
"""Words a world model may answer after ``status:``, mapped to ``Outcome.status`` values."""


def parse_number(token: str, *, percent_as_fraction: bool = True) -> float | None:
    """``"0.87" -> 0.87``, ``"87%" -> 0.87`` (or 87.0), ``"1e-2" -> 0.01``; junk -> ``None``.

    Non-finite values (``inf``, ``nan``, overflow) are ``None``: they cannot be a metric.
    """
    m = _NUMBER_RE.fullmatch(token.strip())
    if not m:
        return None
    raw = token.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw.rstrip("%").strip())
    except ValueError:
        return None
    if percent and percent_as_fraction:
        value /= 100.0
    return value if math.isfinite(value) else None


def parse_prediction(
    text: str,
    *,
    score_keys: tuple[str, ...] = ("score", "metric", "value", "accuracy", "result"),
    require_key: bool = False,
    percent_as_fraction: bool = True,
) -> tuple[str | None, float | None]:
    """Read ``(status, score)`` from a world model's answer.

    Status: the word after ``status:`` (``ok``, ``crash``, ``timeout`` ... see
    :data:`STATUS_WORDS`), else ``None`` (not stated). Score: the first number after the
    first ``<key>:`` or ``<key> =`` for ``key`` in ``score_keys`` (case-insensitive);
    failing that, and unless ``require_key``, the first number anywhere in the answer.

    :return: ``(status, score)``; ``score`` is ``None`` when no finite number was found.
    """
    visible = _THINK.sub("", text)
    status: str | None = None
    ms = re.search(r"status\s*[:=]\s*\**\s*([A-Za-z_][A-Za-z_\- ]*)", visible, re.IGNORECASE)
    if ms:
        words = ms.group(1).strip().lower()
        for key in sorted(STATUS_WORDS, key=len, reverse=True):  # "timed out" before "ok"
            if words.startswith(key):
                status = STATUS_WORDS[key]
                break
    score: float | None = None
    keys = "|".join(re.escape(k) for k in score_keys)
    mk = re.search(rf"(?:{keys})\s*\**\s*(?:[:=]|is)\s*\**\s*({_NUMBER})", visible, re.IGNORECASE)
    if mk:
        score = parse_number(mk.group(1), percent_as_fraction=percent_as_fraction)
    elif not require_key:
        # skip the status line so that "status: ok" never feeds a digit
        rest = visible[: ms.start()] + " " + visible[ms.end() :] if ms else visible
        for mn in _NUMBER_RE.finditer(rest):
            score = parse_number(mn.group(0), percent_as_fraction=percent_as_fraction)
            if score is not None:
                break
    return status, score

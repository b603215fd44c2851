"""Prompt templates for the code agent and the world model, and how they become text.

A template is a ``str.format`` string. Fields available:

* code agent (:data:`POLICY_TEMPLATE`): ``{description}`` (``Task.description``),
  ``{task_id}`` (``Task.id``);
* world model (:data:`WORLD_MODEL_TEMPLATE`): the same plus ``{solution}`` (the script).

Literal braces in a template must be doubled (``{{`` / ``}}``); values substituted in (the
task text, the script) are never re-parsed, so braces inside them are safe.

:func:`render` wraps the filled template in the tokenizer's chat template when it has one
(``apply_chat_template(..., add_generation_prompt=True)``), else appends the plain
``plain_suffix`` so a base model continues with its answer.
"""

from __future__ import annotations

import string
from typing import Any

from wmrl_core.types import Task

__all__ = [
    "POLICY_SYSTEM",
    "POLICY_TEMPLATE",
    "WORLD_MODEL_SYSTEM",
    "WORLD_MODEL_TEMPLATE",
    "POLICY_FIELDS",
    "WORLD_MODEL_FIELDS",
    "check_template",
    "fill",
    "render",
    "has_chat_template",
]

POLICY_SYSTEM = "You are an expert machine-learning research engineer who writes correct, efficient Python."

POLICY_TEMPLATE = (
    "Solve the following task by writing one complete, self-contained Python script.\n\n"
    "## Task\n{description}\n\n"
    "Answer with exactly one fenced code block that starts with ```python and ends with ```."
    " The script must run as is; put everything it needs inside the block."
)

WORLD_MODEL_SYSTEM = "You predict the outcome of running Python scripts without running them."

WORLD_MODEL_TEMPLATE = (
    "## Task\n{description}\n\n"
    "## Candidate script\n```python\n{solution}```\n\n"
    "Predict what happens when this script is run for the task above.\n"
    "Reply with exactly two lines:\n"
    "status: <ok | crash | timeout | oom>\n"
    "score: <the task's metric value as a number, or none>"
)

POLICY_FIELDS = {"description", "task_id"}
"""Fields a policy prompt template may use."""
WORLD_MODEL_FIELDS = {"description", "task_id", "solution"}
"""Fields a world-model prompt template may use."""


def check_template(template: str, *, allowed: set[str], required: set[str], what: str) -> str:
    """Reject templates with unknown or missing fields at construction, not mid-training."""
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise ValueError(
            f"{what} template is not a valid str.format string ({exc}); double literal braces as '{{{{' and '}}}}'"
        ) from exc
    unknown = fields - allowed
    if unknown:
        raise ValueError(
            f"{what} template uses unknown field(s) {sorted(unknown)}; allowed: {sorted(allowed)} "
            "(double literal braces as '{{' and '}}')"
        )
    missing = required - fields
    if missing:
        raise ValueError(f"{what} template must contain {sorted('{' + m + '}' for m in missing)}")
    return template


def fill(template: str, task: Task, solution: str | None = None) -> str:
    """Substitute the task (and script) into ``template``."""
    values: dict[str, Any] = {"description": task.description, "task_id": task.id}
    if solution is not None:
        values["solution"] = solution if solution.endswith("\n") else solution + "\n"
    return template.format(**values)


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render(
    tokenizer: Any,
    user_text: str,
    *,
    system: str | None = None,
    use_chat_template: bool | None = None,
    plain_suffix: str = "\n\n",
    chat_template_kwargs: dict[str, Any] | None = None,
) -> tuple[str, bool]:
    """The prompt text given to the model.

    :param use_chat_template: ``None`` = use it when the tokenizer has one; ``True`` =
        require it (error if missing); ``False`` = never.
    :param chat_template_kwargs: extra keyword arguments for ``apply_chat_template``
        (e.g. ``{"enable_thinking": False}`` for Qwen3 hybrid models).
    :return: ``(text, is_chat)``; chat-formatted text already holds the special tokens, so
        it must be tokenized with ``add_special_tokens=False``.
    """
    chat = has_chat_template(tokenizer) if use_chat_template is None else use_chat_template
    if chat:
        if not has_chat_template(tokenizer):
            raise ValueError(
                "use_chat_template=True but the tokenizer has no chat_template; set "
                "use_chat_template: null (auto) or false, or load an instruction-tuned model"
            )
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": user_text}
        ]
        text = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
        )
        return str(text), True
    head = f"{system}\n\n" if system else ""
    return head + user_text + plain_suffix, False

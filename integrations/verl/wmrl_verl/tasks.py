"""A dataset row's WMRL task: ``extra_info.task_id``, an id of the environment's tasks in the split
``extra_info.split`` (the WMRL config's ``rollout.task_split`` when the row names none; validation
rows name theirs, e.g. ``heldout``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wmrl_core.errors import ConfigError
from wmrl_core.types import Task

__all__ = ["TaskRef", "task_ref", "TaskIndex"]

TaskRef = tuple[str, str | None]
"""``(task_id, split)`` of a dataset row; ``split`` ``None`` for the default split."""


def task_ref(extra_info: Mapping[str, Any] | None) -> TaskRef:
    """``(task_id, split)`` out of a row's ``extra_info``."""
    info = extra_info or {}
    if "task_id" not in info:
        raise ConfigError("a dataset row has no extra_info.task_id: the wmrl integration needs it on every row")
    split = info.get("split")
    return str(info["task_id"]), None if split is None else str(split)


class TaskIndex:
    """The environment's tasks by split and id, each split read once on first use.

    :param environment: anything with ``tasks(split)``.
    :param default_split: the split of rows that name none.
    """

    def __init__(self, environment: Any, default_split: str) -> None:
        self.environment, self.default_split = environment, default_split
        self._by_split: dict[str, dict[str, Task]] = {}

    def __getitem__(self, ref: TaskRef) -> Task:
        task_id, split = ref
        split = split or self.default_split
        if split not in self._by_split:
            self._by_split[split] = {t.id: t for t in self.environment.tasks(split)}
        tasks = self._by_split[split]
        if task_id not in tasks:
            raise ConfigError(
                f"task_id {task_id!r} of a dataset row is not a task of the environment's {split!r} split; "
                "set extra_info.task_id to one of its ids (and extra_info.split to its split)"
            )
        return tasks[task_id]

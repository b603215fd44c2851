"""AutoResearch tasks: what a task is (:mod:`.task`), its metrics (:mod:`.task_metrics`), the
canonical text of class labels (:mod:`.labels`), the built-in suite (:mod:`.builtin_suite`) and
tasks described in YAML/JSON/CSV files (:mod:`.task_files`).

The task type and its helpers are importable from here (``from wmrl_autoresearch.tasks import
AutoResearchTask``), the name task plugins are told to use.
"""

from wmrl_autoresearch.tasks.task import (
    FEATURE_NAMES,
    N_FEATURES,
    SPLITS,
    AutoResearchTask,
    task_features,
    to_wmrl_task,
    write_visible_files,
)

__all__ = [
    "AutoResearchTask",
    "FEATURE_NAMES",
    "N_FEATURES",
    "SPLITS",
    "task_features",
    "to_wmrl_task",
    "write_visible_files",
]

"""AutoResearch tasks: what a task is (:mod:`.task`), its metrics (:mod:`.task_metrics`), the
canonical text of class labels (:mod:`.labels`), the built-in suite (:mod:`.builtin_suite`),
tasks described in YAML/JSON/CSV files (:mod:`.task_files`), and the real-data pool: packaged
datasets (:mod:`.sources`), how one becomes a task (:mod:`.recipe`), tasks whose data loads on
first use (:mod:`.deferred`) and the committed manifest (:mod:`.dataset_pool`, ``data/pool.json``);
the W / R / E family split of the compute-to-target benchmark (:mod:`.families`); MLE-bench's
layout of a competition (:mod:`.mlebench`) and a prepared competition as a task (:mod:`.competition_task`).

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

"""Turning a run into a score: the grader of predictions (:mod:`.grader`), a competition's
submission graded by its own grader (:mod:`.submission`), the WMRL outcome of
a run (:mod:`.outcomes`) and the reward extractor (:mod:`.rewards`). Metrics are part of a
task's definition and live in :mod:`wmrl_autoresearch.tasks.task_metrics`.
"""

"""Vetting packaged datasets into the AutoResearch task pool (``wmrl-autoresearch build-pool``).

:mod:`.rules` decides, for one dataset, the target, the columns kept and whether the task is
worth having (graded by :mod:`wmrl_autoresearch.grading.grader`, the code that grades
solutions); :mod:`.build` runs it over every packaged dataset, removes duplicates, assigns the
held-out split by family, drops a training task whose data a held-out task shares (judged by
content, :mod:`.content`) and writes the manifest that :mod:`wmrl_autoresearch.tasks.dataset_pool`
reads; :mod:`.competitions` vets prepared MLE-bench-format competitions the same way.
"""

#!/bin/bash
# apply the task-pool work onto the merged (restructured) tree of this worktree
set -e
W=/work/wt/taskpool; S=$W/scratch; P=$W/plugins/autoresearch/wmrl_autoresearch
cd $P
python3 $S/patch_task.py tasks/task.py
python3 $S/patch_builtin.py tasks/builtin_suite.py
python3 $S/patch_cli.py cli.py
python3 $S/patch_plugin.py plugin.py
cp $S/final/tasks/{sources,recipe,deferred,dataset_pool}.py tasks/
mkdir -p vetting tasks/data
cp $S/final/vetting/*.py vetting/
cp $S/final/test_ar_task_pool.py $W/plugins/autoresearch/tests/
python3 $S/patch_configs.py $W
python3 $S/patch_pyproject.py $W/plugins/autoresearch/pyproject.toml

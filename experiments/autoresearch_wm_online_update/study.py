"""The program world model's ranking of a task's unseen programs after learning from anchors."""

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_experiments(table):
    table.add(
        "wm-online-update",
        "experiments.autoresearch_wm_online_update.wm_online_update:main",
        description="program world model: within-task ranking of unseen programs after learning from anchors",
    )

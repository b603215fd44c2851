"""The component contracts as types: protocols, the outcome statuses, the component kinds.

Three tables that every other module reads instead of restating them:

* **Protocols** (:class:`Environment`, :class:`Policy`, :class:`WorldModel`,
  :class:`RewardExtractor`, and the optional capabilities) say which methods a component
  must have; ``wmrl_core.checkers`` checks objects against them and ``hookspecs.py``
  documents them. They are structural (``typing.Protocol``): a plugin never subclasses them.
* **Statuses** (:data:`STATUSES`): the one vocabulary of ``Outcome.status`` across domains,
  with what each means for the reward: *rewarded* statuses are the solution's doing (a score,
  or the reward extractor's failure reward); the others are not the solution's fault and
  give **no reward** (NaN; the rollout is dropped from the update, never rewarded 0).
* **Component kinds** (:data:`COMPONENT_KINDS`): each kind's registry table, registration
  hook, config key, protocol, and whether its factory is called with ``env=``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from wmrl_core.types import CostModel, Outcome, Rollouts, Task

if TYPE_CHECKING:
    import torch

__all__ = [
    "Environment",
    "Policy",
    "WorldModel",
    "RewardExtractor",
    "HasCost",
    "KnowsTrueReward",
    "SizesItsDeadline",
    "HasReferenceLogProbs",
    "HasEntropy",
    "SyncsAfterUpdate",
    "HasOptimizerParamGroups",
    "ReportsUpdateMetrics",
    "Closeable",
    "Stateful",
    "LearnsFromAnchors",
    "ScoresExecutions",
    "ScoresPartialExecutions",
    "required_methods",
    "StatusSpec",
    "STATUSES",
    "REWARDED_STATUSES",
    "check_status",
    "is_rewarded",
    "ComponentKind",
    "COMPONENT_KINDS",
    "component_kind",
]

# --------------------------------------------------------------------------- protocols


@runtime_checkable
class Environment(Protocol):
    """The real, expensive execution. Factory called as ``factory(**kwargs)``."""

    def tasks(self, split: str) -> list[Task]:
        """The tasks of a split: at least ``"train"``; ``"heldout"`` when the domain has one."""
        ...

    def execute(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        """Run each solution for real: one outcome per solution, in order; never raises for a
        bad solution (that is an outcome with a failure status)."""
        ...


@runtime_checkable
class Policy(Protocol):
    """Generates ``G`` solutions per task with log-probabilities; usually a ``torch.nn.Module``.
    Factory called as ``factory(env=env, **kwargs)``."""

    def generate(self, tasks: Sequence[Task], group_size: int) -> Rollouts:
        """``group_size`` samples per task, with detached per-token log-probabilities."""
        ...

    def log_probs(self, rollouts: Rollouts) -> torch.Tensor:
        """(N, T) differentiable log-probabilities of the same tokens under the current parameters."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> Any: ...


@runtime_checkable
class WorldModel(Protocol):
    """Cheap, batched predictor of an execution's outcome. Factory called as
    ``factory(env=env, **kwargs)``, plus ``policy=<the run's policy>`` when the factory has a
    parameter named ``policy`` (a world model that shares the policy's model or engine)."""

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome | float]:
        """One batched call: the predicted outcome (or bare score) of every solution, in order."""
        ...


@runtime_checkable
class RewardExtractor(Protocol):
    """Outcome (real or predicted) to reward. Factory called as ``factory(env=env, **kwargs)``."""

    def __call__(self, task: Task, outcome: Outcome) -> float | None:
        """The reward; ``None`` means no reward (NaN, dropped), never 0."""
        ...


# optional capabilities: the engine uses them when present


@runtime_checkable
class HasCost(Protocol):
    """A declared cost per call and item (seconds); without it a stage is charged wall time."""

    cost: CostModel | None


@runtime_checkable
class SizesItsDeadline(Protocol):
    """Environments and world models that know how long a call may take before it is hung
    (:func:`wmrl_core.waits.deadline_s`); ``math.inf``: no deadline."""

    def timeout_s(self, n_solutions: int) -> float: ...


@runtime_checkable
class KnowsTrueReward(Protocol):
    """Domains that know the truth (synthetic): feeds ``eval/true_reward`` for free."""

    def true_reward(self, task: Task, solution: Any) -> float: ...


@runtime_checkable
class HasReferenceLogProbs(Protocol):
    """Policies that compute the KL reference themselves (e.g. a LoRA policy with the adapter
    disabled); otherwise the trainer keeps a frozen copy."""

    def reference_log_probs(self, rollouts: Rollouts) -> torch.Tensor: ...


@runtime_checkable
class HasEntropy(Protocol):
    """Policies that know their exact per-token entropy: feeds ``policy/entropy`` and the
    entropy bonus ``grpo.entropy_coef`` (which needs it)."""

    def entropy(self, rollouts: Rollouts) -> torch.Tensor:
        """(N, T) entropy in nats of the distribution each token was drawn from, with grad."""
        ...


@runtime_checkable
class SyncsAfterUpdate(Protocol):
    """Called after each optimizer step (e.g. to push new weights into an inference engine)."""

    def after_update(self) -> None: ...


@runtime_checkable
class ReportsUpdateMetrics(Protocol):
    """Policies that report figures of their own after each update (logged as ``policy/<name>``)."""

    def update_metrics(
        self, rollouts: Rollouts, old_log_probs: torch.Tensor, new_log_probs: torch.Tensor
    ) -> dict[str, float]: ...


@runtime_checkable
class HasOptimizerParamGroups(Protocol):
    """Policies that choose Adam's parameter groups (e.g. another learning rate for an
    exploration parameter); each trainable parameter appears in exactly one group."""

    def optimizer_param_groups(self, lr: float) -> list[dict[str, Any]]: ...


@runtime_checkable
class Closeable(Protocol):
    """Releases containers, worker processes or engines at the end of a run."""

    def close(self) -> None: ...


@runtime_checkable
class Stateful(Protocol):
    """Environments and world models with state are checkpointed and restored exactly."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> Any: ...


@runtime_checkable
class LearnsFromAnchors(Protocol):
    """World models that keep learning from the real executions they are paid with."""

    def learn_from_anchors(self, tasks: Sequence[Task], solutions: Sequence[Any], outcomes: Sequence[Outcome]) -> None:
        """Called by the trainer once per step, right after the anchor groups are executed,
        with those tasks, solutions and real outcomes (every status: skip those that are not
        :func:`is_rewarded`). This step's predictions were made before, so an anchor never
        judges a prediction it taught; the next step's predictions may use it. State it learns
        belongs in ``state_dict()`` so that a resumed run predicts exactly as an uninterrupted one."""
        ...


@runtime_checkable
class ScoresExecutions(Protocol):
    """World models that read an *executed* trajectory (a progress scorer of real rollouts)
    instead of predicting the execution: they densify the reward, they save no execution."""

    def predict_from_outcomes(
        self, tasks: Sequence[Task], solutions: Sequence[Any], outcomes: Sequence[Outcome]
    ) -> list[Outcome | float]:
        """One batched call: a score for every executed solution, read from its real outcome
        (e.g. ``outcome.info["trajectory"]``), in order. The trainer then executes every group
        (all charged to ``execution``) and uses this instead of ``predict``; the scores are
        calibrated and fused against the real reward of the anchor groups like any prediction."""
        ...


@runtime_checkable
class ScoresPartialExecutions(Protocol):
    """World models that read executed trajectories (:class:`ScoresExecutions`) but need only part
    of each execution they score alone (e.g. the first half of an episode): they save execution."""

    def predict_from_outcomes(
        self, tasks: Sequence[Task], solutions: Sequence[Any], outcomes: Sequence[Outcome]
    ) -> list[Outcome | float]: ...

    def execute_for_scoring(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        """Execute the solutions of the groups that are *not* anchors only as far as this world model's
        score needs, with the environment it was made with, one outcome each. The trainer executes the
        anchor groups in full through the environment, charges both calls to ``execution`` (measured as
        any execution), and passes every outcome to ``predict_from_outcomes``: an anchor's outcome is
        its full execution, so that the world model scores it the way it scores the others. An
        environment with a declared ``cost`` is charged it for every rollout, cut or not (the
        declared cost is per execution); one charged by measurement pays what ran."""
        ...


def required_methods(protocol: type) -> tuple[str, ...]:
    """The methods a protocol requires, in definition order (``__call__`` included)."""
    names = [n for n, v in vars(protocol).items() if callable(v) and (not n.startswith("_") or n == "__call__")]
    return tuple(names)


# --------------------------------------------------------------------------- statuses


@dataclass(frozen=True)
class StatusSpec:
    """One outcome status.

    :param name: the value of ``Outcome.status``.
    :param rewarded: ``True`` when the outcome is the solution's doing and earns a reward
        (its score, or the extractor's failure reward); ``False`` when it is not the
        solution's fault: no reward (NaN, dropped), whatever the extractor says.
    :param meaning: what happened.
    """

    name: str
    rewarded: bool
    meaning: str


STATUSES: dict[str, StatusSpec] = {
    s.name: s
    for s in (
        StatusSpec("ok", True, "ran to the end and was graded; `score` is the domain's result"),
        StatusSpec("timeout", True, "used up its time budget (CPU time; or wall time that its CPU time explains)"),
        StatusSpec("oom", True, "killed by the memory limit"),
        StatusSpec("crashed", True, "failed while running (non-zero exit, exception, signal)"),
        StatusSpec("missing_output", True, "finished but produced nothing to grade"),
        StatusSpec(
            "invalid_output", True, "produced output that cannot be graded (wrong shape, NaN, unparsable, too large)"
        ),
        StatusSpec(
            "invalid_solution", True, "not a runnable solution at all (no script, wrong action shape); never executed"
        ),
        StatusSpec(
            "sandbox_error",
            False,
            "the infrastructure failed (engine down, simulator worker died); not the solution's fault",
        ),
        StatusSpec("no_prediction", False, "a world model gave no usable prediction (unparsable answer, NaN, error)"),
    )
}
"""Every ``Outcome.status`` a component may return, with its meaning."""

REWARDED_STATUSES = frozenset(name for name, spec in STATUSES.items() if spec.rewarded)


def check_status(status: str) -> str:
    """``status`` if it is in the vocabulary, else a ``ValueError`` that lists the known ones."""
    if status not in STATUSES:
        raise ValueError(
            f"unknown outcome status {status!r}; use one of {', '.join(STATUSES)} "
            "(wmrl_core.contracts.STATUSES says what each means)"
        )
    return status


def is_rewarded(status: str) -> bool:
    """Whether an outcome with this status earns a reward (see :data:`STATUSES`)."""
    return check_status(status) in REWARDED_STATUSES


# --------------------------------------------------------------------------- component kinds


@dataclass(frozen=True)
class ComponentKind:
    """One kind of component.

    :param kind: the name used in errors and ``wmrl plugins`` (``"world_model"``).
    :param table: the :class:`~wmrl_core.registry.Registry` attribute holding its specs.
    :param hook: the registration hook that fills that table.
    :param config_key: the config section naming it (``world_model.name``), if any.
    :param protocol: the interface its objects honour, if any.
    :param made_with_env: whether its factory is called with ``env=<the environment>``.
    :param description: one line for documentation.
    """

    kind: str
    table: str
    hook: str
    config_key: str | None
    protocol: type | None
    made_with_env: bool
    description: str


COMPONENT_KINDS: tuple[ComponentKind, ...] = (
    ComponentKind(
        "environment",
        "environments",
        "wmrl_register_environments",
        "environment",
        Environment,
        False,
        "the real, expensive execution that anchors training",
    ),
    ComponentKind(
        "task_set", "tasks", "wmrl_register_tasks", None, None, False, "extra tasks offered to an installed environment"
    ),
    ComponentKind(
        "policy",
        "policies",
        "wmrl_register_policies",
        "policy",
        Policy,
        True,
        "the model that generates G solutions per task",
    ),
    ComponentKind(
        "world_model",
        "world_models",
        "wmrl_register_world_models",
        "world_model",
        WorldModel,
        True,
        "the cheap, batched predictor of an execution's outcome",
    ),
    ComponentKind(
        "reward_extractor",
        "reward_extractors",
        "wmrl_register_reward_extractors",
        "reward",
        RewardExtractor,
        True,
        "outcome (real or predicted) to reward",
    ),
)
"""The one table of component kinds; the registry, the plugin manager and the CLI read it."""


def component_kind(kind: str) -> ComponentKind:
    """The :class:`ComponentKind` named ``kind``; a ``KeyError`` lists the known ones."""
    for spec in COMPONENT_KINDS:
        if spec.kind == kind:
            return spec
    raise KeyError(f"unknown component kind {kind!r}; known: {', '.join(k.kind for k in COMPONENT_KINDS)}")

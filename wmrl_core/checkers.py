"""Contract checks for plugin components (gymnasium's ``env_checker`` pattern).

A broken contract raises :class:`~wmrl_core.errors.ContractError` naming the component and
the missing piece; doubtful but legal behaviour only warns.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from wmrl_core.contracts import STATUSES, Environment, Policy, WorldModel, is_rewarded, required_methods
from wmrl_core.errors import ContractError
from wmrl_core.ledger import MEASURED_COST_KEY
from wmrl_core.types import CostModel, Outcome, Rollouts, Task

__all__ = [
    "check_environment",
    "check_policy",
    "check_world_model",
    "check_reward_extractor",
    "check_rollouts",
    "check_rollout_counts",
    "check_group_ids",
    "check_outcomes",
    "check_ok_scores",
    "check_tasks",
    "check_log_probs",
    "ON_POLICY_TOLERANCE_NATS",
]

ON_POLICY_TOLERANCE_NATS = 0.1
"""Mean |log_probs - old_log_probs| per sampled token, in nats, above which :func:`check_log_probs`
warns on freshly generated rollouts: a probability ratio off by about 10%."""


def _require_methods(kind: str, obj: Any, protocol: type) -> None:
    missing = [n for n in required_methods(protocol) if not callable(getattr(obj, n, None))]
    if missing:
        raise ContractError(
            f"{kind} {type(obj).__name__} lacks {', '.join(missing)}; see wmrl_core.contracts.{protocol.__name__}"
        )


def _check_cost(kind: str, obj: Any) -> None:
    cost = getattr(obj, "cost", None)
    if cost is not None and not isinstance(cost, CostModel):
        raise ContractError(
            f"{kind} {type(obj).__name__}.cost must be a wmrl_core.types.CostModel or None, got {type(cost).__name__}"
        )


def check_environment(
    env: Any,
    solutions: Sequence[Any] | None = None,
    *,
    policy: Any = None,
    reward: Any = None,
    split: str = "train",
    n_solutions: int = 2,
) -> list[Outcome] | None:
    """Check an environment against its contract; with a source of solutions, by running it, the
    way gymnasium's ``check_env`` runs ``reset`` and ``step``.

    Without ``solutions`` or ``policy`` only the interface is checked (the methods, ``cost``): what
    the engine runs when it builds a run's components, where executing would spend real execution.
    With one of them:

    1. ``tasks(split)`` must return a non-empty list of :class:`~wmrl_core.types.Task` with unique
       ids (:func:`check_tasks`; a second call giving other ids only warns: seeds and checkpoints key on
       them);
    2. the split's first task is executed, ``execute([task] * n, solutions)``, on ``solutions``
       or on ``policy.generate([task], n_solutions).solutions``; raising is a contract violation
       (a bad solution is an outcome with a failure status);
    3. the outcomes must keep the contract: one :class:`~wmrl_core.types.Outcome` per solution, a
       status from ``wmrl_core.contracts.STATUSES``, a score that is a number or ``None`` and
       finite when the status is ``ok``, ``info`` a dict whose measured cost
       (``info["cost_s"]``, seconds), if any, is finite and >= 0;
    4. with ``reward`` (the run's reward extractor), the reward of each outcome as the engine
       computes it (``None`` for the statuses that give none) must be finite, or ``None``/NaN
       only with a status other than ``ok``.

    Every outcome having a status that gives no reward (``sandbox_error``: the infrastructure
    failed) warns, since nothing about the solutions was checked then.

    :param solutions: solutions of one task to execute (at least one).
    :param policy: a policy whose ``generate`` makes them when ``solutions`` is not given.
    :param reward: a reward extractor, ``reward(task, outcome) -> float | None``.
    :param n_solutions: how many solutions ``policy`` generates.
    :return: the outcomes of the executed solutions; ``None`` without a source of solutions.
    """
    _require_methods("environment", env, Environment)
    _check_cost("environment", env)
    if solutions is None and policy is None:
        return None
    who = f"environment {type(env).__name__}"
    tasks = check_tasks(who, split, env.tasks(split))
    if not tasks:
        raise ContractError(f"{who}: tasks({split!r}) returned no tasks; the {split!r} split must hold at least one")
    ids = [t.id for t in tasks]
    if [t.id for t in env.tasks(split)] != ids:
        warnings.warn(f"{who}: two calls of tasks({split!r}) returned different task ids", stacklevel=2)
    task = tasks[0]
    if solutions is None:
        with torch.no_grad():
            rollouts = policy.generate([task], n_solutions)
        check_rollout_counts(rollouts, 1, n_solutions, f"policy {type(policy).__name__}")
        solutions = list(rollouts.solutions)
    solutions = list(solutions)
    if not solutions:
        raise ValueError("check_environment needs at least one solution to execute")
    try:
        outcomes = env.execute([task] * len(solutions), solutions)
    except Exception as exc:
        raise ContractError(
            f"{who}: execute() raised {type(exc).__name__}: {exc} on {len(solutions)} solution(s) of task "
            f"{task.id!r}; it must return one Outcome per solution, a failure status for a bad one"
        ) from exc
    outcomes = check_outcomes(who, "execute", outcomes, len(solutions))
    for i, outcome in enumerate(outcomes):
        _check_executed_outcome(who, i, outcome)
        if reward is not None:
            _check_reward(who, i, outcome, reward(task, outcome) if is_rewarded(outcome.status) else None)
    if not any(is_rewarded(o.status) for o in outcomes):
        warnings.warn(
            f"{who}: every outcome has a status that gives no reward ({sorted({o.status for o in outcomes})}): the "
            f"infrastructure failed, so the solutions were not checked",
            stacklevel=2,
        )
    return outcomes


def _is_number(value: Any) -> bool:
    """int, float, numpy scalars, one-element torch tensors: what ``float()`` converts (not a
    string, nor a numpy array with a dimension, which newer numpy refuses to convert)."""
    if not hasattr(value, "__float__"):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _check_executed_outcome(who: str, i: int, outcome: Any) -> None:
    """What an executed outcome owes beyond :func:`check_outcomes` (which also admits the bare
    numbers a world model may return)."""
    if not isinstance(outcome, Outcome):
        raise ContractError(
            f"{who}: execute() returned {type(outcome).__name__} {outcome!r:.60} for solution {i}; an environment "
            f"returns wmrl_core.types.Outcome objects (bare numbers are for world models)"
        )
    score = outcome.score
    if outcome.status == "ok" and not (score is not None and _is_number(score) and math.isfinite(float(score))):
        raise ContractError(
            f"{who}: execute() returned Outcome(status='ok', score={score!r}) for solution {i}; an ok outcome "
            f"carries its finite score (a run that cannot be graded is 'missing_output' or 'invalid_output')"
        )
    if not isinstance(outcome.info, dict):
        raise ContractError(f"{who}: Outcome.info of solution {i} is {type(outcome.info).__name__}; it must be a dict")
    cost = outcome.info.get(MEASURED_COST_KEY)
    if cost is not None and not (_is_number(cost) and math.isfinite(float(cost)) and float(cost) >= 0):
        raise ContractError(
            f"{who}: Outcome.info[{MEASURED_COST_KEY!r}] of solution {i} is {cost!r}; the measured cost is a finite "
            f"number of seconds >= 0 (or leave it out and the call's wall time is charged)"
        )


def _check_reward(who: str, i: int, outcome: Outcome, value: Any) -> None:
    if value is not None and not _is_number(value):
        raise ContractError(
            f"reward extractor on {who}'s outcome {i} returned {type(value).__name__} {value!r:.60}; return a "
            f"float or None (no reward)"
        )
    r = math.nan if value is None else float(value)
    if math.isinf(r) or (math.isnan(r) and outcome.status == "ok"):
        raise ContractError(
            f"reward extractor on {who}'s outcome {i} (status {outcome.status!r}, score {outcome.score!r}) returned "
            f"{value!r}; a reward is finite, and None or NaN (no reward) only for a status other than 'ok'"
        )


def check_policy(policy: Any) -> None:
    _require_methods("policy", policy, Policy)
    _check_cost("policy", policy)
    if not any(p.requires_grad for p in policy.parameters()):
        raise ContractError(f"policy {type(policy).__name__} has no trainable parameters; GRPO has nothing to update")


def check_world_model(world_model: Any) -> None:
    _require_methods("world model", world_model, WorldModel)
    _check_cost("world model", world_model)


def check_reward_extractor(extractor: Any) -> None:
    if not callable(extractor):
        raise ContractError(f"reward extractor {type(extractor).__name__} must be callable as extractor(task, outcome)")


def check_rollout_counts(rollouts: Any, n_tasks: int, group_size: int, who: str = "policy") -> None:
    """What evaluation relies on in a policy's ``generate`` output: one task and one solution per rollout."""
    n = n_tasks * group_size
    solutions: Any = getattr(rollouts, "solutions", None)
    tasks: Any = getattr(rollouts, "tasks", None)
    if not (hasattr(solutions, "__len__") and hasattr(tasks, "__len__")):
        raise ContractError(
            f"{who}: generate() must return wmrl_core.types.Rollouts (with tasks and solutions), got {type(rollouts).__name__}"
        )
    if len(solutions) != n or len(tasks) != n:
        raise ContractError(
            f"{who}: generate() returned {len(solutions)} solutions and {len(tasks)} tasks for {n_tasks} tasks x "
            f"{group_size}; expected {n} of each (group_size solutions per task, tasks repeated in the same order)"
        )


def check_rollouts(
    rollouts: Any, n_tasks: int, group_size: int, who: str = "policy", tasks: Sequence[Task] | None = None
) -> None:
    """What the trainer relies on in a policy's ``generate`` output: the counts, a
    :class:`~wmrl_core.types.Task` per row, the group ids (:func:`check_group_ids`) and the (N, T)
    log-probability and mask tensors, ``old_log_probs`` finite where ``mask`` is 1.

    :param tasks: the tasks ``generate`` was given, when known: then each of them must be one group's task.
    """
    if not isinstance(rollouts, Rollouts):
        raise ContractError(f"{who}: generate() must return wmrl_core.types.Rollouts, got {type(rollouts).__name__}")
    n = n_tasks * group_size
    check_rollout_counts(rollouts, n_tasks, group_size, who)
    wrong = [t for t in rollouts.tasks if not isinstance(t, Task)]
    if wrong:  # else the world model and the environment fail on them, and are blamed
        raise ContractError(
            f"{who}: generate() returned Rollouts.tasks holding {type(wrong[0]).__name__} items ({wrong[0]!r:.60}); "
            f"each row's task is one of the Task objects given to generate, e.g. "
            f"[t for t in tasks for _ in range(group_size)]"
        )
    check_group_ids(rollouts, n_tasks, group_size, who, tasks)
    lp, mask = rollouts.old_log_probs, rollouts.mask
    if (
        not (isinstance(lp, torch.Tensor) and isinstance(mask, torch.Tensor))
        or lp.shape != mask.shape
        or lp.ndim != 2
        or lp.shape[0] != n
    ):
        raise ContractError(
            f"{who}: generate() must give old_log_probs and mask as tensors of shape ({n}, T) (rollouts, tokens); got {getattr(lp, 'shape', None)} and {getattr(mask, 'shape', None)}"
        )
    sampled = mask.detach().to(lp.device) > 0
    bad = sampled & ~torch.isfinite(lp.detach())
    if bad.any():  # the first update would turn every parameter into NaN
        raise ContractError(
            f"{who}: generate() returned old_log_probs NaN or inf at {int(bad.sum())} of {int(sampled.sum())} "
            f"sampled tokens (first in rollout {int(bad.any(dim=-1).nonzero()[0, 0])}); the log-probability of a "
            f"sampled token is finite. Look in generate() for a log of 0, a softmax over -inf or NaN parameters"
        )
    if lp.requires_grad:
        warnings.warn("old_log_probs requires grad; generate should run under torch.no_grad()", stacklevel=2)


def check_group_ids(
    rollouts: Rollouts, n_tasks: int, group_size: int, who: str = "policy", tasks: Sequence[Task] | None = None
) -> None:
    """``rollouts.group_ids`` against ``rollouts.tasks``: N integers in ``0..B-1``, each id held by
    ``group_size`` rows that share one task (rows need not be contiguous), and, when ``tasks`` (the
    B tasks given to ``generate``) is known, each of them the task of one group. A wrong id would
    index the anchor mask out of range, or silently train one group's advantages on several tasks."""
    n = n_tasks * group_size
    ids = np.asarray(rollouts.group_ids)
    fix = (
        f"give the G={group_size} rows of the i-th task the id i (0..{n_tasks - 1}), e.g. "
        f"np.repeat(np.arange(len(tasks)), group_size)"
    )
    head = f"{who}: generate() returned group_ids"
    if ids.shape != (n,):
        raise ContractError(f"{head} of shape {ids.shape} for {n_tasks} tasks x {group_size}; expected ({n},): {fix}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise ContractError(f"{head} of dtype {ids.dtype}; they are integers 0..{n_tasks - 1}: {fix}")
    outside = sorted({int(g) for g in ids if not 0 <= g < n_tasks})
    if outside:
        raise ContractError(f"{head} {outside[:3]} outside 0..{n_tasks - 1} ({n_tasks} tasks): {fix}")
    sizes = np.bincount(ids, minlength=n_tasks)
    uneven = np.flatnonzero(sizes != group_size)
    if uneven.size:
        g = int(uneven[0])
        raise ContractError(
            f"{head} where id {g} holds {sizes[g]} rows, not G={group_size} (one group of G rows per task): {fix}"
        )
    group_task: dict[int, Any] = {}
    for g, task in zip(ids.tolist(), rollouts.tasks):
        if group_task.setdefault(g, _task_key(task)) != _task_key(task):
            raise ContractError(
                f"{head} whose group {g} holds rows of tasks {group_task[g]!r} and "
                f"{_task_key(task)!r}; "
                f"the rows of one group share one task: {fix}"
            )
    given = Counter(_task_key(t) for t in tasks) if tasks is not None else None
    if given is not None and Counter(group_task.values()) != given:
        raise ContractError(
            f"{head} whose groups' tasks {sorted(group_task.values())[:4]} are not the "
            f"{n_tasks} tasks it was given {sorted(given.elements())[:4]}; each task given is one group: {fix}"
        )


def _task_key(task: Any) -> str:
    return str(getattr(task, "id", task))


def check_outcomes(who: str, method: str, outcomes: Any, n_solutions: int) -> list[Any]:
    """What the trainer relies on in an environment's ``execute`` or a world model's ``predict``
    output: a sequence of one outcome per solution, each an :class:`~wmrl_core.types.Outcome`
    with a status from ``wmrl_core.contracts.STATUSES``, a number or ``None``.

    :param who: the component, as named in messages (``"environment `sql`"``).
    :param method: the method that returned ``outcomes`` (``"execute"``).
    :return: ``outcomes`` as a list.
    """
    if isinstance(outcomes, (str, bytes, dict)) or not hasattr(outcomes, "__len__"):
        raise ContractError(
            f"{who}: {method}() returned {type(outcomes).__name__}; it must return a list with one "
            f"Outcome (or number) per solution, in order ({n_solutions} here)"
        )
    outcomes = list(outcomes)
    if len(outcomes) != n_solutions:
        noun = "outcomes" if method == "execute" else "predictions"
        raise ContractError(
            f"{who} returned {len(outcomes)} {noun} for {n_solutions} solutions; {method}() must return one "
            f"per solution, in order (a failure is an Outcome with a failure status, not a missing item)"
        )
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, Outcome):
            if outcome.status not in STATUSES:
                raise ContractError(
                    f"{who}: {method}() returned Outcome(status={outcome.status!r}) for solution {i}; use one of "
                    f"{', '.join(STATUSES)} (wmrl_core.contracts.STATUSES says what each means)"
                )
            score = outcome.score
            if score is not None and not _is_number(score):
                raise ContractError(
                    f"{who}: {method}() returned Outcome(score={score!r:.60}) for solution {i}; the score must be "
                    f"one number (float(score) works) or None"
                )
        elif outcome is not None and not _is_number(outcome):
            raise ContractError(
                f"{who}: {method}() returned {type(outcome).__name__} {outcome!r:.60} for solution {i}; return an "
                f"Outcome, one number (float(x) works) or None per solution"
            )
    return outcomes


def check_ok_scores(who: str, outcomes: Sequence[Any]) -> None:
    """What the trainer relies on in an environment's outcomes beyond :func:`check_outcomes`: an
    ``ok`` outcome (or a bare number) carries a finite score. NaN there is not a missing reward but
    a broken grader: dropping it silently would train on nothing, so the step refuses it."""
    bad = [
        i
        for i, o in enumerate(outcomes)
        if o is not None
        and (o.status == "ok" if isinstance(o, Outcome) else True)
        and not _finite(o.score if isinstance(o, Outcome) else o)
    ]
    if bad:
        first = outcomes[bad[0]]
        score = first.score if isinstance(first, Outcome) else first
        raise ContractError(
            f"{who}: execute() returned Outcome(status='ok', score={score!r}) for {len(bad)} of {len(outcomes)} "
            f"solutions (first: solution {bad[0]}); an ok outcome carries its finite score, so the step is refused "
            f"rather than trained on no reward. Fix the environment's grading, or give a solution that cannot be "
            f"graded the status 'invalid_output' or 'missing_output'"
        )


def _finite(value: Any) -> bool:
    return value is not None and _is_number(value) and math.isfinite(float(value))


def check_tasks(who: str, split: str, tasks: Any) -> list[Task]:
    """What an environment's ``tasks(split)`` must return: a list of :class:`~wmrl_core.types.Task`
    with unique ids."""
    if isinstance(tasks, (str, bytes, dict)) or not hasattr(tasks, "__iter__"):
        raise ContractError(
            f"{who}: tasks({split!r}) returned {type(tasks).__name__}; return a list of wmrl_core.types.Task"
        )
    tasks = list(tasks)
    wrong = [t for t in tasks if not isinstance(t, Task)]
    if wrong:
        raise ContractError(
            f"{who}: tasks({split!r}) returned {type(wrong[0]).__name__} items ({wrong[0]!r:.60}); return a list of "
            f"wmrl_core.types.Task (Task(id=..., description=..., features=..., data=...))"
        )
    repeated = sorted(i for i, n in Counter(t.id for t in tasks).items() if n > 1)
    if repeated:  # two tasks under one id would share seeds, cached executions and group checks
        raise ContractError(
            f"{who}: tasks({split!r}) returned {len(tasks)} tasks with repeated ids {repeated[:3]}; a task id is its "
            f"unique, stable name (seeds, logs, checkpoints and the execution cache key on it): give each task an id "
            f"of its own"
        )
    return tasks


def check_log_probs(who: str, log_probs: Any, rollouts: Rollouts) -> None:
    """What a policy's ``log_probs(rollouts)`` must return: a tensor shaped like ``old_log_probs``
    that the loss can differentiate (call it with grad enabled), finite at every sampled token
    (``mask`` 1). On ``rollouts`` that ``generate`` has just returned (what the trainer passes, before
    any update) it must also agree with ``old_log_probs``: a mean gap above
    :data:`ON_POLICY_TOLERANCE_NATS` warns (an inference engine's rounding stays below it; ``-log p``
    or ``p`` instead of ``log p`` is far above)."""
    if not isinstance(log_probs, torch.Tensor):
        raise ContractError(
            f"{who}: log_probs() returned {type(log_probs).__name__}; return a torch.Tensor of shape "
            f"{tuple(rollouts.old_log_probs.shape)} (like old_log_probs), differentiable in the policy's parameters"
        )
    if log_probs.shape != rollouts.old_log_probs.shape:
        raise ContractError(
            f"{who}: log_probs() returned shape {tuple(log_probs.shape)}, but generate() gave old_log_probs of shape "
            f"{tuple(rollouts.old_log_probs.shape)}; both are (rollouts, tokens) over the same tokens"
        )
    sampled = rollouts.mask.to(log_probs.device) > 0
    # a policy may return a constant where nothing was sampled yet (no token has mask 1): no loss reaches it
    if not log_probs.requires_grad and bool(sampled.any()):
        raise ContractError(
            f"{who}: log_probs() returned a tensor without grad (requires_grad=False), so the loss cannot reach the "
            f"policy's parameters; compute it from the parameters without torch.no_grad(), .detach(), .item() or "
            f"numpy (only generate() runs under no_grad)"
        )
    bad = sampled & ~torch.isfinite(log_probs.detach())
    if bad.any():
        first = int(bad.any(dim=-1).nonzero()[0, 0]) if bad.ndim > 1 else int(bad.nonzero()[0, 0])
        raise ContractError(
            f"{who}: log_probs() returned NaN or inf at {int(bad.sum())} of {int(sampled.sum())} sampled tokens "
            f"(first in rollout {first}); a sampled token has a finite log-probability. Look in log_probs() for a "
            f"log of 0, a softmax over -inf or NaN parameters"
        )
    gap = (log_probs.detach().double() - rollouts.old_log_probs.detach().to(log_probs.device).double()).abs()[sampled]
    if gap.numel() and float(gap.mean()) > ON_POLICY_TOLERANCE_NATS:
        warnings.warn(
            f"{who}: log_probs() and generate()'s old_log_probs differ by {float(gap.mean()):.3g} nats per sampled "
            f"token on average (largest {float(gap.max()):.3g}) on rollouts that generate() has just returned, "
            f"before any update, where both are the log-probabilities of the same tokens under the same parameters; "
            f"GRPO's ratio exp(log_probs - old_log_probs) is then wrong from the first step. Check that both return "
            f"log p of the sampled token (not -log p, p or another token's), with the same temperature and no "
            f"dropout",
            stacklevel=2,
        )

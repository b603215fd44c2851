"""The WMRL training loop, top to bottom.

Per step (the one numbering of the loop; code comments, ``wmrl_core/step.py`` and the docs use it):

1. **rollouts**: sample B tasks of ``rollout.task_split``; the policy generates G rollouts per task.
2. **anchors**: the anchor sampler marks ``max(anchors.min_groups, round(ρB))`` groups, seeded by ``(seed, step)``.
3. **world model**: the world model scores every rollout in one batched call.
4. **execution**: the environment executes the anchor groups; a ``learn_from_anchors`` world model learns from them.
5. **rewards**: the reward extractor turns each outcome, real or predicted, into a reward (missing: NaN, never 0).
6. **calibration**: the map fit on earlier steps' anchor pairs calibrates world-model rewards (then adds this step's).
7. **fusion**: group advantages per stream; the fuser (``fusion.method``, ``wmrl_core/fusion/``) combines them.
8. **update**: ``grpo.epochs`` × ``grpo.minibatches`` optimizer steps on the fused GRPO loss, then the step's metrics record.

Between steps: an evaluation every ``eval.every`` steps and a checkpoint every ``checkpoint.every``
(:meth:`~wmrl_core.step.TrainState.state_dict`). ``mode`` switches the same loop between ``real``
(GRPO, every group executed), ``world_model`` (no execution, raw predictions) and ``wmrl``.

:func:`train` is setup (components, :class:`~wmrl_core.step.TrainState`, resume), then per step
step 1 -> :func:`score_step` (steps 2-5) -> :func:`~wmrl_core.step.update_step` (steps 6-8) ->
evaluation and checkpoint, then the summary.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wmrl_core import checkers
from wmrl_core.checkpoint import (
    CheckpointError,
    check_resume,
    has_checkpoint,
    load_checkpoint,
    move_run_aside,
    run_record,
    save_checkpoint,
)
from wmrl_core.components import Components, make_components
from wmrl_core.config import TrainConfig, to_yaml
from wmrl_core.contracts import (
    HasEntropy,
    KnowsTrueReward,
    LearnsFromAnchors,
    ScoresExecutions,
    ScoresPartialExecutions,
    SizesItsDeadline,
    is_rewarded,
)
from wmrl_core.errors import ComponentError, ConfigError, TrainedOnNothingError, WMRLError
from wmrl_core.experiments.stats import stratified_standard_error
from wmrl_core.faults import CallTimedOut, StepFaults, atomic_write_text, call_with_deadline, raise_if_disk_full
from wmrl_core.fusion.value import value_summary, world_model_earned
from wmrl_core.ledger import measured_cost_s
from wmrl_core.metrics import MetricsWriter, nanmean, read_metrics, strict_json
from wmrl_core.plots import plot_run
from wmrl_core.plugins import build_registry, get_plugin_manager
from wmrl_core.progress import TrainingProgress
from wmrl_core.run_lock import run_dir_lock
from wmrl_core.step import ScoredStep, TrainState, update_step
from wmrl_core.types import Outcome, Rollouts, Task, as_outcome
from wmrl_core.waits import DEFAULT_EXECUTE_TIMEOUT_S, deadline_s, heartbeat

__all__ = [
    "train",
    "score_step",
    "extract_rewards",
    "evaluate",
    "evaluation_seed",
    "stratified_standard_error",
    "evenly_spaced",
]


def _who(c: Any, section: str) -> str:
    """How messages name a run's component (``Components.who``; a plain namespace of components too)."""
    who = getattr(c, "who", None)
    return who(section) if callable(who) else section.replace("_", " ")


def notice(message: str) -> None:
    """A line for the person running training, on stderr (stdout stays the run's results)."""
    print(f"wmrl: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def component_call(who: str, method: str, when: str = "") -> Iterator[None]:
    """Turn an exception raised by a component's ``method`` into a :class:`ComponentError` that
    names the component, the method and when it happened (a WMRL error passes unchanged)."""
    try:
        yield
    except WMRLError:
        raise
    except Exception as exc:
        raise ComponentError(
            f"{who} raised {type(exc).__name__} in {method}(){f' {when}' if when else ''}: {_first_line(exc)}. "
            f"This is an error in that component (its plugin), not in the run's settings"
        ) from exc


def _first_line(exc: BaseException, limit: int = 300) -> str:
    """The exception's message cut to its first line and ``limit`` characters (``--debug`` prints it whole)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    cut = len(line) > limit or line != text
    return (line[:limit].rstrip() + " …") if cut else line


def execute(c: Any, tasks: Sequence[Task], solutions: Sequence[Any], when: str) -> list[Any]:
    """``c.environment.execute(tasks, solutions)``, checked (one outcome per solution, known
    statuses, a finite score when ``ok``), within its deadline (:func:`wmrl_core.waits.deadline_s`)
    and with a progress line while it runs; a raise or a hang is a :class:`ComponentError`
    naming the environment."""
    who = _who(c, "environment")
    configured = getattr(c, "execute_timeout_s", None)
    timeout_s = deadline_s(configured, c.environment, len(solutions), DEFAULT_EXECUTE_TIMEOUT_S)
    what = f"{who} execute() of {len(solutions)} solutions {when}"
    grad_enabled = torch.is_grad_enabled()  # thread-local: carried onto the thread that runs the call

    def call() -> Any:
        with torch.set_grad_enabled(grad_enabled):
            return c.environment.execute(tasks, solutions)

    with component_call(who, "execute", when), heartbeat(what, getattr(c, "heartbeat_s", 0.0), timeout_s):
        try:
            outcomes = call_with_deadline(call, timeout_s)
        except CallTimedOut:
            source = (
                "environment.execute_timeout_s"
                if configured is not None
                else "the environment's timeout_s()"
                if isinstance(c.environment, SizesItsDeadline)
                else "the default deadline"
            )
            raise ComponentError(
                f"{who}: execute() did not return within {timeout_s:g} s ({source}) {when} "
                f"({len(solutions)} solutions); the call is abandoned. Make the environment enforce a per-solution "
                f"limit, or set environment.execute_timeout_s (seconds, or .inf for no deadline)"
            ) from None
    outcomes = checkers.check_outcomes(who, "execute", outcomes, len(solutions))
    checkers.check_ok_scores(who, outcomes)
    return outcomes


def extract_rewards(reward_fn: Any, tasks: Sequence[Task], outcomes: Sequence[Outcome | float]) -> np.ndarray:
    """Rewards as float64; statuses that give no reward (``wmrl_core.contracts.STATUSES``),
    ``None`` and non-finite values become NaN (never 0)."""
    values = []
    for task, outcome in zip(tasks, outcomes, strict=True):
        outcome = as_outcome(outcome)
        r = reward_fn(task, outcome) if is_rewarded(outcome.status) else None
        values.append(float(r) if r is not None and math.isfinite(r) else math.nan)
    return np.asarray(values, dtype=np.float64)


def evaluation_seed(seed: int, step: int, common_random_numbers: bool = False) -> int:
    """Sampling seed of the evaluation at ``step`` of a run with ``seed``: ``seed·100003 + step``,
    or ``seed·100003`` at every step with common random numbers (``eval.common_random_numbers``),
    so that evaluations of one seed share their draws."""
    return seed * 100003 + (0 if common_random_numbers else step)


@torch.no_grad()
def evaluate(c: Components, tasks: Sequence[Task], samples_per_task: int, seed: int) -> dict[str, float]:
    """Mean reward of the current policy on ``tasks``: the known truth when the environment
    has ``true_reward`` (free), else real execution (charged to ``eval/execution_s``, not to
    training compute). Sampling uses its own seed so evaluation leaves training's RNG alone."""
    when = f"during the evaluation (seed {seed})"
    waiting = f"{_who(c, 'policy')} generate() of {len(tasks)} x {samples_per_task} {when}"
    with (
        torch.random.fork_rng(),
        component_call(_who(c, "policy"), "generate", when),
        heartbeat(waiting, getattr(c, "heartbeat_s", 0.0), None),
    ):
        torch.manual_seed(seed)
        rollouts = c.policy.generate(list(tasks), samples_per_task)
    checkers.check_rollout_counts(rollouts, len(tasks), samples_per_task, _who(c, "policy"))
    if isinstance(c.environment, KnowsTrueReward):
        with component_call(_who(c, "environment"), "true_reward", when):
            truth = [float(c.environment.true_reward(t, s)) for t, s in zip(rollouts.tasks, rollouts.solutions)]
        return {
            "eval/true_reward": float(np.mean(truth)),
            "eval/true_reward_se": stratified_standard_error(truth, [t.id for t in rollouts.tasks]),
        }
    start = time.perf_counter()
    outcomes = execute(c, rollouts.tasks, rollouts.solutions, when)
    guard = StepFaults()  # an extractor that raises loses that reward, not the evaluation
    rewards = guard.rewards(c.reward, rollouts.tasks, outcomes)
    return {
        "eval/reward": nanmean(rewards),
        "eval/reward_se": stratified_standard_error(rewards, [t.id for t in rollouts.tasks]),
        "eval/execution_s": time.perf_counter() - start,
        "eval/ok_fraction": float(np.mean([as_outcome(o).ok for o in outcomes])),
        "eval/reward_errors": guard.metrics()["faults/reward_errors"],
    }


def _truncate_anchor_pairs(path: Path, after_step: int) -> None:
    """Keep the anchor-pair lines of steps ``<= after_step`` (none for a fresh run)."""
    kept = []
    if after_step > 0 and path.exists():
        kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= after_step]
    atomic_write_text(path, "".join(line + "\n" for line in kept), "anchor pairs")


def evenly_spaced(items: Sequence[Any], n: int | None) -> list[Any]:
    """``n`` items at indices :math:`\\operatorname{round}(i (N-1)/(n-1))`, :math:`i = 0..n-1`
    (first and last included; all ``N`` items when ``n`` is ``None`` or ``>= N``): a fixed
    subset that spans the whole order, e.g. every family of a split listed family by family."""
    items = list(items)
    if n is None or n >= len(items):
        return items
    if n == 1:
        return items[:1]
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


CONVENTIONAL_SPLITS = ("train", "heldout", "validation", "val", "test")
"""Split names probed to list an environment's splits when it does not declare ``splits``."""


def known_splits(env: Any) -> list[str]:
    """The environment's split names: its ``splits`` attribute (a sequence, or a method returning
    one) when it has one, else those of :data:`CONVENTIONAL_SPLITS` its ``tasks`` accepts."""
    declared = getattr(env, "splits", None)
    if callable(declared):
        declared = declared()
    if declared is not None and not isinstance(declared, str):
        return [str(s) for s in declared]
    found = []
    for name in CONVENTIONAL_SPLITS:
        try:
            env.tasks(name)
        except Exception:
            continue
        found.append(name)
    return found


def split_tasks(c: Components, split: str, key: str) -> list[Task]:
    """The tasks of ``split`` (the value of config ``key``). A split the environment rejects (it
    raises ``ValueError``/``KeyError``) or that has no tasks is a :class:`ConfigError` listing its
    splits."""
    who = _who(c, "environment")
    problem = ""
    with component_call(who, "tasks", f"for {key}={split!r}"):
        try:
            tasks = checkers.check_tasks(who, split, c.environment.tasks(split))
        except (ValueError, KeyError) as exc:  # how environments say "no such split"
            tasks, problem = [], f"it says: {str(exc).strip(chr(39))}"
    if tasks:
        return tasks
    splits = known_splits(c.environment)
    raise ConfigError(
        f"{key}={split!r}: {who} has no tasks in that split ({problem or 'it returned none'}). "
        f"Its splits: {', '.join(splits) or 'none found'}; set {key} to one of them"
    )


def _eval_tasks(c: Components, split: str, max_tasks: int | None = None) -> tuple[str, list[Task]]:
    """The evaluated split and its tasks; only the default ``heldout`` falls back to ``train``."""
    try:
        return split, evenly_spaced(split_tasks(c, split, "eval.split"), max_tasks)
    except ConfigError:
        if split != "heldout":
            raise
        return "train", evenly_spaced(split_tasks(c, "train", "eval.split"), max_tasks)


def score_step(c: Components, state: TrainState, rollouts: Rollouts, B: int, step: int) -> ScoredStep:
    """Steps 2-5 of the loop: pick the anchor groups among the ``B`` groups, score every rollout
    with the world model in one batched call, execute the anchor groups for real (and hand them
    to a world model with ``learn_from_anchors``), turn outcomes into rewards; compute is charged
    to the ledger.

    A world model that reads executed trajectories (``predict_from_outcomes``) needs every group
    executed: then all groups run for real (charged to ``execution``), the world model scores
    every rollout from its outcome, and only the anchor groups keep their real reward. One that
    needs only part of each execution (``execute_for_scoring``) executes the other groups itself,
    as far as it needs, charged to ``execution`` like the anchors' full executions."""
    ledger = state.ledger
    group_ids = np.asarray(rollouts.group_ids)
    n = len(rollouts)

    # 2. anchors: whole groups executed for real
    anchor_groups = state.anchor_sampler.sample(B, step)
    is_anchor = anchor_groups[group_ids]
    anchor_idx = np.flatnonzero(is_anchor)
    reads_executions = isinstance(c.world_model, ScoresExecutions)
    executed_idx = np.arange(n) if reads_executions else anchor_idx

    # 3. the world model scores every group in one batched call (unless it reads executions); 5. its rewards
    wm_rewards = np.full(n, np.nan)
    if c.world_model is not None and not reads_executions:
        with ledger.measure("world_model", n_items=n, cost=getattr(c.world_model, "cost", None)):
            predictions = state.faults.predict(
                c.world_model, rollouts.tasks, rollouts.solutions, check=_prediction_check(c, n)
            )
        wm_rewards = _world_model_rewards(c, state, rollouts, predictions)

    # 4. real execution of the anchor groups (of every group for a world model that reads executions); 5. rewards
    real_rewards = np.full(n, np.nan)
    if executed_idx.size:
        executed_tasks = [rollouts.tasks[i] for i in executed_idx]
        executed_solutions = [rollouts.solutions[i] for i in executed_idx]
        with (
            ledger.measure("execution", n_items=executed_idx.size, cost=getattr(c.environment, "cost", None)) as call,
        ):
            if reads_executions and isinstance(c.world_model, ScoresPartialExecutions):
                outcomes = _execute_partially(c, executed_tasks, executed_solutions, is_anchor[executed_idx], step)
            else:
                outcomes = execute(c, executed_tasks, executed_solutions, f"at step {step}")
            call.measured_s = measured_cost_s(outcomes)  # e.g. sandbox CPU seconds, independent of machine load
        executed_rewards = state.faults.rewards(c.reward, executed_tasks, outcomes)
        real_rewards[anchor_idx] = executed_rewards[is_anchor[executed_idx]]
        if reads_executions:
            with ledger.measure("world_model", n_items=n, cost=getattr(c.world_model, "cost", None)):
                predictions = state.faults.predict(
                    c.world_model, executed_tasks, executed_solutions, outcomes, check=_prediction_check(c, n)
                )
            wm_rewards = _world_model_rewards(c, state, rollouts, predictions)
        anchor_outcomes = [o for o, a in zip(outcomes, is_anchor[executed_idx]) if a]
        if anchor_idx.size and isinstance(c.world_model, LearnsFromAnchors):  # after its predictions
            with (
                ledger.measure("world_model", n_items=anchor_idx.size, cost=None),
                component_call(_who(c, "world_model"), "learn_from_anchors", f"at step {step}"),
            ):
                c.world_model.learn_from_anchors(
                    [rollouts.tasks[i] for i in anchor_idx],
                    [rollouts.solutions[i] for i in anchor_idx],
                    anchor_outcomes,
                )
    statuses = Counter(as_outcome(o).status for o in anchor_outcomes) if executed_idx.size else Counter()
    return ScoredStep(
        rollouts=rollouts,
        anchor_groups=anchor_groups,
        wm_rewards=wm_rewards,
        real_rewards=real_rewards,
        anchor_statuses=dict(statuses),
    )


def _execute_partially(
    c: Components, tasks: list[Task], solutions: list[Any], is_anchor: np.ndarray, step: int
) -> list[Any]:
    """The anchors' full executions (the environment) and the others' partial ones (the world
    model's ``execute_for_scoring``), in the order of ``tasks``."""
    partial = c.world_model
    assert isinstance(partial, ScoresPartialExecutions)  # the caller's dispatch
    outcomes: list[Any] = [None] * len(tasks)
    anchors, others = np.flatnonzero(is_anchor), np.flatnonzero(~is_anchor)
    if anchors.size:
        full = execute(c, [tasks[i] for i in anchors], [solutions[i] for i in anchors], f"at step {step}")
        for i, o in zip(anchors, full):
            outcomes[i] = o
    if others.size:
        with component_call(_who(c, "world_model"), "execute_for_scoring", f"at step {step}"):
            part = partial.execute_for_scoring([tasks[i] for i in others], [solutions[i] for i in others])
        part = checkers.check_outcomes(_who(c, "world_model"), "execute_for_scoring", part, int(others.size))
        for i, o in zip(others, part):
            outcomes[i] = o
    return outcomes


def _prediction_check(c: Components, n: int) -> Any:
    return lambda predictions: checkers.check_outcomes(_who(c, "world_model"), "predict", predictions, n)


def _world_model_rewards(c: Components, state: TrainState, rollouts: Rollouts, predictions: list) -> np.ndarray:
    """Rewards of one prediction per rollout; a call that answered for another count breaks the contract."""
    predictions = checkers.check_outcomes(_who(c, "world_model"), "predict", predictions, len(rollouts))
    return state.faults.rewards(c.reward, rollouts.tasks, predictions)


def _open_run(cfg: TrainConfig, run_dir: Path) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the checkpoint to continue, or ``None`` for a fresh start; the run's record). Reads only:
    a resume that would cross runs, shorten the run or change what exactness depends on raises
    :class:`ConfigError` here, before any component starts."""
    ckpt_dir = run_dir / "checkpoints"
    current = _read_run_file(run_dir)
    if not cfg.resume:
        return None, run_record(cfg)
    if not has_checkpoint(ckpt_dir):
        notice(f"resume=true, but {ckpt_dir} holds no checkpoint of this run: starting from step 0")
        return None, run_record(cfg)
    saved = load_checkpoint(ckpt_dir)
    changes = check_resume(cfg, saved, ckpt_dir, current.get("id"))
    run_id = (saved.get("run") or {}).get("id") or current.get("id")
    if changes:
        notice(f"resuming from step {saved['step']} with changed settings: " + "; ".join(changes))
    if cfg.steps == saved["step"]:
        notice(f"the run in {run_dir} is already at step {cfg.steps}: nothing to train (raise steps to continue it)")
    return saved, run_record(cfg, run_id)


def _read_run_file(run_dir: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((run_dir / "run.json").read_text()))
    except (OSError, ValueError, TypeError):
        return {}


def _begin_fresh(run_dir: Path, run: dict[str, Any]) -> None:
    """Move an earlier run's files aside, all together (so that nothing of it mixes with this
    run's and resume never continues it), and record this run's id and config hash in
    ``run_dir/run.json``."""
    moved = move_run_aside(run_dir)
    if moved is not None:
        notice(
            f"{run_dir} held an earlier run ({', '.join(moved[1])}); moved it to {moved[0]} so that this run "
            f"starts clean and resume=true continues only this run"
        )
    atomic_write_text(
        run_dir / "run.json", json.dumps({"id": run["id"], "config_hash": run["config_hash"]}) + "\n", "run record"
    )


def _checkpoint_note(ckpt_dir: Path, step: int | None) -> str:
    if step is None:
        return f"no checkpoint of this run was written yet (in {ckpt_dir}); there is nothing to resume"
    return f"the checkpoint of step {step} is kept in {ckpt_dir} (continue with resume=true)"


def train(cfg: TrainConfig, *, plugin_manager=None) -> dict[str, Any]:
    """Run (or resume) training as configured; returns the summary also written to ``summary.json``.

    :raises RunDirBusyError: at once when another process trains in ``cfg.run_dir`` (its ``.lock``).
    """
    pm = plugin_manager or get_plugin_manager()
    run_dir = Path(cfg.run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"run_dir={run_dir} is a file; name a directory for the run")
    run_dir.mkdir(parents=True, exist_ok=True)
    with run_dir_lock(run_dir, notice):
        return _train(cfg, pm, run_dir)


def _train(cfg: TrainConfig, pm: Any, run_dir: Path) -> dict[str, Any]:
    """:func:`train` in its run directory, which this process holds."""
    ckpt_dir = run_dir / "checkpoints"
    saved, run = _open_run(cfg, run_dir)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    c, state, train_tasks, (eval_split, eval_tasks) = _start(cfg, build_registry(pm), pm, saved)
    _notice_split_choices(cfg, len(train_tasks), eval_split)
    start_step = 0 if saved is None else saved["step"]
    checkpointed = None if saved is None else start_step  # the step of this run's newest checkpoint
    if saved is None:
        _begin_fresh(run_dir, run)
    atomic_write_text(run_dir / "config.yaml", to_yaml(cfg), "config")
    writer = _metrics_writer(cfg, run_dir, resumed_at=None if saved is None else start_step)
    _truncate_anchor_pairs(run_dir / "anchor_pairs.jsonl", after_step=start_step)
    B, G = cfg.rollout.batch_tasks, cfg.rollout.group_size
    rewards = _RewardWatch()
    last: dict[str, Any] = {}
    progress = TrainingProgress(total=cfg.steps, start=start_step, enabled=cfg.logging.progress, label=f"{cfg.mode}")
    started = time.perf_counter()
    try:
        if saved is None:  # a resume from a step-0 checkpoint has this record already
            last = {"step": 0, **state.ledger.metrics(), **_evaluation(c, cfg, eval_tasks, 0)}
            writer.write(last)
            if 0 in cfg.checkpoint.at_steps:  # the initial policy, for offline evaluation
                save_checkpoint(ckpt_dir, 0, {"run": run_record(cfg, run["id"]), **state.state_dict()})
                checkpointed = 0
        for step in range(start_step + 1, cfg.steps + 1):
            state.ledger.new_step()
            # 1. rollouts: B groups of G
            rollouts = _rollouts(c, state, train_tasks, B, G, step, check_log_probs=step == start_step + 1)

            # 2-5. anchors, world-model scores for every group, real execution of the anchors, rewards
            replayed_before = getattr(c.environment, "replayed", None)  # an execution cache's count
            scored = score_step(c, state, rollouts, B, step)

            # 6-8. calibration, advantages and fusion, the fused GRPO update and the metrics record
            update = update_step(c.policy, cfg, state, scored, step)
            rewards.observe(c, cfg.mode, scored, step, float(update.record.get("fusion/w_world_model") or 0.0))
            if replayed_before is not None:  # executions of this step replayed from the cache
                update.record["execution/replayed"] = c.environment.replayed - replayed_before
            if update.anchor_pairs is not None:
                with (run_dir / "anchor_pairs.jsonl").open("a") as f:
                    f.write(json.dumps(update.anchor_pairs) + "\n")

            # between steps: evaluation, metrics, checkpoint
            last = {**update.record, **state.faults.metrics(), **_evaluation(c, cfg, eval_tasks, step)}
            writer.write(last)
            every = cfg.checkpoint.every and step % cfg.checkpoint.every == 0
            if every or step == cfg.steps or step in cfg.checkpoint.at_steps:
                save_checkpoint(ckpt_dir, step, {"run": run_record(cfg, run["id"]), **state.state_dict()})
                checkpointed = step
            progress.update(step, last)
    except BaseException as exc:  # the CLI says whether a checkpoint is kept (Ctrl-C, a component's error)
        exc.checkpoint_note = _checkpoint_note(ckpt_dir, checkpointed)  # type: ignore[attr-defined]
        if isinstance(exc, OSError):  # a full disk: name the directory and the fix, not just ENOSPC
            raise_if_disk_full(exc, run_dir)
        raise
    finally:
        progress.close()
        writer.close()
        c.close()
    summary = _summary(cfg, c, run, last, time.perf_counter() - started, rewards.usable, eval_split)
    atomic_write_text(run_dir / "summary.json", strict_json(summary, indent=2), "summary")
    if cfg.steps > start_step and rewards.usable == 0:
        _refuse_trained_on_nothing(cfg, c, rewards, cfg.steps - start_step, run_dir)
    return summary


def _notice_split_choices(cfg: TrainConfig, n_train_tasks: int, eval_split: str) -> None:
    """Say once what the configured splits make of the run: tasks drawn with replacement, an
    evaluation on the training split."""
    if cfg.rollout.batch_tasks > n_train_tasks:
        notice(
            f"rollout.batch_tasks={cfg.rollout.batch_tasks} is more than the {n_train_tasks} tasks of split "
            f"{cfg.rollout.task_split!r}: each step draws its tasks with replacement, so one task can be several "
            f"groups of a step. Set rollout.batch_tasks<={n_train_tasks} to draw each task at most once a step"
        )
    if cfg.eval.every and cfg.eval.split == cfg.rollout.task_split:  # asked for, not heldout's fallback
        notice(
            f"the evaluations run on the split training samples from ({eval_split!r}): they measure fit to the "
            f"training tasks, not generalisation. Set eval.split to a split training does not use, if the domain has one"
        )


def _refuse_trained_on_nothing(cfg: TrainConfig, c: Components, rewards: Any, trained: int, run_dir: Path) -> None:
    """A run none of whose ``trained`` steps had a usable reward is an error naming the component to fix."""
    statuses = rewards.rewardless_statuses
    raise TrainedOnNothingError(
        f"the run trained on nothing: none of its {trained} steps had a usable reward (mode={cfg.mode}; "
        f"dropped world-model predictions are counted in faults/world_model_dropped, rewardless outcomes in "
        f"{run_dir / 'metrics.jsonl'}"
        + (
            f"; the executed outcomes' statuses: {_statuses(statuses)}, which reward `{c.reward_name}` drops"
            if statuses
            else ""
        )
        + f"). Fix the component whose rewards are all NaN: {_reward_sources(c, cfg.mode)} must return finite "
        f"scores" + (", or give those outcomes a reward (reward.kwargs.failure_reward)" if statuses else "")
    )


def _start(
    cfg: TrainConfig, registry: Any, pm: Any, saved: dict[str, Any] | None
) -> tuple[Components, TrainState, list[Task], tuple[str, list[Task]]]:
    """The run's components, its :class:`TrainState` (continued from the checkpoint ``saved``
    when there is one), its training tasks and its evaluated split with its tasks; the components are closed again
    when any of it fails."""
    c = make_components(cfg, registry, pm)
    try:
        if cfg.grpo.entropy_coef and not isinstance(c.policy, HasEntropy):
            raise ConfigError(
                f"grpo.entropy_coef={cfg.grpo.entropy_coef} needs a policy with an `entropy(rollouts)` method, and "
                f"policy {cfg.policy.name!r} has none: set grpo.entropy_coef=0 (grpo.kl_coef regularises any policy)"
            )
        train_tasks = split_tasks(c, cfg.rollout.task_split, "rollout.task_split")
        evaluated = _eval_tasks(c, cfg.eval.split, cfg.eval.max_tasks)
        state = TrainState.create(
            cfg, c.policy, environment=c.environment, world_model=c.world_model, fusers=registry.fusers
        )
        if saved is not None:
            _load_state(state, saved, Path(cfg.run_dir) / "checkpoints")
    except BaseException:
        c.close()
        raise
    return c, state, train_tasks, evaluated


def _load_state(state: TrainState, saved: dict[str, Any], ckpt_dir: Path) -> None:
    """``state.load_state_dict(saved)``; a checkpoint that does not fit this run's components (a
    ``load_state_dict`` that raises) is a :class:`CheckpointError` naming the directory."""
    try:
        state.load_state_dict(saved)
    except WMRLError:
        raise
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"the checkpoint in {ckpt_dir} (step {saved.get('step', '?')}) does not fit this run's components "
            f"({type(exc).__name__}: {reason}); it belongs to another configuration. Use another run_dir, or start "
            f"fresh with resume=false"
        ) from exc


def _metrics_writer(cfg: TrainConfig, run_dir: Path, resumed_at: int | None) -> MetricsWriter:
    """The run's metrics writer. A fresh run (``resumed_at=None``) into an old ``run_dir`` starts
    its logs over; a resumed one drops what was written after its checkpoint, so that no step
    appears twice."""
    return MetricsWriter(
        run_dir,
        tensorboard=cfg.logging.tensorboard,
        wandb_project=cfg.logging.wandb_project,
        config=json.loads(json.dumps(vars(cfg), default=lambda o: vars(o))),
        truncate_after_step=-1 if resumed_at is None else resumed_at,
    )


def _evaluation(c: Components, cfg: TrainConfig, eval_tasks: Sequence[Task], step: int) -> dict[str, float]:
    """The evaluation record at ``step``: before the first step, every ``eval.every`` steps and
    after the last (``eval.every=0``: never); else empty."""
    due = cfg.eval.every > 0 and (step == 0 or step % cfg.eval.every == 0 or step == cfg.steps)
    if not due:
        return {}
    seed = evaluation_seed(cfg.seed, step, cfg.eval.common_random_numbers)
    return evaluate(c, eval_tasks, cfg.eval.samples_per_task, seed=seed)


def _rollouts(
    c: Components, state: TrainState, train_tasks: Sequence[Task], B: int, G: int, step: int, check_log_probs: bool
) -> Rollouts:
    """Step 1 of the loop: ``B`` tasks drawn by ``state.task_rng`` (with replacement only when the
    split has fewer), ``G`` rollouts each, charged to ``generation`` and checked; on the first
    step of an invocation the policy's ``log_probs`` is checked too."""
    picks = state.task_rng.choice(len(train_tasks), size=B, replace=B > len(train_tasks))
    tasks = [train_tasks[i] for i in picks]
    with (
        state.ledger.measure("generation", n_items=B * G, cost=getattr(c.policy, "cost", None)),
        component_call(_who(c, "policy"), "generate", f"at step {step}"),
        heartbeat(f"{_who(c, 'policy')} generate() of {B} x {G} at step {step}", c.heartbeat_s, None),
    ):
        rollouts = c.policy.generate(tasks, G)
    checkers.check_rollouts(rollouts, B, G, _who(c, "policy"), tasks)
    if check_log_probs:
        _check_log_probs(c, rollouts, step)
    return rollouts


def _repeating(count: int) -> bool:
    """Warn on the 1st and 10th such step in a row, then every 100th."""
    return count in (1, 10) or count % 100 == 0


class _RewardWatch:
    """Counts the rewards that reach the update over the run (``usable``) and warns when every
    world-model reward of a step was dropped, or every executed anchor outcome had no reward
    (on the 1st and 10th such step in a row, then every 100th)."""

    def __init__(self) -> None:
        self.usable = 0
        self.dropped_steps = 0  # consecutive steps whose world-model rewards were all dropped
        self.rewardless_steps = 0  # consecutive steps whose executed anchors all lacked a reward
        self.rewardless_statuses: Counter[str] = Counter()  # their outcomes' statuses, over the run

    def observe(self, c: Components, mode: str, scored: ScoredStep, step: int, w_world_model: float) -> None:
        """After the step's update, whose world-model weight ``w_world_model`` says whether the
        world model's rewards reached it (``wmrl`` mode)."""
        self.usable += _usable_rewards(mode, scored, w_world_model)
        executed = sum(scored.anchor_statuses.values())
        if executed and not np.isfinite(scored.real_rewards).any():
            self.rewardless_steps += 1
            self.rewardless_statuses.update(scored.anchor_statuses)
            if _repeating(self.rewardless_steps):
                notice(_rewardless_warning(c, step, scored.anchor_statuses, self.rewardless_steps))
        else:
            self.rewardless_steps = 0
        if c.world_model is None or np.isfinite(scored.wm_rewards).any():
            self.dropped_steps = 0
            return
        self.dropped_steps += 1
        if _repeating(self.dropped_steps):
            notice(_all_dropped_warning(c, step, len(scored.wm_rewards), self.dropped_steps))


def _statuses(counts: dict[str, int]) -> str:
    return ", ".join(f"{status} {n}" for status, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _rewardless_warning(c: Components, step: int, statuses: dict[str, int], consecutive: int) -> str:
    in_a_row = f" ({consecutive} steps in a row)" if consecutive > 1 else ""
    return (
        f"step {step}{in_a_row}: none of the {sum(statuses.values())} executed outcomes has a reward "
        f"(statuses: {_statuses(statuses)}); reward extractor `{c.reward_name}` gives none to those, so the anchors "
        f"teach nothing. Fix the policy's solutions, or give failures a reward (e.g. reward.kwargs.failure_reward=0.0 "
        f"where the extractor has it)"
    )


def _summary(
    cfg: TrainConfig,
    c: Components,
    run: dict[str, Any],
    last: dict[str, Any],
    wall_s: float,
    usable: int,
    eval_split: str,
) -> dict[str, Any]:
    """The run's summary (``summary.json``), read from its metrics (all invocations); draws its plots."""
    run_dir = Path(cfg.run_dir)
    records = read_metrics(run_dir)
    evals = [r for r in records if any(k.startswith("eval/") for k in r)]
    if not last and records:  # nothing ran in this invocation (a resume at its last step)
        last = records[-1]
    plot_run(run_dir, eval_split=eval_split)

    def eval_keys(record: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in record.items() if k.startswith("eval/") or k == "step"}

    return {
        "mode": cfg.mode,
        "steps": cfg.steps,
        "seed": cfg.seed,
        "run_dir": str(run_dir),
        "run_id": run["id"],
        "config_hash": run["config_hash"],
        "eval_split": eval_split,
        "eval_first": eval_keys(evals[0]) if evals else None,
        "eval_last": eval_keys(evals[-1]) if evals else None,
        "components": {
            "environment": cfg.environment.name,
            "policy": cfg.policy.name,
            "world_model": cfg.world_model.name if cfg.world_model else None,
            "reward": c.reward_name,
        },
        "wall_s_this_invocation": wall_s,
        "final": last,
        "value": value_summary(records),  # run averages of n_eff and the predicted compute ratios
        "world_model_earned": world_model_earned(records) if cfg.mode == "wmrl" else {},
        "usable_rewards": usable,
    }


def _check_log_probs(c: Components, rollouts: Rollouts, step: int) -> None:
    """One ``policy.log_probs`` call on the first step of an invocation, so that a raise, a wrong
    type or shape, a tensor without grad or a NaN is named here rather than deep inside the loss.
    Grad is enabled (what the update's call needs anyway; the graph is freed on return). The RNG
    is forked: the run's draws are the same with or without it."""
    device = rollouts.old_log_probs.device
    devices = [device] if device.type == "cuda" else []  # only the policy's: no context on other GPUs
    with (
        torch.enable_grad(),
        torch.random.fork_rng(devices=devices),
        component_call(_who(c, "policy"), "log_probs", f"at step {step}"),
    ):
        log_probs = c.policy.log_probs(rollouts)
    checkers.check_log_probs(_who(c, "policy"), log_probs, rollouts)


def _usable_rewards(mode: str, scored: ScoredStep, w_world_model: float = 1.0) -> int:
    """Finite rewards of a step in the streams that reached its update: the real ones unless
    ``mode=world_model``, the world model's unless ``mode=real`` or (``wmrl``) its weight was 0."""
    n = 0
    if mode != "world_model":
        n += int(np.isfinite(scored.real_rewards).sum())
    if mode == "world_model" or (mode == "wmrl" and w_world_model > 0):
        n += int(np.isfinite(scored.wm_rewards).sum())
    return n


def _reward_sources(c: Components, mode: str) -> str:
    sources = {"real": [_who(c, "environment")], "world_model": [_who(c, "world_model")]}
    return " or ".join(sources.get(mode, [_who(c, "world_model"), _who(c, "environment")]))


def _all_dropped_warning(c: Components, step: int, n: int, consecutive: int) -> str:
    run = f" ({consecutive} steps in a row)" if consecutive > 1 else ""
    return (
        f"warning: step {step}: every world-model reward was dropped ({n} of {n}){run}: {_who(c, 'world_model')} "
        f"returned NaN, None or no_prediction, raised, or timed out (faults/ in metrics.jsonl counts which). "
        f"The world-model stream gives this step nothing; check its predict()"
    )

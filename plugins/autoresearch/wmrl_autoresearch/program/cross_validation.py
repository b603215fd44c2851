r"""How well a world model ranks NEW programs of the training tasks: grouped cross-validation.

The folds group executions by *program* (the tuple of choices), so a program predicted in a
fold was never seen in training on any task, while the task itself was (with other programs):
what GRPO needs from a world model on the training tasks is the order of a group of new programs
of one task. The score is the **within-task Spearman** of out-of-fold predictions against real
rewards, averaged over tasks (tasks with at least 3 executions and varied rewards):

.. math:: \bar\rho = \frac{1}{|T|}\sum_{t \in T} \operatorname{Spearman}(\hat r_{t,\cdot}, r_{t,\cdot})

with a 95% t-interval over tasks. Every model is scored on the same folds. The pooled
out-of-fold predictions of one task come from different fold models; the score is also
given within each fold's model alone (task-folds with at least 3 test programs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["corpus_arrays", "program_folds", "within_task_spearman", "cross_validate"]


def corpus_arrays(rows: Sequence[dict], features_by_id: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Arrays of the rewarded executions (sandbox errors dropped): task ids, task features,
    choices, one-hot decisions, failed flags, rewards."""
    from wmrl_autoresearch.program.grammar import Program

    rows = [r for r in rows if r["reward"] is not None]
    unknown = sorted({r["task_id"] for r in rows} - set(features_by_id))
    if unknown:
        raise ValueError(f"corpus rows of unknown tasks {unknown[:5]}: is the task pool installed?")
    return {
        "task_ids": np.array([r["task_id"] for r in rows]),
        "features": np.stack([np.asarray(features_by_id[r["task_id"]], dtype=np.float32) for r in rows]),
        "choices": np.array([r["choices"] for r in rows], dtype=np.int64),
        "one_hot": np.stack([Program(tuple(r["choices"])).one_hot() for r in rows]),
        "failed": np.array([r["status"] != "ok" for r in rows]),
        "reward": np.array([r["reward"] for r in rows], dtype=np.float64),
    }


def program_folds(choices: np.ndarray, n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """Fold index of every execution; all executions of one program share a fold."""
    keys = [tuple(c) for c in np.asarray(choices).tolist()]
    unique = sorted(set(keys))
    order = np.random.default_rng(seed).permutation(len(unique))
    fold_of = {unique[i]: rank % n_folds for rank, i in enumerate(order)}
    return np.array([fold_of[k] for k in keys])


def within_task_spearman(task_ids: np.ndarray, predicted: np.ndarray, real: np.ndarray) -> dict[str, float]:
    """Spearman of ``predicted`` against ``real`` within each task with >= 3 executions and varied
    rewards, by task id (:func:`wmrl_core.experiments.stats.within_group_spearman`: a constant
    prediction counts as 0)."""
    from wmrl_core.experiments.stats import within_group_spearman

    return within_group_spearman(task_ids, predicted, real, min_size=3).per_group


def cross_validate(
    arrays: dict[str, np.ndarray],
    fit_predict: dict[str, Callable[[dict, dict], np.ndarray | dict[str, np.ndarray]]],
    n_folds: int = 5,
    seed: int = 0,
) -> dict[str, dict]:
    """Out-of-fold predictions of each model and its within-task Spearman, on shared program folds.

    ``fit_predict[name](train_arrays, test_arrays)`` returns the predicted rewards of the test
    rows, or a dict of arrays with them under ``"reward"`` and other per-row outputs (kept out of fold too).
    """
    from wmrl_core.experiments.stats import mean_ci95

    folds = program_folds(arrays["choices"], n_folds, seed)
    results = {}
    for name, fn in fit_predict.items():
        oof: dict[str, np.ndarray] = {}
        for k in range(n_folds):
            test = folds == k
            out = fn({key: v[~test] for key, v in arrays.items()}, {key: v[test] for key, v in arrays.items()})
            for key, values in (out if isinstance(out, dict) else {"reward": out}).items():
                oof.setdefault(key, np.zeros(len(folds)))[test] = values
        per_task = within_task_spearman(arrays["task_ids"], oof["reward"], arrays["reward"])
        mean, half = mean_ci95(list(per_task.values()))
        # the same within one fold's model only: pooled out-of-fold predictions of a task come from
        # different models, whose task levels differ, which blurs the task's order
        per_fold = [
            rho
            for k in range(n_folds)
            for rho in within_task_spearman(
                arrays["task_ids"][folds == k], oof["reward"][folds == k], arrays["reward"][folds == k]
            ).values()
        ]
        fold_mean, fold_half = mean_ci95(per_fold)
        results[name] = {
            "within_task_spearman": mean,
            "ci95": half,
            "n_tasks": len(per_task),
            "within_task_spearman_per_fold": fold_mean,
            "per_fold_ci95": fold_half,
            "n_task_folds": len(per_fold),
            "oof": oof,
        }
    return results

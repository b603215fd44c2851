"""Does the program world model rank a task's new programs better after learning from anchors?

Offline, without Docker, on a corpus of real executions (default: the shipped
``wmrl_autoresearch/program/data/corpus.jsonl.gz``, programs on the training tasks, their
outcomes and normalized rewards). Each *shuffle* replays a run's anchors: anchor groups of
``--group-size`` programs of one task, the task drawn at random each time among those with
programs left, fed to ``LearnedWorldModel.learn_from_anchors`` in that order. After 0, 4, 8,
16, ... groups it measures the **within-task Spearman** of predictions against real rewards on
each task's programs *not yet seen* (tasks with at least 3 left and varied rewards), for the
updated model and for its fixed prior on the same programs; then the difference.

Two priors:

* ``task-fold``: the shipped outcome model's recipe refitted on the corpus without the task's
  fold (the tasks are split into ``--task-folds`` folds): the prior has never seen the task, as
  on held-out tasks (the honest comparison, and where online learning matters);
* ``shipped``: the shipped checkpoint, in-sample on these programs (optimistic for the prior:
  it already knows them, so there is little left for the update to learn).

Intervals: 95% t-intervals over the tasks (each task's difference averaged over shuffles: the
task is the unit that would change in another corpus) and over shuffles (anchor order only).

    wmrl experiment wm-online-update                   # the table in the report
    wmrl experiment wm-online-update --quick --out /tmp/wmu
    wmrl experiment wm-online-update --from-json DIR/summary.json --out DIR   # the table from its record
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import fields
from pathlib import Path

import numpy as np
from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward
from wmrl_autoresearch.program.corpus import load_corpus
from wmrl_autoresearch.program.fitting import excluded_tasks, fit_outcome_model
from wmrl_autoresearch.program.grammar import Program, ProgramScript
from wmrl_autoresearch.program.outcome_model import OutcomePrediction
from wmrl_autoresearch.program.world_model import LearnedWorldModel, save_outcome_model

from wmrl_core.experiments.report import page_from_record, refuse_run_flags
from wmrl_core.experiments.stats import mean_ci95, within_group_spearman
from wmrl_core.types import Outcome


def _task_fold_checkpoints(rows: list[dict], corpus: str | None, folds: int, directory: Path, seed: int = 0) -> dict:
    """Per task, a prior that never saw it: the shipped recipe fitted without the task's fold."""
    tasks = sorted({r["task_id"] for r in rows})
    fold_of = {t: int(k) % folds for t, k in zip(tasks, np.random.default_rng(seed).permutation(len(tasks)))}
    paths = {}
    for k in range(folds):
        kept = [r for r in rows if fold_of[r["task_id"]] != k]
        part = directory / f"corpus-fold{k}.jsonl"
        part.write_text("".join(json.dumps(r) + "\n" for r in kept))
        paths[k] = directory / f"fold{k}.pkl"
        save_outcome_model(fit_outcome_model(str(part), seed=seed), paths[k], {"fit": {"corpus": str(part)}})
    return {t: str(paths[fold_of[t]]) for t in tasks}


class _MemoPrior:
    """The prior's predictions, computed once per (task features, program): a shuffle replays the
    same programs many times, and only the per-task corrections change."""

    def __init__(self, model):
        self.model, self.memo = model, {}

    def predict_outcome(self, X: np.ndarray, task_ids=None):
        ids = [str(t) for t in task_ids] if task_ids is not None else [""] * len(X)
        keys = [x.tobytes() + t.encode() for x, t in zip(np.asarray(X), ids)]
        missing = [i for i, k in enumerate(keys) if k not in self.memo]
        if missing:
            out = self.model.predict_outcome(
                np.asarray(X)[missing], None if task_ids is None else [ids[i] for i in missing]
            )
            for j, i in enumerate(missing):
                self.memo[keys[i]] = tuple(np.asarray(getattr(out, f.name))[j] for f in fields(out))
        return OutcomePrediction(*(np.array(col) for col in zip(*(self.memo[k] for k in keys))))


def _world_models(checkpoints: dict[str, str | None], shrinkage: float, priors: dict) -> dict[str, LearnedWorldModel]:
    """Per task, its prior's world model. Tasks with the same prior share one model (corrections are
    per task, so it learns what a model per task would), and each prior's predictions are memoized in
    ``priors``, which a caller may keep across shuffles."""
    by_checkpoint = {}
    for checkpoint in sorted(set(checkpoints.values()), key=str):
        wm = LearnedWorldModel(checkpoint=checkpoint, learn_from_anchors=True, shrinkage=shrinkage)
        key = checkpoint or "shipped"
        if key not in priors:
            priors[key] = _MemoPrior(wm.model)
        wm.model = priors[key]
        by_checkpoint[checkpoint] = wm
    return {t: by_checkpoint[c] for t, c in checkpoints.items()}


def within_task_spearman(pred: np.ndarray, real: np.ndarray) -> float:
    """Spearman's rho of one task's predictions against its real rewards, by the rule of
    :func:`wmrl_core.experiments.stats.within_group_spearman`: NaN (the task is left out of the
    means) with fewer than 3 programs or equal rewards; 0 for equal predictions (no ranking)."""
    return within_group_spearman(["task"] * len(real), pred, real, min_size=3).value


def replay(
    rows: list[dict],
    tasks_by_id: dict,
    checkpoints: dict[str, str | None],
    *,
    shrinkage: float,
    group_size: int,
    marks: list[int],
    seed: int,
    priors: dict | None = None,
) -> dict[int, dict[str, tuple[float, float]]]:
    """One shuffle: ``{groups_seen: {task_id: (spearman_updated, spearman_prior)}}`` on unseen programs.

    Each task has its own prior (it may be leave-that-task-out); a group teaches only its task's
    corrections. ``priors`` memoizes the priors' predictions (pass the same dict to every shuffle)."""
    rng = np.random.default_rng(seed)
    reward = AutoResearchScoreReward()
    by_task = {t: [r for r in rows if r["task_id"] == t] for t in sorted({r["task_id"] for r in rows})}
    order = {t: list(rng.permutation(len(rs))) for t, rs in by_task.items()}
    seen = {t: 0 for t in by_task}
    models = _world_models({t: checkpoints[t] for t in by_task}, shrinkage, {} if priors is None else priors)
    for model in {id(m): m for m in models.values()}.values():  # one batched prediction fills the memo
        mine = [r for t, rs in by_task.items() if models[t] is model for r in rs]
        model.prior_rewards([tasks_by_id[r["task_id"]] for r in mine], [Program(tuple(r["choices"])) for r in mine])
    out: dict[int, dict[str, tuple[float, float]]] = {}
    groups = 0
    for mark in sorted(marks):
        while groups < mark:
            open_tasks = [t for t in by_task if len(by_task[t]) - seen[t] >= group_size + 3]
            if not open_tasks:
                break
            t = open_tasks[int(rng.integers(len(open_tasks)))]
            batch = [by_task[t][i] for i in order[t][seen[t] : seen[t] + group_size]]
            seen[t] += group_size
            task = tasks_by_id[t]
            models[t].learn_from_anchors(
                [task] * len(batch),
                [ProgramScript("", Program(tuple(r["choices"]))) for r in batch],
                [Outcome(status=r["status"], score=r["score"]) for r in batch],
            )
            groups += 1
        if groups < mark:
            break  # the corpus ran out of programs to hold out
        out[mark] = {}
        for t, rs in by_task.items():
            unseen = [rs[i] for i in order[t][seen[t] :]]
            task = tasks_by_id[t]
            programs = [Program(tuple(r["choices"])) for r in unseen]
            real = np.array([reward(task, Outcome(status=r["status"], score=r["score"])) for r in unseen], dtype=float)
            updated = models[t].predict_rewards([task] * len(programs), programs)
            prior = models[t].prior_rewards([task] * len(programs), programs)
            out[mark][t] = (within_task_spearman(updated, real), within_task_spearman(prior, real))
    return out


def summarize(shuffles: list[dict], group_size: int, n_tasks: int) -> list[dict]:
    table = []
    for mark in sorted(set.intersection(*(set(s) for s in shuffles))):
        tasks = sorted(shuffles[0][mark])
        upd = np.array([[s[mark][t][0] for t in tasks] for s in shuffles])  # (shuffles, tasks)
        pri = np.array([[s[mark][t][1] for t in tasks] for s in shuffles])
        diff = upd - pri
        per_shuffle = [np.nanmean(row) for row in diff]
        per_task = [np.nanmean(col) for col in diff.T if np.isfinite(col).any()]
        table.append(
            {
                "groups": mark,
                "seen_per_task": mark * group_size / n_tasks,
                "prior_rho": float(np.nanmean(pri)),
                "updated_rho": float(np.nanmean(upd)),
                "diff_over_tasks": mean_ci95(per_task),
                "diff_over_shuffles": mean_ci95(per_shuffle),
                "tasks_better": int(sum(d > 0 for d in per_task)),
                "tasks": len(per_task),
            }
        )
    return table


def table_markdown(record: dict) -> str:
    """The table of a run's ``summary.json`` record: its replayed tasks and executions, and for each prior,
    λ and number of anchor groups, the prior's and the updated model's within-task Spearman and their
    difference with its intervals."""
    args = record["args"]
    lines = [
        f"Within-task Spearman on each task's unseen programs, {args['shuffles']} shuffles, groups of "
        f"{args['group_size']} ({record['tasks']} tasks, {record['executions']} executions)",
        "",
        "| prior | λ | anchor groups | seen/task | prior ρ | updated ρ | Δ (95% CI over tasks) | Δ (95% CI over shuffles) | tasks better |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in record["results"]:
        (dt, ht), (ds, hs) = r["diff_over_tasks"], r["diff_over_shuffles"]
        lines.append(
            f"| {r['prior']} | {r['shrinkage']:g} | {r['groups']} | {r['seen_per_task']:.1f} | "
            f"{r['prior_rho']:.3f} | {r['updated_rho']:.3f} | {dt:+.3f} ± {ht:.3f} | {ds:+.3f} ± {hs:.3f} | "
            f"{r['tasks_better']}/{r['tasks']} |"
        )
    return "\n".join(lines) + "\n"


def _table_from_record(parser: argparse.ArgumentParser, record: Path, out: Path | None) -> int:
    if out is None:
        parser.error("--from-json needs --out (the folder for table.md)")
    try:
        print(page_from_record(record, out / "table.md", table_markdown, "a summary.json of this study"), end="")
    except ValueError as exc:
        parser.error(f"--from-json {exc}")
    return 0


def main(argv: list[str] | None = None, prog: str = "wmrl experiment wm-online-update") -> int:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", default=None, help="corpus .jsonl(.gz) (default: the shipped one)")
    parser.add_argument("--shuffles", type=int, default=10)
    parser.add_argument("--group-size", type=int, default=2)
    parser.add_argument("--marks", type=int, nargs="+", default=[0, 16, 64, 128, 256])
    parser.add_argument("--shrinkage", type=float, nargs="+", default=[8.0, 32.0, 128.0])
    parser.add_argument("--priors", nargs="+", default=["task-fold", "shipped"], choices=["task-fold", "shipped"])
    parser.add_argument("--task-folds", type=int, default=5)
    parser.add_argument("--max-tasks", type=int, default=None, help="replay only this many tasks (the first by id)")
    parser.add_argument(
        "--quick", action="store_true", help="2 shuffles, marks 0 4 8, shrinkage 8, task-fold prior of 2 folds"
    )
    parser.add_argument("--out", type=Path, default=None, help="write table.md and summary.json here")
    parser.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help="rewrite --out's table.md from this summary.json, replaying nothing",
    )
    args = parser.parse_args(argv)
    if args.from_json is not None:
        refuse_run_flags(parser, args, keep=("from_json", "out"))
        return _table_from_record(parser, args.from_json, args.out)
    if args.quick:
        args.shuffles, args.marks, args.shrinkage, args.priors = 2, [0, 4, 8], [8.0], ["task-fold"]
        args.task_folds = 2  # each fold a fit of the outcome model (about 10 CPU-s): the fewest that hold one out
    from wmrl_autoresearch.environment import collect_tasks

    excluded = excluded_tasks()  # shares a held-out task's data: the pool dropped it
    rows = [r for r in load_corpus(args.corpus) if r["reward"] is not None and r["task_id"] not in excluded]
    tasks_by_id = {t.id: t for t in collect_tasks() if t.data.split == "train"}
    task_ids = sorted({r["task_id"] for r in rows})
    if args.max_tasks:
        task_ids = task_ids[: args.max_tasks]
    replayed = [r for r in rows if r["task_id"] in set(task_ids)]
    results = []
    priors: dict = {}  # each prior's memoized predictions, shared by every shuffle and λ
    with tempfile.TemporaryDirectory() as tmp:
        for prior in args.priors:
            if prior == "task-fold":
                checkpoints = _task_fold_checkpoints(rows, args.corpus, args.task_folds, Path(tmp))
            else:
                checkpoints = {t: None for t in task_ids}
            for lam in args.shrinkage:
                shuffles = [
                    replay(
                        replayed,
                        tasks_by_id,
                        checkpoints,
                        shrinkage=lam,
                        group_size=args.group_size,
                        marks=args.marks,
                        seed=s,
                        priors=priors,
                    )
                    for s in range(args.shuffles)
                ]
                for row in summarize(shuffles, args.group_size, len(task_ids)):
                    results.append({"prior": prior, "shrinkage": lam, **row})

    record = {
        "args": {k: str(v) for k, v in vars(args).items() if k != "from_json"},
        "tasks": len(task_ids),
        "executions": len(replayed),
        "results": results,
    }
    text = table_markdown(record)
    print(text, end="")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "table.md").write_text(text)
        (args.out / "summary.json").write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does the program world model rank a task's new programs better after learning from anchors?

Offline, without Docker, on the shipped corpus of real executions
(``wmrl_autoresearch/program/data/corpus_train.jsonl``: 20 programs per training task, their
outcomes and normalized rewards). Each *shuffle* replays a run's anchors: anchor groups of
``--group-size`` programs of one task, the task drawn at random each time among those with
programs left, fed to ``LearnedWorldModel.learn_from_anchors`` in that order. After 0, 4, 8,
16, ... groups it measures the **within-task Spearman** of predictions against real rewards on
each task's programs *not yet seen* (tasks with at least 3 left and varied rewards), for the
updated model and for its fixed prior on the same programs; then the difference.

Two priors, because the shipped model was fitted on this very corpus:

* ``loto``: the same ridge (``build.py``'s settings) refitted on the other 9 tasks: the prior has
  never seen the task, as on new tasks (the honest comparison);
* ``shipped``: the shipped checkpoint, in-sample on these programs (optimistic for the prior:
  it already knows them, so there is little left for the update to learn).

Intervals: 95% t-intervals over the tasks (each task's difference averaged over shuffles: the
task is the unit that would change in another corpus) and over shuffles (anchor order only).
20 programs per task is little data: a few groups per task is all the update ever sees here.

    python benchmarks/wm_online_update.py                   # the table in the report
    python benchmarks/wm_online_update.py --quick --out /tmp/wmu
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr
from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward
from wmrl_autoresearch.program.build import HIDDEN, fit_from_corpus
from wmrl_autoresearch.program.grammar import Program, ProgramScript
from wmrl_autoresearch.program.world_model import LearnedWorldModel
from wmrl_autoresearch.tasks import N_FEATURES
from wmrl_autoresearch.tasks.builtin_suite import builtin_tasks

from wmrl_core.experiment import mean_ci95
from wmrl_core.types import Outcome

CORPUS = Path(__file__).resolve().parents[1] / "plugins/autoresearch/wmrl_autoresearch/program/data/corpus_train.jsonl"


def _loto_checkpoint(rows: list[dict], tasks_by_id: dict, held: str, directory: Path) -> str:
    """A prior that never saw task ``held``: the shipped recipe fitted on the other tasks."""
    model = fit_from_corpus([r for r in rows if r["task_id"] != held], tasks_by_id)
    path = directory / f"loto-{held}.pt"
    torch.save({"model": model.state_dict(), "n_features": N_FEATURES, "hidden": HIDDEN}, path)
    return str(path)


def _within_task_spearman(pred: np.ndarray, real: np.ndarray) -> float:
    if len(real) < 3 or np.std(real) == 0 or np.std(pred) == 0:
        return math.nan
    return float(spearmanr(pred, real).statistic)


def replay(
    rows: list[dict],
    tasks_by_id: dict,
    checkpoints: dict[str, str | None],
    *,
    shrinkage: float,
    group_size: int,
    marks: list[int],
    seed: int,
) -> dict[int, dict[str, tuple[float, float]]]:
    """One shuffle: ``{groups_seen: {task_id: (spearman_updated, spearman_prior)}}`` on unseen programs.

    Each task gets its own world model (its prior may be leave-that-task-out); a group teaches only
    its task's model, which is what a shared model would learn too (corrections are per task)."""
    rng = np.random.default_rng(seed)
    reward = AutoResearchScoreReward()
    by_task = {t: [r for r in rows if r["task_id"] == t] for t in sorted({r["task_id"] for r in rows})}
    order = {t: list(rng.permutation(len(rs))) for t, rs in by_task.items()}
    seen = {t: 0 for t in by_task}
    models = {
        t: LearnedWorldModel(checkpoint=checkpoints[t], learn_from_anchors=True, shrinkage=shrinkage) for t in by_task
    }
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
            out[mark][t] = (_within_task_spearman(updated, real), _within_task_spearman(prior, real))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shuffles", type=int, default=20)
    parser.add_argument("--group-size", type=int, default=2)
    parser.add_argument("--marks", type=int, nargs="+", default=[0, 4, 8, 16, 32, 64, 80])
    parser.add_argument("--shrinkage", type=float, nargs="+", default=[2.0, 8.0, 32.0, 128.0])
    parser.add_argument("--priors", nargs="+", default=["loto", "shipped"], choices=["loto", "shipped"])
    parser.add_argument("--quick", action="store_true", help="2 shuffles, marks 0 4 8, shrinkage 8, loto prior")
    parser.add_argument("--out", type=Path, default=None, help="write table.md and summary.json here")
    args = parser.parse_args(argv)
    if args.quick:
        args.shuffles, args.marks, args.shrinkage, args.priors = 2, [0, 4, 8], [8.0], ["loto"]

    rows = [json.loads(line) for line in CORPUS.read_text().splitlines() if line]
    tasks_by_id = {t.id: t for t in builtin_tasks("train")}
    task_ids = sorted({r["task_id"] for r in rows})
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for prior in args.priors:
            checkpoints = {
                t: (_loto_checkpoint(rows, tasks_by_id, t, Path(tmp)) if prior == "loto" else None) for t in task_ids
            }
            for lam in args.shrinkage:
                shuffles = [
                    replay(
                        rows,
                        tasks_by_id,
                        checkpoints,
                        shrinkage=lam,
                        group_size=args.group_size,
                        marks=args.marks,
                        seed=s,
                    )
                    for s in range(args.shuffles)
                ]
                for row in summarize(shuffles, args.group_size, len(task_ids)):
                    results.append({"prior": prior, "shrinkage": lam, **row})

    lines = [
        f"Within-task Spearman on each task's unseen programs, {args.shuffles} shuffles, groups of "
        f"{args.group_size} ({len(task_ids)} tasks, {len(rows)} executions)",
        "",
        "| prior | λ | anchor groups | seen/task | prior ρ | updated ρ | Δ (95% CI over tasks) | Δ (95% CI over shuffles) | tasks better |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        (dt, ht), (ds, hs) = r["diff_over_tasks"], r["diff_over_shuffles"]
        lines.append(
            f"| {r['prior']} | {r['shrinkage']:g} | {r['groups']} | {r['seen_per_task']:.1f} | "
            f"{r['prior_rho']:.3f} | {r['updated_rho']:.3f} | {dt:+.3f} ± {ht:.3f} | {ds:+.3f} ± {hs:.3f} | "
            f"{r['tasks_better']}/{r['tasks']} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "table.md").write_text(text + "\n")
        (args.out / "summary.json").write_text(
            json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

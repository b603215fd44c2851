"""Building the learned world model: a corpus of real executions on the training suite,
the fitted model, and its calibration on the held-out suite (never used for fitting).

    python -m wmrl_autoresearch.program.build --out DIR [--programs-per-task 24] [--heldout-programs-per-task 8]

Writes ``DIR/corpus_train.jsonl``, ``DIR/corpus_heldout.jsonl``, ``DIR/world_model.pt`` and
``DIR/calibration.json`` (+ ``calibration.png``). Copy ``world_model.pt`` into
``wmrl_autoresearch/program/data/`` to ship it.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wmrl_autoresearch.program.grammar import Program
from wmrl_autoresearch.program.render import render_script
from wmrl_autoresearch.program.world_model import fit_reward_model

__all__ = ["build_corpus", "fit_from_corpus", "calibration_report", "main"]


def build_corpus(env: Any, split: str, programs_per_task: int, seed: int, path: Path, batch: int = 8) -> list[dict]:
    """Execute uniformly sampled programs on every task of ``split``; append rows to ``path``.

    Resumable: the job list depends only on ``seed``, so rows already in ``path`` (from an
    interrupted build) are kept and their jobs skipped.
    """
    from rich.progress import Progress

    from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward

    reward_fn = AutoResearchScoreReward()
    rng = np.random.default_rng([seed, 0xC0])
    jobs = [(task, Program.sample(rng)) for task in env.tasks(split) for _ in range(programs_per_task)]
    order = rng.permutation(len(jobs))  # mix tasks so one slow task does not stall a batch
    jobs = [jobs[i] for i in order]
    rows: list[dict] = [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []
    done = len(rows)
    jobs = jobs[done:]
    with Progress() as progress, path.open("a") as f:
        bar = progress.add_task(f"executing {split} programs", total=len(jobs) + done, completed=done)
        for start in range(0, len(jobs), batch):
            chunk = jobs[start : start + batch]
            scripts = [render_script(p, classification=t.data.kind == "classification") for t, p in chunk]
            outcomes = env.execute([t for t, _ in chunk], scripts)
            for (task, program), outcome in zip(chunk, outcomes):
                row = {
                    "task_id": task.id,
                    "split": split,
                    "choices": list(program.choices),
                    "names": program.names,
                    "status": outcome.status,
                    "score": outcome.score,
                    "reward": reward_fn(task, outcome),
                    "runtime_s": outcome.info.get("runtime_s"),
                }
                rows.append(row)
                f.write(json.dumps(row) + "\n")
            f.flush()
            progress.update(bar, advance=len(chunk))
    return rows


def _arrays(rows: Sequence[dict], tasks_by_id: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = [r for r in rows if r["reward"] is not None]
    features = np.stack([np.asarray(tasks_by_id[r["task_id"]].features, dtype=np.float32) for r in rows])
    one_hot = np.stack([Program(tuple(r["choices"])).one_hot() for r in rows])
    return features, one_hot, np.array([r["reward"] for r in rows], dtype=np.float32)


HIDDEN, RIDGE = 0, 30.0
"""Chosen by leave-one-task-out cross-validation on the training corpus (within-task Spearman and
MSE; the held-out suite was not used): the linear model generalized across tasks as well as
MLPs, gradient boosting and random forests, and is the simplest."""


def fit_from_corpus(rows: Sequence[dict], tasks_by_id: dict, seed: int = 0, hidden: int = HIDDEN):
    features, one_hot, rewards = _arrays(rows, tasks_by_id)
    return fit_reward_model(features, one_hot, rewards, hidden=hidden, ridge=RIDGE, seed=seed)


def calibration_report(model, rows: Sequence[dict], tasks_by_id: dict) -> dict:
    """Rank correlation and residuals of predictions against real rewards (overall and within task)."""
    from scipy.stats import spearmanr

    features, one_hot, rewards = _arrays(rows, tasks_by_id)
    with torch.no_grad():
        pred = model(torch.as_tensor(features), torch.as_tensor(one_hot)).clamp(-1, 1).numpy()
    ids = [r["task_id"] for r in rows if r["reward"] is not None]
    within = [
        spearmanr(pred[m], rewards[m]).statistic
        for tid in sorted(set(ids))
        for m in [np.array([i == tid for i in ids])]
        if m.sum() > 2 and np.std(rewards[m]) > 0
    ]
    resid = rewards - pred
    return {
        "n": int(len(rewards)),
        "spearman": float(spearmanr(pred, rewards).statistic),
        "spearman_within_task_mean": float(np.nanmean(within)) if within else None,
        "residual_mean": float(resid.mean()),
        "residual_std": float(resid.std()),
        "mse": float(np.mean(resid**2)),
        "predicted": pred.tolist(),
        "real": rewards.tolist(),
        "task_ids": ids,
    }


def _plot(report: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.scatter(report["predicted"], report["real"], s=8, alpha=0.5)
    ax.plot([-1, 1], [-1, 1], "k--", lw=1)
    ax.set_xlabel("predicted reward")
    ax.set_ylabel("real reward")
    ax.set_title(f"{title}: Spearman {report['spearman']:.2f}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--programs-per-task", type=int, default=24)
    parser.add_argument("--heldout-programs-per-task", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout-s", type=float, default=30.0, help="per-run time limit (seconds)")
    parser.add_argument("--sandbox", default="docker", help="docker (default) or local-unsafe")
    parser.add_argument(
        "--fit-only", action="store_true", help="fit and report on the corpus files already in --out, executing nothing"
    )
    parser.add_argument("--fresh", action="store_true", help="discard corpus files already in --out (default: resume)")
    args = parser.parse_args(argv)
    from wmrl_autoresearch.environment import AutoResearchEnvironment

    args.out.mkdir(parents=True, exist_ok=True)
    env = AutoResearchEnvironment(sandbox=args.sandbox, limits={"timeout_s": args.timeout_s})
    tasks_by_id = {t.id: t for split in ("train", "heldout") for t in env.tasks(split)}
    started = time.perf_counter()
    try:
        corpora = {}
        for split, n in (("train", args.programs_per_task), ("heldout", args.heldout_programs_per_task)):
            path = args.out / f"corpus_{split}.jsonl"
            if args.fit_only:
                corpora[split] = [json.loads(line) for line in path.read_text().splitlines() if line]
                continue
            if args.fresh:
                path.write_text("")
            corpora[split] = build_corpus(env, split, n, args.seed, path)
    finally:
        env.close()
    model = fit_from_corpus(corpora["train"], tasks_by_id, seed=args.seed)
    reports = {
        split: calibration_report(model, rows, tasks_by_id)
        for split, rows in corpora.items()
        if sum(r["reward"] is not None for r in rows) > 2
    }
    info = {
        "trained_on": "train",
        "n_train_runs": len(corpora["train"]),
        "seed": args.seed,
        "calibration": {
            s: {k: v for k, v in r.items() if k not in ("predicted", "real", "task_ids")} for s, r in reports.items()
        },
        "execution_wall_s": time.perf_counter() - started,
    }
    from wmrl_autoresearch.tasks.task import N_FEATURES

    torch.save(
        {"model": model.state_dict(), "n_features": N_FEATURES, "hidden": HIDDEN, "info": info},
        args.out / "world_model.pt",
    )
    (args.out / "calibration.json").write_text(json.dumps(info, indent=2))
    for split, report in reports.items():
        _plot(report, args.out / f"calibration_{split}.png", f"{split} suite")
    print(json.dumps(info["calibration"], indent=2))
    print(f"world model and corpus in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

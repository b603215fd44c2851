"""Fitting the world model on the execution corpus, and how well it ranks new programs.

    wmrl-autoresearch build-world-model [--families W] [--corpus PATH] [--out DIR] [--report DIR] [--members 5]
    (the same as python -m wmrl_autoresearch.program.build ...)

Reads the corpus of real executions on the training tasks (default: the shipped
``data/corpus.jsonl.gz``; build one with ``wmrl-autoresearch build-corpus``), refuses any
held-out task in it, fits the :class:`~.outcome_model.OutcomeModel` and, with ``--out``, writes
``DIR/outcome_model.pkl`` (a checkpoint for ``world_model.kwargs.checkpoint``; the default
model needs none: it is fitted on the shipped corpus at first use and cached). With
``--report`` it also cross-validates, on the same folds grouped by program
(:mod:`~.cross_validation`), the outcome model and the ridge baseline, and writes
``world_model_cv.json``, ``world_model_calibration.png`` (reliability of P(failure), predicted
against real reward, coverage of the predicted spread) and ``world_model_cv.md`` there.
``--from-json RECORD --report DIR`` rewrites ``DIR/RECORD-stem.md`` from such a JSON record alone, fitting
nothing. ``--families W`` fits (and reports) on the world-model families' executions only
(:mod:`wmrl_autoresearch.tasks.families`): the model of the quickstart, which never saw its
training families R nor the held-out E (``world_model.kwargs.fit_families: [W]`` fits the same
model at first use; the fit is deterministic for a seed).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from wmrl_autoresearch.program.fitting import (
    OUTCOME_SETTINGS,
    checked_training_rows,
    fit_outcome_model,
    rows_of_families,
    training_features,
)
from wmrl_autoresearch.program.world_model import fit_reward_model

__all__ = ["HIDDEN", "RIDGE", "cross_validation_report", "main"]

HIDDEN, RIDGE = 0, 30.0
"""The ridge baseline's settings (chosen by leave-one-task-out cross-validation on the
built-in training suite)."""


def _ridge_fit_predict(train: dict, test: dict) -> np.ndarray:
    model = fit_reward_model(
        train["features"], train["one_hot"], train["reward"].astype(np.float32), hidden=HIDDEN, ridge=RIDGE
    )
    with torch.no_grad():
        return model(torch.as_tensor(test["features"]), torch.as_tensor(test["one_hot"])).clamp(-1, 1).numpy()


def cross_validation_report(rows: Sequence[dict], features: dict, folds: int = 5, seed: int = 0, **settings) -> dict:
    """Out-of-fold predictions of the outcome model and the ridge model on shared program folds."""
    from wmrl_autoresearch.program.cross_validation import corpus_arrays, cross_validate
    from wmrl_autoresearch.program.outcome_model import OutcomeModel, design_matrix

    def outcome(**override):
        def fit_predict(train: dict, test: dict) -> dict[str, np.ndarray]:
            model = OutcomeModel(**{**OUTCOME_SETTINGS, **settings, **override}, seed=seed)
            x = design_matrix(train["features"], train["choices"])
            model.fit(x, train["reward"], failed=train["failed"], task_ids=train["task_ids"])
            pred = model.predict_outcome(design_matrix(test["features"], test["choices"]), test["task_ids"])
            return {"reward": pred.reward, "p_fail": pred.p_fail, "reward_std": pred.reward_std}

        return fit_predict

    a = corpus_arrays(rows, features)
    models = {
        "outcome_model": outcome(),
        # level plus effect on centred scores: what scaling by the task's spread adds, on the same folds
        "outcome_model_task_level": outcome(score_model="task_level"),
        "ridge": _ridge_fit_predict,
    }
    return {"arrays": a, "results": cross_validate(a, models, folds, seed)}


def _plot_calibration(report: dict, path: Path) -> dict:
    """Three panels: reliability of P(failure), predicted vs real reward, coverage of the spread."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, res = report["arrays"], report["results"]
    oof = res["outcome_model"]["oof"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    bins = np.linspace(0, 1, 11)
    which = np.clip(np.digitize(oof["p_fail"], bins) - 1, 0, 9)
    centers, freq, counts = [], [], []
    for b in range(10):
        m = which == b
        if m.sum():
            centers.append(oof["p_fail"][m].mean())
            freq.append(a["failed"][m].mean())
            counts.append(int(m.sum()))
    axes[0].plot([0, 1], [0, 1], "k--", lw=1)
    axes[0].plot(centers, freq, "o-")
    for x, y, n in zip(centers, freq, counts):
        axes[0].annotate(str(n), (x, y), fontsize=7, xytext=(3, -8), textcoords="offset points")
    axes[0].set_xlabel("predicted P(failure)")
    axes[0].set_ylabel("observed failure rate")
    axes[0].set_title("failure: reliability (out of fold)")
    for name, color in (
        ("ridge", "tab:gray"),
        ("outcome_model_task_level", "tab:orange"),
        ("outcome_model", "tab:blue"),
    ):
        axes[1].scatter(
            res[name]["oof"]["reward"],
            a["reward"],
            s=5,
            alpha=0.35,
            color=color,
            label=f"{name}: within-task Spearman {res[name]['within_task_spearman_per_fold']:.2f}",
        )
    axes[1].plot([-1, 1], [-1, 1], "k--", lw=1)
    axes[1].set_xlabel("predicted reward (out of fold)")
    axes[1].set_ylabel("real reward")
    axes[1].legend(fontsize=7, loc="lower right")
    axes[1].set_title("reward: new programs of training tasks")
    z = np.abs(a["reward"] - oof["reward"]) / np.maximum(oof["reward_std"], 1e-9)
    levels = np.linspace(0.25, 3, 12)
    coverage = [(z <= k).mean() for k in levels]
    from scipy.stats import norm

    axes[2].plot(levels, [2 * norm.cdf(k) - 1 for k in levels], "k--", lw=1, label="Gaussian")
    axes[2].plot(levels, coverage, "o-", label="observed")
    axes[2].set_xlabel("k (interval = prediction ± k · predicted std)")
    axes[2].set_ylabel("fraction of real rewards inside")
    axes[2].set_title("uncertainty: coverage")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    brier = float(np.mean((oof["p_fail"] - a["failed"]) ** 2))
    return {
        "failure_brier": brier,
        "failure_brier_base_rate": float(np.mean((a["failed"].mean() - a["failed"]) ** 2)),
        "coverage_1sd": float((z <= 1).mean()),
        "coverage_2sd": float((z <= 2).mean()),
    }


def cv_table(summary: dict) -> str:
    """The Markdown table of a cross-validation summary (``world_model_cv.json``): each model's within-task
    Spearman, scored within one fold's model and pooled out of fold, and the calibration of P(failure)
    and of the predicted spread."""
    lines = [
        f"Within-task Spearman on new programs of the training tasks: {summary['folds']}-fold cross-validation "
        f"grouped by program, {summary['n_executions']} executions ({summary['corpus']}); mean over tasks, 95% t-interval",
        "",
        "(*one model*: a task's new programs in one fold, ranked by that fold's model, what GRPO sees; "
        "*pooled*: a task's out-of-fold predictions from different fold models, whose task levels differ)",
        "",
        "| model | within-task Spearman, one model | task-folds | pooled out of fold | tasks |",
        "|---|---|---|---|---|",
    ]
    for name, r in summary["models"].items():
        lines.append(
            f"| {name} | {r['within_task_spearman_per_fold']:.3f} ± {r['per_fold_ci95']:.3f} | {r['n_task_folds']} | "
            f"{r['within_task_spearman']:.3f} ± {r['ci95']:.3f} | {r['n_tasks']} |"
        )
    c = summary["calibration"]
    lines += [
        "",
        f"P(failure): Brier {c['failure_brier']:.4f} (base rate alone {c['failure_brier_base_rate']:.4f}); "
        f"real rewards within ±1 / ±2 predicted std: {c['coverage_1sd']:.2f} / {c['coverage_2sd']:.2f} "
        "(Gaussian: 0.68 / 0.95)",
    ]
    return "\n".join(lines) + "\n"


def _page_from_record(parser: argparse.ArgumentParser, record: Path, report: Path | None) -> int:
    from wmrl_core.experiments.report import page_from_record

    if report is None:
        parser.error("--from-json needs --report DIR (the folder for the page)")
    try:
        print(
            page_from_record(
                record, report / f"{record.stem}.md", cv_table, "a world_model_cv.json written by --report"
            ),
            end="",
        )
    except ValueError as exc:
        parser.error(f"--from-json {exc}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="wmrl-autoresearch build-world-model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--corpus", default=None, help="corpus .jsonl(.gz) (default: the shipped one)")
    parser.add_argument("--out", type=Path, default=None, help="write the fitted model here (outcome_model.pkl)")
    parser.add_argument("--report", type=Path, default=None, help="also cross-validate and write the report here")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--members", type=int, default=OUTCOME_SETTINGS["members"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--families",
        nargs="+",
        default=None,
        help="fit on these families' executions only: family names or W / R (default: every training family)",
    )
    parser.add_argument(
        "--from-json", type=Path, default=None, help="with --report DIR: write DIR/NAME.md from this NAME.json record"
    )
    args = parser.parse_args(argv)
    if args.from_json is not None:
        from wmrl_core.experiments.report import refuse_run_flags

        refuse_run_flags(parser, args, keep=("from_json", "report"))
        return _page_from_record(parser, args.from_json, args.report)
    from wmrl_autoresearch.program.corpus import CORPUS_PATH, load_corpus
    from wmrl_autoresearch.program.world_model import SHIPPED_CHECKPOINT, save_outcome_model

    features = training_features()
    try:
        rows = rows_of_families(checked_training_rows(load_corpus(args.corpus), features), args.families)
    except ValueError as exc:
        parser.error(str(exc))
    started = time.process_time()
    model = fit_outcome_model(args.corpus, seed=args.seed, members=args.members, families=args.families)
    corpus_name = str(args.corpus) if args.corpus else CORPUS_PATH.name
    info = {
        "corpus": corpus_name,
        "n_executions": len(rows),
        "n_tasks": len({r["task_id"] for r in rows}),
        "families": sorted({r["family"] for r in rows}),
        "fit": {"corpus": args.corpus, "seed": args.seed, "members": args.members, "families": args.families},
        "fit_cpu_s": round(time.process_time() - started, 1),
    }
    which = f" of families {' '.join(args.families)}" if args.families else ""
    print(f"outcome model fitted on {len(rows)} executions of {info['n_tasks']} training tasks{which}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        save_outcome_model(model, args.out / SHIPPED_CHECKPOINT, info)
        print(f"written to {args.out / SHIPPED_CHECKPOINT}")
    if args.report is not None:
        args.report.mkdir(parents=True, exist_ok=True)
        report = cross_validation_report(rows, features, args.folds, args.seed, members=args.members)
        summary = {name: {k: v for k, v in r.items() if k != "oof"} for name, r in report["results"].items()}
        summary = {
            "corpus": corpus_name,
            "n_executions": int(len(report["arrays"]["reward"])),
            "folds": args.folds,
            "grouped_by": "program (choices); every model on the same folds",
            "models": summary,
            "calibration": _plot_calibration(report, args.report / "world_model_calibration.png"),
        }
        (args.report / "world_model_cv.json").write_text(json.dumps(summary, indent=2))
        (args.report / "world_model_cv.md").write_text(cv_table(summary))
        print(cv_table(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

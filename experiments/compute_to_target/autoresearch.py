"""The AutoResearch suite of ``wmrl experiment compute-to-target`` (``--suite autoresearch``).

Real Docker execution (minutes). Besides the arms of every suite it runs ``noise_control``: the
``world_model`` arm's settings on i.i.d. uniform rewards, the control of any held-out gain. Its
report adds the one-off cost of the learned world model's training corpus
(:func:`corpus_cost`) and the compute curves with and without it.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
from wmrl_autoresearch.experiments import config_path
from wmrl_autoresearch.program.corpus import load_corpus

from experiments.synthetic.theorem import compute_to_reach, plot_curves
from wmrl_core.experiments.stats import mean_ci95
from wmrl_core.metrics import read_metrics


def report_world_model_corpus(out: Path, results: dict, summary: dict, spec: dict[str, Any]) -> None:
    """Price the world model's corpus into ``summary`` and ``table.md``, and draw the compute
    curves with the corpus charged to ``wmrl`` (``reward_vs_compute.png``) and without it
    (``reward_vs_compute_runs.png``)."""
    summary["world_model_corpus"] = corpus_cost(spec["world_model_corpus"], out, results, summary)
    with (out / "table.md").open("a") as f:
        f.write("\n" + corpus_note(summary["world_model_corpus"]) + "\n")
    if "wmrl" in results:
        cost = summary["world_model_corpus"]["cost_s"]
        # with the one-off corpus shifted onto wmrl, and without it on the runs' own compute scale
        one_off = {"wmrl": (cost, f"wmrl + world-model corpus ({cost:.0f} s, one-off)")}
        for name, shifted in (("reward_vs_compute.png", one_off), ("reward_vs_compute_runs.png", None)):
            plot_curves(
                results,
                out / name,
                ylabel=spec["label"].replace("final ", ""),
                target=summary["target"],
                target_label="real's final",
                shifted=shifted,
                xscale="linear",
            )


def corpus_cost(corpus: tuple[str, str], out: Path, results: dict, summary: dict) -> dict:
    """Price the world model's training corpus (``n`` real executions, run once, before any
    training): each execution at its recorded sandbox CPU seconds (``cost_s``, what the ledger
    charges a real execution), one recorded without it at the execution rate the ``real`` arm
    measured in this same run; and the ``real / wmrl`` speed-up if one run had to pay for it:
    :math:`s_i = C^{real}_i / (C^{wmrl}_i + \\sum_j e_j)`."""
    package, name = corpus
    rows = load_corpus(str(files(package).joinpath(name)))
    n = len(rows)
    per_rollout = []
    for seed in range(len(results["real"].curves)):
        last = read_metrics(out / "runs" / f"real-seed{seed}")[-1]
        per_rollout.append(last["compute/execution_s"] / max(1, last["compute/execution_items"]))
    recorded = [r["cost_s"] for r in rows if isinstance(r.get("cost_s"), (int, float))]
    cost = float(sum(recorded)) + (n - len(recorded)) * float(np.mean(per_rollout))
    target = summary["target"]
    ratios = []
    if "wmrl" in results:
        for real_curve, wmrl_curve in zip(results["real"].curves, results["wmrl"].curves):
            base, arm = compute_to_reach(real_curve, target), compute_to_reach(wmrl_curve, target)
            if base is not None and arm is not None:
                ratios.append(base / (arm + cost))
    speed, ci = mean_ci95(ratios) if ratios and len(ratios) == len(results["real"].curves) else (None, None)
    return {
        "executions": n,
        "executions_with_recorded_cost": len(recorded),
        "execution_s_per_rollout": float(np.mean(per_rollout)),
        "cost_s": cost,
        "speedup_including_corpus": speed,
        "speedup_including_corpus_ci95": ci,
    }


def corpus_note(c: dict) -> str:
    speed = (
        f"{c['speedup_including_corpus']:.1f}x ± {c['speedup_including_corpus_ci95']:.1f}"
        if c["speedup_including_corpus"] is not None
        else "undefined (an arm did not reach the target)"
    )
    return (
        f"World model corpus (one-off, not in the table): {c['executions']} real executions of the training tasks, "
        f"{c['cost_s']:.0f} s ({c['executions_with_recorded_cost']} at their recorded sandbox CPU seconds, the rest "
        f"at the real arm's measured {c['execution_s_per_rollout']:.2f} s per rollout). "
        f"real / wmrl if a single run paid for it: {speed}."
    )


SUITE: dict[str, Any] = {
    "config": config_path("quickstart.yaml"),
    "metric": "eval/reward",
    "label": "final held-out score",
    "arms": {
        "real": ["mode=real", "steps=8"],
        "world_model": ["mode=world_model", "steps=16"],
        "wmrl": ["mode=wmrl", "steps=16"],
        "wmrl_inverse_variance": ["mode=wmrl", "steps=16", "fusion.method=inverse_variance"],
        "wmrl_shrinkage": ["mode=wmrl", "steps=16", "fusion.method=shrinkage"],
        # `debias`/`denoise`: the sections' earlier names, kept in arm names that finished runs and archives carry
        "wmrl_no_debias": ["mode=wmrl", "steps=16", "calibration.enabled=false"],
        "wmrl_no_denoise": ["mode=wmrl", "steps=16", "fusion.enabled=false"],
        # the control: the world_model arm's settings with i.i.d. U(0, 1) rewards (the `noise`
        # world model); a held-out gain here is the optimiser's drift, not learning
        "noise_control": ["mode=world_model", "steps=16", "world_model.name=noise"],
    },
    # common random numbers: every evaluation of a seed (every step, every arm) samples with
    # the same draws, so arms are compared on mostly the same held-out programs
    "overrides": [
        "logging.tensorboard=false",
        "checkpoint.every=0",
        "eval.every=4",
        "eval.samples_per_task=4",
        "eval.common_random_numbers=true",
    ],
    "quick": [
        "eval.every=1",
        "eval.samples_per_task=2",  # two per task: the evaluation's own noise is estimable
        "eval.max_tasks=3",
        "rollout.batch_tasks=2",
        "rollout.group_size=2",
    ],
    "quick_steps": 0.125,
    "seeds": 3,
    # the learned world model was fitted on real executions of the training tasks: a one-off
    # cost that a single run would pay too, reported beside the per-run figures
    "world_model_corpus": ("wmrl_autoresearch.program", "data/corpus.jsonl.gz"),
    "report": report_world_model_corpus,
}
"""The suite's spec (see :mod:`experiments.compute_to_target.compute_to_target`)."""

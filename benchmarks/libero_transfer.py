"""The LIBERO-Long transfer experiment: base policy vs four post-training arms, same base checkpoint.

Arms (all from ``--base``; ``configs/libero/libero_long.yaml`` unless ``--config``):

* ``base``: no RL, only evaluated;
* ``real``: GRPO on the simulator's sparse success, every group simulated;
* ``world_model``: GRPO on the imagination world model's raw predictions, no simulator;
* ``wmrl-imagination``: WMRL with the imagination world model, ~10% simulated anchor groups;
* ``wmrl-progress``: WMRL with ``libero-progress`` (the paper's arm): every group simulated,
  the progress of the executed trajectory calibrated and fused against the anchors' success;
* ``noise_control``: ``world_model``'s settings on pure-noise scores (the control of every gain).

Seeds outer, arms inner (machine noise hits every arm alike). Every arm-seed is its own run
directory under ``--out``: training resumes from its checkpoint, evaluations already written
are kept, so an interrupted experiment continues where it stopped; ``--archive`` keeps each
finished arm-seed's results (no checkpoint, a few kB) in a folder that can be committed, so an
experiment longer than one machine's life resumes on the next one. Evaluation samples the
policy (as in training) ``--rollouts`` times from each init state of the training split
(``--train-init``) and of the held-out split (``--heldout-init``, LIBERO's 40-49), before
(the ``base`` arm of the same seed) and after. Reported per arm: success with 95% intervals
(Wilson for the pooled episodes, t over seeds), simulator / world-model / policy seconds from
the training ledger (declared cost) and their wall time, and a plot of held-out success
against simulator seconds; then the analysis fixed before the last seed (:func:`analysis`): which
arms learn beyond the noise control, and whether ``wmrl-imagination`` meets the compute floor.
Writes ``<name>.md``, ``<name>.json``, ``<name>.png`` (success against simulator seconds) and
``<name>_minus_control.png`` (each arm minus the control, per seed) to ``--docs``.

    python benchmarks/libero_transfer.py --base plugins/libero/checkpoints/small_vla_dagger_t0-9.pt \\
        --wm plugins/libero/checkpoints/libero_wm_t0-9.pt --seeds 0,1,2 --tasks 0-9 --out runs/libero_transfer
    ... --quick          # every arm end to end, one task, 2 steps, tiny groups (the CI check)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

ARMS: dict[str, list[str] | None] = {
    "base": None,
    "real": ["mode=real"],
    "world_model": ["mode=world_model"],
    "wmrl-imagination": ["mode=wmrl", "world_model.name=libero-imagination", "anchors.fraction=0.1"],
    "wmrl-progress": ["mode=wmrl", "world_model.name=libero-progress", "anchors.fraction=0.5"],
    # the control of every gain: the world_model arm's settings (imagined episodes, so that the
    # rollouts have log-probs) scored i.i.d. U(0, 1); what this arm "learns" is the optimiser's drift
    "noise_control": ["mode=world_model", "world_model.kwargs.noise_scores=true"],
}
"""Training overrides per arm (``None``: not trained)."""

LEDGER_KEYS = {
    "simulator_s": "compute/execution_s",
    "world_model_s": "compute/world_model_s",
    "policy_s": "compute/generation_s",
    "simulator_wall_s": "wall/execution_s",
    "world_model_wall_s": "wall/world_model_s",
    "policy_wall_s": "wall/generation_s",
    "simulated_episodes": "compute/execution_items",
}


def parse_ints(text: str) -> list[int]:
    """``"0-3,7"`` -> ``[0, 1, 2, 3, 7]``."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _config(args, arm: str, seed: int, run_dir: Path):
    from wmrl_core.config import load_config

    overrides = [
        *(ARMS[arm] or []),
        f"seed={seed}",
        f"run_dir={run_dir}",
        f"policy.kwargs.checkpoint={args.base}",
        f"world_model.kwargs.checkpoint={args.wm}",
        f"environment.kwargs.task_indices=[{','.join(map(str, args.tasks))}]",
        "resume=true",
        *args.override,
    ]
    if args.steps:
        overrides.append(f"steps={args.steps}")
    return load_config(args.config, overrides)


def train_arm(args, arm: str, seed: int, run_dir: Path) -> dict[str, Any]:
    """Train (or resume, or skip when finished) one arm-seed; returns its ledger totals."""
    from wmrl_core.metrics import read_metrics
    from wmrl_core.trainer import train

    cfg = _config(args, arm, seed, run_dir)
    summary = run_dir / "summary.json"
    if not (summary.exists() and json.loads(summary.read_text())["steps"] == cfg.steps):
        start = time.process_time()
        train(cfg)
        (run_dir / "train_cpu_s.txt").write_text(f"{time.process_time() - start:.1f}\n")
    last = read_metrics(run_dir)[-1]
    return {k: float(last.get(v) or 0.0) for k, v in LEDGER_KEYS.items()}


def anchor_diagnostics(run_dir: Path, group_size: int) -> dict[str, float]:
    """What the world model was worth on the anchors, the groups both simulated and predicted:

    * ``anchor_auroc``: P(world-model score of a success > that of a failure of the *same group*)
      (same init state, different noise draws: the ranking GRPO uses; ties 1/2), and its pairs;
    * ``overprediction``: mean world-model score minus mean real success on the anchors;
    * ``lambda_late``: mean fusion weight (``fusion/lambda``) over the second half of training;
    * ``mixed_groups``: share of anchor groups with both a success and a failure (the others give
      GRPO no advantage whatever the world model says), of ``anchor_groups``.

    NaN where the arm has no anchors (``real``, ``world_model``) or no group with both outcomes."""
    from wmrl_libero.world_models.quality import within_task_auroc

    from wmrl_core.metrics import read_metrics

    keys, labels, scores, real = [], [], [], []
    pairs_file = run_dir / "anchor_pairs.jsonl"
    for line in pairs_file.read_text().splitlines() if pairs_file.exists() else []:
        row = json.loads(line)
        for i, (w, y) in enumerate(zip(row["world_model"], row["real"])):
            keys.append((row["step"], i // group_size))
            labels.append(bool(y >= 0.5))
            scores.append(float(w))
            real.append(float(y))
    auroc, pairs = within_task_auroc(keys, labels, scores) if keys else (math.nan, 0)
    outcomes: dict[tuple[int, int], set[bool]] = {}
    for key, label in zip(keys, labels):
        outcomes.setdefault(key, set()).add(label)
    records = [r for r in read_metrics(run_dir) if r["step"] > 0] if (run_dir / "metrics.jsonl").exists() else []
    late = [r["fusion/lambda"] for r in records[len(records) // 2 :] if r.get("fusion/lambda") is not None]
    return {
        "anchor_auroc": auroc,
        "anchor_pairs": float(pairs),
        "overprediction": float(np.mean(scores) - np.mean(real)) if keys else math.nan,
        "lambda_late": float(np.mean(late)) if late else math.nan,
        "mixed_groups": float(np.mean([len(o) == 2 for o in outcomes.values()])) if outcomes else math.nan,
        "anchor_groups": float(len(outcomes)),
    }


def score_trend(run_dir: Path) -> dict[str, float]:
    """Mean world-model score of the training rollouts (``reward/world_model_mean``) over the first
    and the second half of training: a world model being exploited scores the policy ever higher
    while its real success stays put. Empty where the arm has no world-model scores."""
    from wmrl_core.metrics import read_metrics

    if not (run_dir / "metrics.jsonl").exists():
        return {}
    scores = [r["reward/world_model_mean"] for r in read_metrics(run_dir) if r["step"] > 0]
    scores = [x for x in scores if x is not None]
    if len(scores) < 2:
        return {}
    half = len(scores) // 2
    return {"first_half": float(np.mean(scores[:half])), "second_half": float(np.mean(scores[half:]))}


ARCHIVED_FILES = (
    "config.yaml",
    "summary.json",
    "metrics.jsonl",
    "anchor_pairs.jsonl",
    "train_cpu_s.txt",
    "eval_train.json",
    "eval_heldout.json",
)
"""What of a finished arm-seed survives in ``--archive`` (no checkpoint: a few kB, fit for git)."""

SETTINGS_KEYS = (
    "base",
    "wm",
    "config",
    "suite",
    "tasks",
    "train_init",
    "heldout_init",
    "rollouts",
    "steps",
    "max_episode_steps",
    "quick",
)
"""The arguments every arm-seed of one archive must share (``settings.json``), with the user's
``--override`` list; ``--workers`` is not one (which worker runs an episode does not change it)."""


def experiment_settings(args) -> dict[str, Any]:
    """The settings that make arm-seeds comparable, paths relative to the repository when inside it."""

    def rel(path: str) -> str:
        p = Path(path).resolve()
        return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)

    out = {k: getattr(args, k) for k in SETTINGS_KEYS}
    out.update(base=rel(args.base), wm=rel(args.wm), config=rel(args.config), overrides=list(args.user_override))
    return out


def check_archive_settings(archive: Path, settings: dict[str, Any]) -> None:
    """Write ``archive/settings.json`` the first time; afterwards refuse other settings, so that an
    archive never pools arm-seeds of different experiments."""
    path = archive / "settings.json"
    if not path.exists():
        archive.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2) + "\n")
        return
    stored = json.loads(path.read_text())
    differ = sorted(k for k in set(stored) | set(settings) if stored.get(k) != settings.get(k))
    if differ:
        detail = "; ".join(f"{k}: archived {stored.get(k)!r}, now {settings.get(k)!r}" for k in differ)
        raise SystemExit(
            f"--archive {archive} holds arm-seeds of another experiment ({detail}); "
            "pass the same arguments, or another --archive folder"
        )


def is_finished(run_dir: Path) -> bool:
    """Both evaluations written: the arm-seed is done (training, when it trains, came first)."""
    return all((run_dir / f"eval_{s}.json").exists() for s in ("train", "heldout"))


def archive_run(run_dir: Path, dest: Path) -> None:
    """Copy a finished arm-seed's results (``ARCHIVED_FILES`` present) to ``dest``."""
    if not is_finished(run_dir):
        raise ValueError(f"{run_dir} is not evaluated yet; only finished arm-seeds are archived")
    _copy_results(run_dir, dest)


def restore_run(src: Path, run_dir: Path) -> bool:
    """Put an archived arm-seed back into ``run_dir`` (a wiped machine: the run folder is gone) so
    that training and evaluation are skipped; False when ``src`` holds no finished arm-seed or
    ``run_dir`` is already finished."""
    if not is_finished(src) or is_finished(run_dir):
        return False
    if (run_dir / "checkpoints").exists():
        raise SystemExit(
            f"{run_dir} holds an unfinished run and {src} a finished one of the same arm-seed; "
            f"remove one of them (rm -r {run_dir}, or the archived copy) and run again"
        )
    _copy_results(src, run_dir)
    return True


def _copy_results(src: Path, dest: Path) -> None:
    """Copy the ``ARCHIVED_FILES`` that ``src`` holds into ``dest`` (made if missing)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ARCHIVED_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dest / name)


def _policy(args, run_dir: Path | None):
    """The base policy, with the arm's trained weights when ``run_dir`` holds a checkpoint."""
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    from wmrl_core.checkpoint import has_checkpoint, load_checkpoint

    policy = SmallVLAPolicy(checkpoint=args.base, max_steps=args.max_episode_steps)
    if run_dir is not None and has_checkpoint(run_dir / "checkpoints"):
        policy.load_state_dict(load_checkpoint(run_dir / "checkpoints")["policy"])
    return policy


def evaluate_arm(args, env, arm: str, seed: int, run_dir: Path) -> dict[str, dict[str, int]]:
    """Success counts ``{split: {"successes", "episodes", "infrastructure_failures"}}``; each
    split's result is written to ``run_dir/eval_<split>.json`` once and reused."""
    import torch

    from wmrl_core.types import Task

    out = {}
    policy = None
    for split, inits in (("train", args.train_init), ("heldout", args.heldout_init)):
        path = run_dir / f"eval_{split}.json"
        if path.exists():
            out[split] = json.loads(path.read_text())
            continue
        policy = policy or _policy(args, None if arm == "base" else run_dir)
        tasks = [
            Task(
                id=f"{args.suite}/{t}/{s}",
                description=_language(env, t),
                data={"suite": args.suite, "task_index": t, "init_state": s},
            )
            for t in args.tasks
            for s in inits
        ]
        with torch.random.fork_rng(), torch.no_grad():
            torch.manual_seed(1_000_003 * seed + (0 if split == "train" else 1))  # same noise for every arm
            rollouts = policy.generate(tasks, args.rollouts)
        env.on_episode = EvaluationProgress(f"seed {seed} {arm} {split}", len(tasks) * args.rollouts)
        try:
            outcomes = env.execute(rollouts.tasks, rollouts.solutions)
        finally:
            env.on_episode = None
        ok = [o for o in outcomes if o.status == "ok"]
        result = {
            "successes": int(sum(o.score for o in ok)),
            "episodes": len(ok),
            "infrastructure_failures": len(outcomes) - len(ok),
        }
        run_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result) + "\n")
        out[split] = result
    return out


class EvaluationProgress:
    """Prints ``label: k/n episodes, s successes, elapsed`` every ``every`` episodes and at the end
    (an evaluation of hundreds of episodes runs for tens of minutes)."""

    def __init__(self, label: str, total: int, every: int = 25):
        self.label, self.total, self.every = label, total, every
        self.done = self.successes = 0
        self.started = time.perf_counter()

    def __call__(self, result) -> None:
        self.done += 1
        self.successes += int(result.status == "ok" and result.success)
        if self.done % self.every == 0 or self.done == self.total:
            elapsed = time.perf_counter() - self.started
            print(
                f"{self.label}: {self.done}/{self.total} episodes, {self.successes} successes, {elapsed:.0f} s",
                flush=True,
            )


def _language(env, task_index: int) -> str:
    return next(t.description for t in env.tasks("heldout") if t.data["task_index"] == task_index)


def summarize(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per arm: pooled success with Wilson interval, mean over seeds with t-interval, before
    (``base`` of the same seeds) and after, and ledger seconds (mean over seeds)."""
    from wmrl_libero.stats import wilson_interval

    from wmrl_core.experiment import mean_ci95
    from wmrl_core.metrics import nanmean

    def success(runs: list[dict[str, Any]], split: str) -> dict[str, Any]:
        k = sum(r["eval"][split]["successes"] for r in runs)
        n = sum(r["eval"][split]["episodes"] for r in runs)
        per_seed = [r["eval"][split]["successes"] / max(r["eval"][split]["episodes"], 1) for r in runs]
        mean, half = mean_ci95(per_seed)
        return {
            "successes": k,
            "episodes": n,
            "rate": k / n if n else math.nan,
            "wilson95": list(wilson_interval(k, n)),
            "seed_mean": mean,
            "seed_ci95": half,
            "per_seed": per_seed,
        }

    def gain(runs: list[dict[str, Any]], split: str, reference: str = "base") -> dict[str, Any]:
        """After minus the ``reference`` arm of the same seed (``base``: before), paired by seed."""
        before = {r["seed"]: r["eval"][split] for r in results.get(reference, [])}
        diffs = [
            r["eval"][split]["successes"] / max(r["eval"][split]["episodes"], 1)
            - before[r["seed"]]["successes"] / max(before[r["seed"]]["episodes"], 1)
            for r in runs
            if r["seed"] in before
        ]
        mean, half = mean_ci95(diffs)
        return {"mean": mean, "ci95": half, "per_seed": diffs}

    out = {}
    for arm, runs in results.items():
        if not runs:
            continue
        out[arm] = {
            "seeds": [r["seed"] for r in runs],
            "train": success(runs, "train"),
            "heldout": success(runs, "heldout"),
            "train_gain": gain(runs, "train"),
            "heldout_gain": gain(runs, "heldout"),
            "train_minus_control": gain(runs, "train", "noise_control"),
            "heldout_minus_control": gain(runs, "heldout", "noise_control"),
            "heldout_minus_real": gain(runs, "heldout", "real"),
            "ledger": {k: float(np.mean([r["ledger"][k] for r in runs])) for k in LEDGER_KEYS},
            "train_cpu_s": float(np.mean([r.get("train_cpu_s", 0.0) for r in runs])),
            "anchors": _pooled_diagnostics([r.get("anchors") for r in runs]),
            "score_trend": {
                half: nanmean([r["score_trend"][half] for r in runs if r.get("score_trend")])
                for half in ("first_half", "second_half")
            }
            if any(r.get("score_trend") for r in runs)
            else {},
        }
    return out


LEARNING_ARMS = ("real", "world_model", "wmrl-imagination", "wmrl-progress")
"""The trained arms the analysis judges (``noise_control`` is their control)."""

IMAGINING_ARMS = ("wmrl-imagination", "world_model", "noise_control")
"""The arms whose training rollouts are scored in imagination (the control's scores are noise)."""


def analysis(summary: dict[str, Any], min_seeds: int = 3, floor_ratio: float = 3.0) -> dict[str, Any]:
    """The analysis fixed before the last seed was seen (README, LIBERO-Long).

    Learning rule, per trained arm: with d_s = success_arm,s - success_control,s on the held-out
    split (paired by seed s), the arm learns iff it has at least ``min_seeds`` seeds and the 95%
    t-interval mean(d) ± t_{0.975, n-1} sd(d) / sqrt(n) lies above zero.

    Compute floor (issue 14): ``wmrl-imagination`` reaches ``real``'s final success with
    ``floor_ratio`` x less simulator compute. It is testable only where ``real`` learns (otherwise
    both end at noise level and there is no gain to reach); it is met where, in addition, the
    held-out difference wmrl-imagination - real (paired by seed) has an interval reaching zero or
    above, and simulator_s(real) / simulator_s(wmrl-imagination) >= ``floor_ratio``.
    """
    arms: dict[str, Any] = {}
    for arm in LEARNING_ARMS:
        if arm not in summary:
            continue
        d = summary[arm]["heldout_minus_control"]
        n = len(d["per_seed"])
        if n < min_seeds:
            verdict = f"too few seeds ({n} of {min_seeds})"
        elif d["mean"] - d["ci95"] > 0:
            verdict = "learns"
        else:
            verdict = "not shown to learn"
        arms[arm] = {"minus_control": d, "seeds": n, "verdict": verdict}
    floor: dict[str, Any] = {"verdict": "needs the real and wmrl-imagination arms"}
    if "real" in summary and "wmrl-imagination" in summary:
        sim_real = summary["real"]["ledger"]["simulator_s"]
        sim_wmrl = summary["wmrl-imagination"]["ledger"]["simulator_s"]
        ratio = sim_real / sim_wmrl if sim_wmrl > 0 else math.inf
        d = summary["wmrl-imagination"]["heldout_minus_real"]
        real_verdict = arms.get("real", {}).get("verdict", "")
        if real_verdict.startswith("too few seeds"):
            verdict = f"not testable yet: `real` has {real_verdict}"
        elif real_verdict != "learns":
            verdict = "not testable: `real` is not shown to learn, so there is no gain to reach"
        elif d["mean"] + d["ci95"] >= 0 and ratio >= floor_ratio:
            verdict = f"met: {ratio:.1f}x less simulator compute"
        else:
            verdict = "not met"
        floor = {"simulator_ratio": ratio, "minus_real": d, "verdict": verdict}
        # what can limit it (issue 14): the world model's error on the policy it scores, group
        # variance (groups of one outcome carry no advantage), exploitation (a rising imagined score)
        floor["limits"] = {
            "anchors": summary["wmrl-imagination"].get("anchors") or {},
            "score_trend": {arm: summary[arm].get("score_trend") or {} for arm in IMAGINING_ARMS if arm in summary},
        }
    return {"arms": arms, "floor": floor, "min_seeds": min_seeds, "floor_ratio": floor_ratio}


def _analysis_lines(result: dict[str, Any]) -> list[str]:
    def points(d: dict[str, Any]) -> str:
        per_seed = ", ".join(f"{100 * x:+.1f}" for x in d["per_seed"])
        return f"{_gain(d)} points (seeds: {per_seed})"

    lines = [
        f"## Analysis (fixed before the last seed: learns iff held-out minus control, paired by seed over "
        f"at least {result['min_seeds']} seeds, has a 95% t-interval above zero)",
        "",
    ]
    for arm, a in result["arms"].items():
        lines.append(f"- `{arm}`: held-out minus control {points(a['minus_control'])}: **{a['verdict']}**.")
    f = result["floor"]
    if "minus_real" in f:
        lines.append(
            f"- Compute floor (`wmrl-imagination` reaches `real`'s final success with {result['floor_ratio']:.0f}x "
            f"less simulator compute): {f['simulator_ratio']:.1f}x less simulator compute; held-out minus "
            f"`real` {points(f['minus_real'])}: **{f['verdict']}**."
        )
        a = f["limits"]["anchors"]
        if a:
            lines.append(
                f"- `wmrl-imagination`'s world model on its anchors: within-group AUROC {a['anchor_auroc']:.2f} "
                f"({a['anchor_pairs']:.0f} pairs), mean score minus real success {a['overprediction']:+.2f}, "
                f"λ̂ late {a['lambda_late']:.2f}; anchor groups with both outcomes {100 * a['mixed_groups']:.0f}% "
                f"of {a['anchor_groups']:.0f}."
            )
        trends = [
            f"`{arm}` {t['first_half']:.2f} → {t['second_half']:.2f}"
            for arm, t in f["limits"]["score_trend"].items()
            if t
        ]
        if trends:
            lines.append(
                "- Mean world-model score of the training rollouts, first half → second half of training "
                "(exploitation would raise it; the control's scores are noise): " + ", ".join(trends) + "."
            )
    return lines


def _pooled_diagnostics(per_seed: list[dict[str, float] | None]) -> dict[str, float]:
    """Anchor diagnostics over seeds: AUROC weighted by pairs, mixed groups by groups, the others averaged."""
    from wmrl_core.metrics import nanmean

    rows = [d for d in per_seed if d]
    if not rows:
        return {}
    pairs = sum(d["anchor_pairs"] for d in rows)
    weighted = [d["anchor_auroc"] * d["anchor_pairs"] for d in rows if d["anchor_pairs"]]
    groups = sum(d["anchor_groups"] for d in rows)
    mixed = [d["mixed_groups"] * d["anchor_groups"] for d in rows if d["anchor_groups"]]
    return {
        "mixed_groups": float(sum(mixed) / groups) if groups else math.nan,
        "anchor_groups": float(groups),
        "anchor_auroc": float(sum(weighted) / pairs) if pairs else math.nan,
        "anchor_pairs": float(pairs),
        "overprediction": nanmean([d["overprediction"] for d in rows]),
        "lambda_late": nanmean([d["lambda_late"] for d in rows]),
    }


def _pct(s: dict[str, Any]) -> str:
    lo, hi = s["wilson95"]
    seeds = f"; seeds {100 * s['seed_mean']:.1f} ± {100 * s['seed_ci95']:.1f}" if len(s["per_seed"]) > 1 else ""
    return f"{100 * s['rate']:.1f} [{100 * lo:.0f}, {100 * hi:.0f}] ({s['successes']}/{s['episodes']}{seeds})"


def _gain(g: dict[str, Any]) -> str:
    if not g["per_seed"] or math.isnan(g["mean"]):
        return "n/a"
    return f"{100 * g['mean']:+.1f}" + (f" ± {100 * g['ci95']:.1f}" if len(g["per_seed"]) > 1 else "")


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        f"# LIBERO-Long transfer{' (' + meta['label'].upper() + ')' if meta['label'] else ''}",
        "",
        meta["note"],
        "",
        f"Machine: {meta['machine']}. Command: `{meta['command']}`.",
        f"Tasks {meta['tasks']}; evaluation: init states {meta['train_init']} (training split) and "
        f"{meta['heldout_init']} (held out), {meta['rollouts']} sampled rollouts each; seeds {meta['seeds']}; "
        f"{meta['steps']} training steps per arm; "
        + (
            "wall: see the runs (this report was made with --report-only)."
            if meta.get("report_only")
            else f"wall {meta['wall_s']:.0f} s."
        ),
        "",
        "Success in %: pooled rate [Wilson 95%] (successes/episodes; mean ± 95% t over seeds). "
        "Before = the `base` row (the same checkpoint, evaluated with the same seeds); gain = after "
        "minus before in points, paired by seed. Seconds: the training ledger's declared cost "
        "(simulator: 1/60 s per control step of the episode limit per episode; world model: its "
        "declared cost per call and item) and, in brackets, wall time (the simulator's includes "
        "starting its workers and building scenes). Policy: sampling the rollouts' noise; the "
        "policy's forward passes run inside the simulator and imagination stages. Training CPU: "
        "the training process's CPU seconds (GRPO update included; simulator workers not). "
        "Anchors (the groups both simulated and scored by the world model): AUROC of the world model "
        "within a group (same init state, different noise: what GRPO ranks; pairs in brackets), its "
        "mean score minus the real success rate, and the fusion weight λ̂ over the second half. "
        "Minus control: success minus the `noise_control` arm's on the same split (same seed, "
        "pure-noise scores), paired by seed: a gain counts only beyond it.",
        "",
        "| arm | train init, after | gain | minus control | held-out init, after | gain | minus control "
        "| simulator s | world-model s "
        "| policy s | training CPU s | simulated episodes | anchor AUROC within group | world model minus real "
        "| λ̂ late |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, s in summary.items():
        ledger = s["ledger"]
        lines.append(
            f"| {arm} | {_pct(s['train'])} | {_gain(s['train_gain'])} | {_gain(s['train_minus_control'])} | "
            f"{_pct(s['heldout'])} | {_gain(s['heldout_gain'])} | {_gain(s['heldout_minus_control'])} | "
            f"{ledger['simulator_s']:.0f} [{ledger['simulator_wall_s']:.0f}] | "
            f"{ledger['world_model_s']:.1f} [{ledger['world_model_wall_s']:.1f}] | "
            f"{ledger['policy_s']:.1f} [{ledger['policy_wall_s']:.1f}] | {s['train_cpu_s']:.0f} | "
            f"{ledger['simulated_episodes']:.0f} | {_anchor_cells(s.get('anchors') or {})} |"
        )
    result = analysis(summary)
    if result["arms"]:
        lines += ["", *_analysis_lines(result)]
    return "\n".join(lines) + "\n"


def _anchor_cells(d: dict[str, float]) -> str:
    if not d:
        return "- | - | -"

    def fmt(x: float, spec: str) -> str:
        return format(x, spec) if math.isfinite(x) else "-"

    return (
        f"{fmt(d['anchor_auroc'], '.2f')} ({d['anchor_pairs']:.0f}) | {fmt(d['overprediction'], '+.2f')} | "
        f"{fmt(d['lambda_late'], '.2f')}"
    )


def plot(summary: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    # One colour per arm, one marker per split; arms at the same simulator cost (0 s) are nudged
    # apart along x so that their intervals do not hide each other.
    colours = plt.get_cmap("tab10").colors
    spread = 0.012 * max([s["ledger"]["simulator_s"] for s in summary.values()] + [1.0])
    for i, (arm, s) in enumerate(summary.items()):
        for j, (split, marker) in enumerate((("heldout", "o"), ("train", "s"))):
            lo, hi = s[split]["wilson95"]
            rate = s[split]["rate"]
            ax.errorbar(
                s["ledger"]["simulator_s"] + spread * (2 * i + j - len(summary)),
                100 * rate,
                yerr=[[100 * (rate - lo)], [100 * (hi - rate)]],
                fmt=marker,
                color=colours[i % len(colours)],
                mfc="white" if split == "train" else None,
                capsize=3,
                label=f"{arm} ({split})",
            )
    ax.set_xlabel("simulator seconds in training (ledger, declared cost; arms nudged apart)")
    ax.set_ylabel("success after training, % (Wilson 95%)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_minus_control(summary: dict[str, Any], path: Path, title: str) -> None:
    """Per trained arm and split: each seed's success minus the control's (dots) and their mean with
    its 95% t-interval (bar), in points: the analysis's rule, drawn (an arm learns where the held-out
    bar clears zero)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = [arm for arm in LEARNING_ARMS if arm in summary]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for j, (split, colour) in enumerate((("heldout", "tab:blue"), ("train", "tab:grey"))):
        for i, arm in enumerate(arms):
            d = summary[arm][f"{split}_minus_control"]
            if not d["per_seed"]:
                continue
            x = i + (j - 0.5) * 0.3
            ax.plot([x] * len(d["per_seed"]), [100 * v for v in d["per_seed"]], ".", color=colour, alpha=0.6)
            ax.errorbar(
                x,
                100 * d["mean"],
                yerr=100 * d["ci95"],
                fmt="_",
                ms=14,
                color=colour,
                capsize=4,
                label=("held-out init" if split == "heldout" else "training init") if i == 0 else None,
            )
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(arms)), arms, fontsize=8)
    ax.set_ylabel("success minus noise control, points")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _without_note(argv: list[str]) -> list[str]:
    """The command line without ``--note TEXT`` (the note is printed above it)."""
    out, skip = [], False
    for a in argv:
        if skip or a == "--note":
            skip = not skip
            continue
        out.append(a)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(ROOT / "configs/libero/libero_long.yaml"))
    p.add_argument("--base", required=True, help="base policy checkpoint (small VLA .pt)")
    p.add_argument(
        "--wm",
        default=str(ROOT / "plugins/libero/checkpoints/libero_wm_t0-9.pt"),
        help="`wmrl-libero train-wm` checkpoint (dynamics + scorer); default: the shipped one, tasks 0-9",
    )
    p.add_argument("--arms", default=",".join(ARMS), help=f"subset of {', '.join(ARMS)}")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--suite", default="libero_10")
    p.add_argument("--tasks", default="0-9", help="LIBERO-10 tasks the base policy covers (the shipped one: 0-9)")
    p.add_argument("--train-init", default="0-9", help="training-split init states evaluated")
    p.add_argument("--heldout-init", default="40-49")
    p.add_argument("--rollouts", type=int, default=4, help="sampled rollouts per init state in evaluation")
    p.add_argument("--steps", type=int, default=0, help="training steps (0: the config's)")
    p.add_argument("--max-episode-steps", type=int, default=520)
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="simulator worker processes of the evaluation and of every trained arm (more than the cores "
        "keeps them busy: the workers step in lockstep)",
    )
    p.add_argument("--override", action="append", default=[], help="config override for every trained arm")
    p.add_argument("--out", default="runs/libero_transfer")
    p.add_argument(
        "--archive",
        default="",
        help="folder (e.g. in git) that keeps each finished arm-seed's results without checkpoints: "
        "restored into --out when missing there, so a run spanning machines resumes",
    )
    p.add_argument("--docs", default=str(ROOT / "docs/results/libero"))
    p.add_argument("--name", default="transfer", help="file stem of the report in --docs")
    p.add_argument("--label", default="", help="e.g. 'pilot': said in the report's title and note")
    p.add_argument("--note", default="", help="a paragraph at the top of the report")
    p.add_argument("--quick", action="store_true", help="every arm end to end at a tiny budget (CI)")
    p.add_argument(
        "--report-only", action="store_true", help="report the arm-seeds already evaluated; train and simulate nothing"
    )
    args = p.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    unknown = set(args.arms) - set(ARMS)
    if unknown:
        p.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    args.user_override = list(args.override)
    args.seeds, args.tasks = parse_ints(args.seeds), parse_ints(args.tasks)
    args.train_init, args.heldout_init = parse_ints(args.train_init), parse_ints(args.heldout_init)
    if args.quick:  # one group of 2 per step, short episodes, 2 steps, one rollout per init state
        args.steps = args.steps or 2
        args.max_episode_steps = min(args.max_episode_steps, 40)
        args.rollouts = 1
        args.override = [
            "rollout.batch_tasks=2",
            "rollout.group_size=2",
            "checkpoint.every=1",
            *args.override,
        ]
    args.override = [
        f"environment.kwargs.num_workers={args.workers}",
        f"environment.kwargs.max_episode_steps={args.max_episode_steps}",
        f"policy.kwargs.max_steps={args.max_episode_steps}",
        *args.override,
    ]
    archive = Path(args.archive) if args.archive else None
    if archive is not None:
        check_archive_settings(archive, experiment_settings(args))
    from wmrl_libero.environment import LiberoEnvironment

    out = Path(args.out)
    started = time.perf_counter()
    env = LiberoEnvironment(
        args.suite,
        task_indices=args.tasks,
        num_workers=args.workers,
        max_episode_steps=args.max_episode_steps,
        trajectory_states=0,
    )
    results: dict[str, list[dict[str, Any]]] = {arm: [] for arm in args.arms}
    try:
        for seed in args.seeds:
            for arm in args.arms:
                run_dir = out / f"{arm}-seed{seed}"
                if archive is not None and restore_run(archive / run_dir.name, run_dir):
                    print(f"seed {seed} {arm}: restored from {archive / run_dir.name}", flush=True)
                if args.report_only and not is_finished(run_dir):
                    print(f"seed {seed} {arm}: not evaluated yet, left out of the report", flush=True)
                    continue
                ledger = dict.fromkeys(LEDGER_KEYS, 0.0)
                cpu = 0.0
                if ARMS[arm] is not None:
                    ledger = train_arm(args, arm, seed, run_dir)
                    cpu_file = run_dir / "train_cpu_s.txt"
                    cpu = float(cpu_file.read_text()) if cpu_file.exists() else math.nan
                evaluation = evaluate_arm(args, env, arm, seed, run_dir)
                if archive is not None:
                    archive_run(run_dir, archive / run_dir.name)
                anchors, trend = None, score_trend(run_dir) if ARMS[arm] is not None else {}
                if ARMS[arm] is not None and "mode=wmrl" in ARMS[arm]:
                    group_size = int(_config(args, arm, seed, run_dir).rollout.group_size)
                    anchors = anchor_diagnostics(run_dir, group_size)
                results[arm].append(
                    {
                        "seed": seed,
                        "eval": evaluation,
                        "ledger": ledger,
                        "train_cpu_s": cpu,
                        "anchors": anchors,
                        "score_trend": trend,
                    }
                )
                print(f"seed {seed} {arm}: {json.dumps(evaluation)} ledger {json.dumps(ledger)}", flush=True)
    finally:
        env.close()
    summary = summarize(results)
    meta = {
        "label": args.label,
        "note": args.note
        or (
            f"**{args.label.upper()}**: not the full experiment; too few seeds, steps and episodes for a claim."
            if args.label
            else ""
        ),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "command": "python benchmarks/libero_transfer.py " + " ".join(_without_note(argv or sys.argv[1:])),
        "tasks": args.tasks,
        "train_init": args.train_init,
        "heldout_init": args.heldout_init,
        "rollouts": args.rollouts,
        "seeds": args.seeds,
        "steps": args.steps or "config",
        "wall_s": time.perf_counter() - started,
        "report_only": bool(args.report_only),
    }
    docs = Path(args.docs)
    docs.mkdir(parents=True, exist_ok=True)
    report = {"meta": meta, "arms": summary, "analysis": analysis(summary)}
    (docs / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (docs / f"{args.name}.md").write_text(markdown(summary, meta))
    title = f"LIBERO-Long transfer{' (' + args.label + ')' if args.label else ''}"
    plot(summary, docs / f"{args.name}.png", title)
    if "noise_control" in summary:
        plot_minus_control(summary, docs / f"{args.name}_minus_control.png", f"{title}: per seed, 95% t over seeds")
    print((docs / f"{args.name}.md").read_text())
    return summary


if __name__ == "__main__":
    main()

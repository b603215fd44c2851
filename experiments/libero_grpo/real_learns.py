"""Does GRPO improve the behaviour-cloned small VLA on LIBERO here? ``real`` against the matched noise
control under the sized recipe, pre-registered in ``PREREGISTRATION_REAL_LEARNS.md`` beside this file.

Arms, seeds outer and arms inner, through :func:`wmrl_core.experiments.runner.run_arms`:

* ``base``: the shipped small VLA, not trained;
* ``real``: GRPO on the simulator's sparse success, every group simulated;
* ``noise_control``: the same recipe and steps on i.i.d. U(0, 1) scores of imagined rollouts
  (``mode=world_model``, ``libero-imagination`` with ``noise_scores``): what the updates do with no signal.

Each arm-seed's final network is evaluated at the behaviour-cloning sigma (the shipped ``log_std``, whatever
training did to it; temperature 1, a noise draw per action, as the base policy was always evaluated) on every
training init state (0-39) and every held-out one (40-49) of tasks 4 and 6, :data:`EVAL_SAMPLES` episodes
each, with evaluation noise shared by the seed's arms.

    python -m experiments.libero_grpo.real_learns                 # run (resumable); the page as each seed ends
    python -m experiments.libero_grpo.real_learns --report        # the page from what is finished
    python -m experiments.libero_grpo.real_learns --pack-partial  # after stopping mid-run
    python -m experiments.libero_grpo.real_learns --smoke DIR     # every arm end to end, tiny
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from experiments.libero_grpo.common import (
    LazyLiberoEnv,
    collect,
    int_keys,
    run_study,
    success_counts,
    update_table,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs/libero/libero_long.yaml"
CHECKPOINT = "plugins/libero/checkpoints/small_vla_dagger_t0-9_h1024.pt"
TASKS = [4, 6]
SEEDS = [5400, 5401, 5402, 5403, 5404, 5405]
"""Fresh seeds: no LIBERO study used 5400-5405."""
STEPS = 40
EPISODES_PER_STEP = 32
EVAL_SAMPLES = 4
NOISE, TEMPERATURE = "step", 1.0
"""Training exploration, by ``PLAN_GRADIENT_SNR.md``'s rule: no setting tried gave the network a measurable signal."""
SMALLEST_EFFECT = 0.08
"""The pre-registered smallest effect of interest on the training init states (success, 0-1)."""
RECIPE = [
    f"policy.kwargs.noise={NOISE}",
    f"policy.kwargs.temperature={TEMPERATURE}",
    "policy.kwargs.log_std_lr=0.03",
    "rollout.batch_tasks=4",
    "rollout.group_size=8",
    "grpo.lr=1.0e-4",
    "grpo.kl_coef=0.0",
    "grpo.clip_eps=0.2",
    "grpo.epochs=2",
    "grpo.minibatches=2",
    "grpo.drop_uninformative_groups=true",
    "grpo.loss_aggregation=sequence_mean",
]
COMMON = [
    f"environment.kwargs.task_indices=[{','.join(map(str, TASKS))}]",
    "environment.kwargs.num_workers=2",
    "environment.kwargs.envs_per_worker=2",
    f"policy.kwargs.checkpoint={CHECKPOINT}",
    *RECIPE,
    f"steps={STEPS}",
    "checkpoint.every=4",
    "eval.every=0",
]
ARMS: dict[str, list[str] | None] = {
    "base": None,
    "real": ["mode=real"],
    "noise_control": ["mode=world_model", "world_model.kwargs.noise_scores=true"],
}
SETTINGS = {"tasks": TASKS, "eval_samples_per_init": EVAL_SAMPLES, "eval_splits": ["train", "heldout"]}
RUNS = ROOT / "runs/libero_real_learns"
ARCHIVE = ROOT / "experiments/libero_grpo/archive_real_learns"
PAGE = ROOT / "docs/results/libero/real_learns/README.md"
SPLITS = ("train", "heldout")


class Evaluator(LazyLiberoEnv):
    """``evaluate(run)`` for :func:`run_arms`: the arm's final network (the base untrained) at the
    behaviour-cloning sigma, temperature 1."""

    def __init__(self, samples: int = EVAL_SAMPLES, inits: dict[str, list[int]] | None = None) -> None:
        super().__init__(TASKS)
        self.samples, self.inits = samples, inits or {}

    def __call__(self, run) -> dict[str, Any]:
        import torch
        from wmrl_libero.policies.small_vla import SmallVLAPolicy

        from wmrl_core.checkpoint import load_checkpoint

        env = self.env()
        policy = SmallVLAPolicy(env, checkpoint=str(ROOT / CHECKPOINT), probe_size=0)  # noise "step", temperature 1
        if run.arm.train:
            shipped_log_std = policy.model.log_std.detach().clone()
            policy.load_state_dict(load_checkpoint(run.run_dir / "checkpoints")["policy"])
            with torch.no_grad():  # evaluated at the behaviour-cloning sigma: what training did to the means
                policy.model.log_std.copy_(shipped_log_std)
        name = f"seed {run.seed} {run.arm.name}"
        return {
            split: success_counts(
                env, policy, run.seed, name, split=split, inits=self.inits.get(split), samples=self.samples
            )
            for split in SPLITS
        }


def rate(record: dict | None, split: str) -> float | None:
    if not record or not record[split]["episodes"]:
        return None
    return record[split]["successes"] / record[split]["episodes"]


def analyse(records: dict[str, dict[int, dict]]) -> dict[str, Any]:
    """The pre-registered endpoints from the evaluations ``records[arm][seed]``."""
    from wmrl_core.experiments.stats import mean_t_interval

    seeds = sorted(set(records.get("real", {})) & set(records.get("noise_control", {})))
    out: dict[str, Any] = {"seeds": seeds, "finished": len(seeds), "planned": len(SEEDS)}
    for split in SPLITS:
        diffs = [rate(records["real"][s], split) - rate(records["noise_control"][s], split) for s in seeds]
        versus_base = [
            rate(records["real"][s], split) - rate(records["base"][s], split)
            for s in seeds
            if s in records.get("base", {})
        ]
        mean, half = mean_t_interval(diffs) if len(diffs) >= 2 else (float("nan"), float("nan"))
        out[split] = {
            "real_minus_control": diffs,
            "mean": mean,
            "ci": [mean - half, mean + half],
            "real_minus_base": versus_base,
            "rates": {
                arm: {s: rate(records.get(arm, {}).get(s), split) for s in sorted(records.get(arm, {}))} for arm in ARMS
            },
        }
    out["verdict"] = verdict(out["train"]) if len(seeds) == len(SEEDS) else None
    return out


KEEPS = "keeps the policy where updates on noise degrade it; not shown to improve it"


def verdict(train: dict[str, Any]) -> str:
    """The pre-registered reading of the primary interval (``real`` - control), beside ``real`` - ``base``."""
    from wmrl_core.experiments.stats import mean_t_interval

    lo, hi = train["ci"]
    if lo > 0:
        mean, half = mean_t_interval(train["real_minus_base"])
        return "learns" if mean - half > 0 else KEEPS
    return "no effect as large as the smallest of interest" if hi < SMALLEST_EFFECT else "unresolved"


SIZING_SD = 0.06
"""The per-seed sd of ``real`` - control the pre-registration's sizing assumed."""


def seeds_for_half_width(sd: float, half_width: float, confidence: float = 0.95, most: int = 1000) -> int | None:
    r"""The fewest seeds ``n`` (at least 2) whose t-interval is no wider than ``half_width`` at per-seed sd ``sd``:
    :math:`\min\{n : t_{(1+c)/2,\,n-1}\, s / \sqrt n \le h\}`; ``None`` if more than ``most`` would be needed."""
    from scipy import stats

    if sd < 0 or half_width <= 0:
        raise ValueError(f"need sd >= 0 and half_width > 0, got sd={sd}, half_width={half_width}")
    for n in range(2, most + 1):
        if stats.t.ppf((1 + confidence) / 2, n - 1) * sd / np.sqrt(n) <= half_width:
            return n
    return None


TRIED = [
    "The pre-registered [LIBERO-Long transfer](../transfer_resolving/transfer_resolving.md) (24 steps, the "
    "recipe before issue 52): no arm learned beyond the noise control, `real` included; its first update was lost "
    "to a `log_probs` that zeroed the mask, and at lr 3e-5 with one pass the importance ratio stayed 1.",
    "The fixes: `log_probs` pure (step 1 updates), per-step instrumentation, a simulator 1.5x cheaper per "
    "episode with bit-identical replays.",
    "A pre-registered [positive control](../positive_control/README.md): sigma widened three-fold, 3 seeds x 24 "
    "steps x 32 episodes at lr 1e-4 with two passes (clipping acts). It did not pass: `real` stayed above the "
    "noise control but recovered half the lost success on no seed.",
    "A [gradient signal-to-noise probe](../gradient_snr/README.md) at the base policy, five exploration settings "
    "(per-step and per-chunk noise, temperatures 0.7-2): no measurable signal in the network's gradient at 16 "
    "groups of 8 in any of them; `log_std`'s weakly.",
    f"This study: the recipe above, {STEPS} steps of {EPISODES_PER_STEP} episodes "
    f"({STEPS * EPISODES_PER_STEP} simulated episodes an arm-seed), {len(SEEDS)} seeds.",
]


def what_was_tried(result: dict[str, Any]) -> str:
    """What was tried to make ``real`` learn here, and, once the verdict is in and is not "learns", what the
    primary interval rules out and how many seeds its observed spread would need."""
    lines = ["## What was tried", "", *(f"{i}. {t}" for i, t in enumerate(TRIED, 1)), ""]
    if result["verdict"] is None:
        return "\n".join(lines)
    train = result["train"]
    lo, hi = train["ci"]
    if result["verdict"] == "learns":
        lines.append(
            "`real` learns here; the pre-registration's second stage (`wmrl-progress` and `anchors-only` under the "
            "same recipe) is what comes next."
        )
        return "\n".join(lines)
    sd = float(np.std(train["real_minus_control"], ddof=1))
    needed = seeds_for_half_width(sd, SMALLEST_EFFECT)
    if hi < SMALLEST_EFFECT:
        reach = f"so an effect as large as the smallest of interest (+{SMALLEST_EFFECT:.2f})"
    else:
        reach = f"but not an effect as large as the smallest of interest (+{SMALLEST_EFFECT:.2f})"
    if lo > 0:
        reach += "; `real` stays above the control without being shown to improve on the base"
    else:
        reach += f"; a gain of zero lies inside the interval [{lo:+.3f}, {hi:+.3f}]"
    lines += [
        "## What this rules out",
        "",
        f"Under this recipe at this budget, on tasks 4 and 6, the primary interval rules out a mean gain over the "
        f"noise control above {hi:+.3f} on the training init states, {reach}. The per-seed sd of `real` - control "
        f"was {sd:.3f}, against the {SIZING_SD:.2f} the sizing assumed; at that sd a 95% half-width of "
        f"{SMALLEST_EFFECT:.2f} needs {f'{needed} seeds' if needed else 'more than 1000 seeds'}. It does not rule "
        "out GRPO on LIBERO: a larger policy, more episodes a step, more steps and other tasks are untested here.",
        "",
    ]
    return "\n".join(lines)


def plot(result: dict[str, Any], curves: dict[int, list[float]], path: Path) -> None:
    """Left: each seed's ``real`` - control (train and held-out init states) with the mean's 95% t-interval.
    Right: ``real``'s training success per step, each seed and the mean with its 95% t-band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from wmrl_core.experiments.stats import mean_t_interval

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    for x, split in enumerate(SPLITS):
        diffs = result[split]["real_minus_control"]
        ax.scatter([x] * len(diffs), diffs, color="gray", s=14, label="a seed" if x == 0 else None)
        if len(diffs) >= 2:
            lo, hi = result[split]["ci"]
            ax.errorbar(
                x + 0.15,
                result[split]["mean"],
                yerr=[[result[split]["mean"] - lo], [hi - result[split]["mean"]]],
                fmt="o",
                color="black",
                capsize=4,
                label="mean, 95% t-interval" if x == 0 else None,
            )
    ax.axhline(0, color="gray", lw=0.8)
    ax.axhline(SMALLEST_EFFECT, color="tab:green", ls="--", lw=1, label="smallest effect of interest")
    ax.set_xticks(range(len(SPLITS)), ["training init states", "held-out init states"])
    ax.set_ylabel("success, real - noise control")
    ax.legend(fontsize=7)
    for seed, curve in sorted(curves.items()):
        bx.plot(range(1, len(curve) + 1), curve, lw=0.8, alpha=0.5, label=f"seed {seed}")
    n = min((len(c) for c in curves.values()), default=0)
    if len(curves) >= 2 and n:
        stats = [mean_t_interval([c[t] for c in curves.values()]) for t in range(n)]
        mean, half = np.array([m for m, _ in stats]), np.array([h for _, h in stats])
        bx.plot(range(1, n + 1), mean, color="black", lw=2, label="mean")
        bx.fill_between(range(1, n + 1), mean - half, mean + half, color="black", alpha=0.15, label="95% t over seeds")
    bx.set(xlabel="training step (32 simulated episodes)", ylabel="success of the step's episodes")
    bx.set_title(f"real: training success (exploration {NOISE}, temperature {TEMPERATURE:g})", fontsize=9)
    bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def page(result: dict[str, Any]) -> str:
    """The results page: the pre-registered endpoints (a verdict only once every seed is in), every seed."""
    from wmrl_core.experiments.report import interval_text, markdown_table, number

    rows = []
    for s in result["seeds"]:
        cells = [str(s)]
        for split in SPLITS:
            rates = result[split]["rates"]
            cells += [number(rates["base"].get(s)), number(rates["real"].get(s)), number(rates["noise_control"].get(s))]
        cells += [number(d, signed=True) for d in (result["train"]["real_minus_control"][result["seeds"].index(s)],)]
        rows.append(cells)
    if result["verdict"] is None:
        verdict = f"In progress ({result['finished']} of {result['planned']} seeds finished): no verdict yet."
    else:
        verdict = (
            f"**{result['verdict'].capitalize()}**: `real` - `noise_control` on the training init states "
            f"{interval_text(result['train']['real_minus_control'], signed=True)} (smallest effect of interest "
            f"+{SMALLEST_EFFECT:.2f}); held-out init states {interval_text(result['heldout']['real_minus_control'], signed=True)}."
        )
    return "\n".join(
        [
            "# Does GRPO improve the behaviour-cloned small VLA on LIBERO here? `real` against the noise control",
            "",
            "[Pre-registration](../../../../experiments/libero_grpo/PREREGISTRATION_REAL_LEARNS.md), committed before "
            "the first seed. Built from the archive by `python -m experiments.libero_grpo.real_learns --report`; the "
            "run: the same command without `--report` (resumable). Machine: 2-core x86_64 CPU, physics only.",
            "",
            f"The shipped small VLA; `real` trains {STEPS} steps of {EPISODES_PER_STEP} simulated episodes on tasks 4 "
            f"and 6 (exploration `{NOISE}` at temperature {TEMPERATURE:g}; recipe: `{' '.join(RECIPE)}`); the noise "
            "control trains on i.i.d. scores of imagined rollouts with the same recipe and steps. Every arm is "
            f"evaluated at the behaviour-cloning sigma (its trained means, the shipped `log_std`), {EVAL_SAMPLES} episodes from each of the 80 training and 20 held-out init states.",
            "",
            "## Verdict (pre-registered primary endpoint)",
            "",
            verdict,
            "",
            "## Every seed",
            "",
            markdown_table(
                [
                    "seed",
                    "train: base",
                    "train: real",
                    "train: control",
                    "held-out: base",
                    "held-out: real",
                    "held-out: control",
                    "train: real - control",
                ],
                rows,
            ),
            "",
            "![real - control per seed, and real's training success](real_learns.png)",
            "",
            "## What the updates did (secondary, descriptive)",
            "",
            "Sigma (mean over the 7 dimensions) after the first and the last update, how far the chunk means moved "
            "on the probe set from the start, and per-step means of clip fraction, approximate KL and the share of "
            "groups that entered the update (the rest scored alike).",
            "",
            update_table(result.get("updates", {})),
            "",
            what_was_tried(result),
            "What it does not show: two tasks of LIBERO-10 and one small policy trained on this machine; a sampled "
            "policy evaluated at the behaviour-cloning sigma (not the mean action, not its learned sigma); the noise control imagines its rollouts, so it "
            "also differs from `real` in episode lengths.",
            "",
        ]
    )


def rebuild_page_when_a_seed_ends(run) -> None:
    """After a seed's last arm is archived, rewrite the page from the archive alone (what ``python -m
    experiments.pages --check`` compares), so that committing the archive and the page together is all a
    session has to do."""
    if run.arm.name != list(ARMS)[-1]:
        return
    with tempfile.TemporaryDirectory(prefix="wmrl-runs-") as runs, contextlib.redirect_stdout(io.StringIO()):
        main(["--report", "--runs", runs])
    print(f"   page rebuilt from the archive: {PAGE.relative_to(ROOT)}", flush=True)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    from wmrl_core.experiments.runner import pack_unfinished

    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    ap.add_argument("--report", action="store_true", help="no training: the page from what is finished")
    ap.add_argument("--pack-partial", action="store_true", help="pack half-done arm-seeds into the archive")
    ap.add_argument("--smoke", metavar="DIR", help="every arm end to end in DIR: 2 seeds, 2 steps, tiny groups")
    ap.add_argument("--out", type=Path, help=f"the page's folder (default {PAGE.parent.relative_to(ROOT)})")
    ap.add_argument("--runs", type=Path, help=f"the run folders (default {RUNS.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    runs, archive, page_path, seeds, common, settings = RUNS, ARCHIVE, PAGE, SEEDS, COMMON, SETTINGS
    runs = args.runs or runs
    page_path = args.out / PAGE.name if args.out else page_path
    evaluate = Evaluator()
    if args.smoke:
        smoke = Path(args.smoke)
        runs, archive, page_path, seeds = smoke / "runs", smoke / "archive", smoke / "page.md", SEEDS[:2]
        common = [
            *COMMON,
            "steps=2",
            "rollout.batch_tasks=2",
            "rollout.group_size=2",
            "grpo.minibatches=1",
            "policy.kwargs.max_steps=30",
            "environment.kwargs.max_episode_steps=30",
        ]
        settings = {**SETTINGS, "smoke": True}
        evaluate = Evaluator(samples=1, inits={"train": [0], "heldout": [40]})
    if args.pack_partial:
        for path in pack_unfinished(runs, archive):
            print("packed", path)
        return 0
    arm_runs = run_study(
        CONFIG,
        ARMS,
        seeds,
        runs,
        archive,
        overrides=common,
        settings=settings,
        evaluate=evaluate,
        report_only=args.report,
        after_run=None if args.report or args.smoke or args.out or args.runs else rebuild_page_when_a_seed_ends,
    )
    records, curves, updates = collect(arm_runs)
    if not {"real", "noise_control"} <= set(records):
        print("no seed finished yet")
        return 0
    result = analyse(records)
    result["curves"], result["updates"] = curves, updates
    page_path.parent.mkdir(parents=True, exist_ok=True)
    (page_path.parent / "real_learns.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    page_path.write_text(page(json.loads(json.dumps(result, default=str), object_hook=int_keys)))
    plot(result, curves, page_path.parent / "real_learns.png")
    print(page_path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

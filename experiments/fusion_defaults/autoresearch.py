"""The engine's new defaults on AutoResearch, pre-registered (``PREREGISTRATION_AUTORESEARCH.md``
beside this file): the equal-execution benchmark's machinery
(:mod:`experiments.autoresearch_equal_execution.equal_execution`: the main job's config, the same W/R/E split
and world model, offline evaluation of kept checkpoints on all 63 E tasks with common random numbers,
execution caches, archive and resume) with this study's arms, seeds and evaluation steps.

    python experiments/fusion_defaults/autoresearch.py --runs runs/fusion_defaults_ar \\
        --archive docs/results/autoresearch/fusion_defaults/archive
    python experiments/fusion_defaults/autoresearch.py ... --noise-check    # then the evaluation's own noise
    python experiments/fusion_defaults/autoresearch.py ... --pack-partial   # after stopping: keep half-done arm-seeds

Resumable at every level (finished arm-seeds are read back, half-done ones resume from their
checkpoints or from the packs in the archive); settings (arms, seeds, steps) are frozen into
``RUNS/settings.json`` at the first start and other ones are refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

if __package__ in (None, ""):  # run as a script: the checkout's root holds the experiments/ namespace
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.autoresearch_equal_execution import equal_execution as ee  # noqa: E402
from experiments.autoresearch_heldout_gain import heldout_gain as hg  # noqa: E402
from experiments.fusion_defaults.synthetic import MSE_BEFORE_V2  # noqa: E402

LEARN = ["world_model.kwargs.learn_from_anchors=true"]
ARMS: dict[str, list[str]] = {
    "real": ["mode=real"],
    "anchors_only": ["mode=wmrl", "fusion.method=anchors_only", "world_model.name=noise"],
    "default": ["mode=wmrl", *LEARN],
    "inverse_variance": ["mode=wmrl", "fusion.method=inverse_variance", *LEARN],
    "world_model": ["mode=world_model", *LEARN],
    "default_noise_wm": ["mode=wmrl", "world_model.name=noise"],
}
"""Arm -> overrides on the main job's config (the defaults as shipped when the study was registered:
``fusion.method=mse_weighted`` and the chosen calibration), in run order within a seed."""
ADDED_ARMS: dict[str, list[str]] = {
    "default_v2": ["mode=wmrl", *LEARN],
    "default_v2_noise_wm": ["mode=wmrl", "world_model.name=noise"],
}
"""The registered addition (the pre-registration's last section): the default as shipped since the
synthetic study's Part 5, and its matched noise control, run after each seed's registered arms."""
ARM_PINS = {"default": MSE_BEFORE_V2, "default_noise_wm": MSE_BEFORE_V2}
"""The registered default arms keep the settings they started with (the pre-registration's Part 4)."""
SEEDS = list(range(10, 20))
"""Fresh seeds: the equal-execution page used 0-5 (and evaluation seeds ``EVAL_SEED + 0..5``, its noise
check ``EVAL_SEED + 1000..1005``)."""
PLAN = {
    "seeds": len(SEEDS),
    "seed_list": SEEDS,
    "steps": 32,
    "every": 2,
    "eval_steps": [0, 2, 4, 8, 16, 32],
    "real_extra": [12, 24],
    "arms": {**ARMS, **ADDED_ARMS},
}
SAMPLES = 4
"""Programs sampled per E task at each evaluation (63 tasks x 4 = 252 executions)."""


FUSING_ARMS = ["default", "default_noise_wm", "default_v2", "default_v2_noise_wm", "inverse_variance"]
"""The arms whose fusion weighs the world model: what it earned is reported per seed."""


def progress_page(finished: dict[str, list[int]]) -> list[str]:
    """The page while the study runs: which arm-seeds are finished, and no estimate. The endpoints are read
    when every arm has every seed (the pre-registration), so no interim look can steer the run."""
    done = sum(len(seeds) for seeds in finished.values())
    rows = [
        f"| `{arm}` | {len(seeds)} of {len(SEEDS)} | {', '.join(map(str, seeds)) or '-'} |"
        for arm, seeds in finished.items()
    ]
    return [
        "# The new defaults on AutoResearch",
        "",
        "[Pre-registration](../../../../experiments/fusion_defaults/PREREGISTRATION_AUTORESEARCH.md), committed "
        "before the first seed. The run: `python experiments/fusion_defaults/autoresearch.py` (resumable), then "
        "`--noise-check`; `--report` writes this page from the archive beside it.",
        "",
        f"**In progress: {done} of {len(SEEDS) * len(finished)} arm-seeds finished.** The endpoints are read when "
        f"every arm has all {len(SEEDS)} seeds, as pre-registered; until then this page shows no estimate.",
        "",
        "| arm | seeds finished | which |",
        "|---|---|---|",
        *rows,
    ]


def write_page(runs: list, out: Path, noise: dict | None) -> None:
    """The results page from the finished arm-seeds: the pre-registered endpoints and the registered
    addition's, the secondary differences, what the world model earned, every arm's curve (table and
    plot with 95% t error bars), the evaluation's noise measured directly, and every arm-seed. Until every
    arm has every seed, only :func:`progress_page`."""
    finished = {arm: sorted(r.seed for r in runs if r.arm.name == arm) for arm in PLAN["arms"]}
    if any(len(seeds) < len(SEEDS) for seeds in finished.values()):
        out.mkdir(parents=True, exist_ok=True)
        (out / "fusion_defaults.png").unlink(missing_ok=True)
        (out / "README.md").write_text("\n".join(progress_page(finished)) + "\n")
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from autoresearch_endpoints import curve_summary_lines, earned_lines, page, secondary_lines

    from experiments.autoresearch_equal_execution import analysis
    from wmrl_core.fusion.value import world_model_earned
    from wmrl_core.metrics import read_metrics

    curves: dict[str, dict[int, list]] = {arm: {} for arm in PLAN["arms"]}
    earned: dict[str, dict[int, dict]] = {}
    for run in sorted(runs, key=lambda r: r.seed):
        curves[run.arm.name][run.seed] = run.record["curve"]
        records = read_metrics(run.run_dir)
        weights = [float(r["fusion/w_world_model"]) for r in records if r.get("fusion/w_world_model") is not None]
        earned.setdefault(run.arm.name, {})[run.seed] = {**world_model_earned(records), "weights": weights}
    curves = {arm: by_seed for arm, by_seed in curves.items() if by_seed}
    text = [
        "# The new defaults on AutoResearch",
        "",
        "[Pre-registration](../../../../experiments/fusion_defaults/PREREGISTRATION_AUTORESEARCH.md), committed "
        "before the first seed. Built from the archive beside this page by "
        "`python experiments/fusion_defaults/autoresearch.py --report`; the run itself: the same command without "
        "`--report` (resumable), then `--noise-check`.",
        "",
        "## The registered endpoints (`default`: the default when the study was registered)",
        "",
        *page(curves, earned, len(SEEDS), list(ARMS)),
        "",
        "Secondary, registered as such (no verdict):",
        "",
        *secondary_lines(curves),
        "",
        "## The registered addition: the default as shipped since the synthetic study's Part 5",
        "",
        *page(curves, earned, len(SEEDS), ["real", "anchors_only", *ADDED_ARMS], default="default_v2"),
        "",
        "## What the world model earned (training steps; mean ± 95% t over seeds)",
        "",
        *earned_lines(earned, FUSING_ARMS),
        "",
        "## Every arm's held-out score at each evaluated step (mean ± 95% t half-width, seeds)",
        "",
        *curve_summary_lines(curves),
        "",
        "![held-out score against charged training executions](fusion_defaults.png)",
    ]
    if noise is not None:
        text += analysis.evaluation_noise_lines(noise)
    else:
        text += ["", "## The evaluation's noise", "", "Not measured yet (`--noise-check`, after the last seed)."]
    text += analysis.curve_lines(curves)
    text += ["", "What it does not show: a program policy on tabular tasks, not an LLM agent; one anchor group a step."]
    out.mkdir(parents=True, exist_ok=True)
    analysis.plot({"curves": curves}, out / "fusion_defaults.png")
    (out / "README.md").write_text("\n".join(text) + "\n")
    print("\n".join(text), flush=True)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ee.CONFIG, help="the main job's config")
    parser.add_argument("--runs", type=Path, default=Path("runs/fusion_defaults_ar"))
    parser.add_argument("--archive", type=Path, default=Path("docs/results/autoresearch/fusion_defaults/archive"))
    parser.add_argument("--pack-partial", action="store_true", help="after stopping: pack half-done arm-seeds")
    parser.add_argument("--out", type=Path, default=None, help="where the page goes (default: the archive's folder)")
    parser.add_argument(
        "--report",
        action="store_true",
        help="train nothing: write the page (--out) from the finished arm-seeds",
    )
    parser.add_argument(
        "--noise-check",
        action="store_true",
        help="after the last seed (it writes the page): train nothing; each seed's initial policy evaluated again "
        "under fresh sampling noise (252 executions a seed), then the page",
    )
    args = parser.parse_args(argv)
    args.cache = args.runs / "eval_cache.jsonl"
    if args.pack_partial:
        return ee.pack_partial(parser, args)
    args.plan, args.samples, args.max_tasks = dict(PLAN), SAMPLES, None
    args.arm_pins = ARM_PINS
    args.uncached_seeds, args.quick = set(), False
    args.analyse = args.report or args.noise_check  # neither trains nor evaluates an arm
    args.train_cache = args.runs / "train_cache.jsonl"
    args.config = hg.freeze_config(args.config, [], args.runs / "config.yaml")
    args.invocation = {"trained": 0, "evaluations": 0}
    page_dir = args.out or args.archive.parent
    args.on_archived = lambda finished: write_page(finished, page_dir, None)  # the page follows the archive
    torch.set_num_threads(1)  # tiny networks: extra threads only contend on a shared machine
    runs = ee.run(args)
    print(f"[done] {len(runs)} of {len(SEEDS) * len(PLAN['arms'])} arm-seeds finished", flush=True)
    if args.noise_check:
        ee.noise_check(args)
    if args.report or args.noise_check:
        folders = {(r.arm.name, r.seed): r.run_dir for r in runs}
        write_page(runs, args.out or args.archive.parent, ee.evaluation_noise(args, folders))
    return 0


if __name__ == "__main__":
    sys.exit(main())

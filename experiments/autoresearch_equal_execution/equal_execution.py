"""Equal-execution benchmark: does WMRL reach ``real``'s held-out score with less
charged execution, with a world model that never saw the training (R) or evaluation (E)
families, and does any gain come from the world model rather than from GRPO on the anchors alone?

Pre-registered in ``PREREGISTRATION.md`` beside this file. Eight arms on
the main job's config (``configs/autoresearch/quickstart.yaml``: trains on R, the world model
fitted on W only, B = 10, G = 4, anchors 0.1 with at least one group), every arm 32 steps, the same
seeds, seeds outer and arms inner (:func:`wmrl_core.experiments.runner.run_arms`):

* ``real`` (every group executed); ``anchors_only`` (GRPO on the anchor groups alone,
  ``fusion.method=anchors_only``, the ``noise`` world model so none is consulted);
  ``wmrl_rectified``, ``wmrl_inverse_variance``, ``wmrl_shrinkage``, ``wmrl_no_denoise``
  (``fusion.enabled=false``); ``world_model`` (no execution); ``noise_control`` (the
  rectified settings on i.i.d. noise rewards, built as ``heldout-gain``'s noise arm). Every arm
  that uses the learned world model has ``world_model.kwargs.learn_from_anchors=true``.

Evaluation is offline, from kept checkpoints (``checkpoint.at_steps``): steps 0, 8, 16, 32, and
for ``real`` also 3 and 4 (WMRL-rectified executes about 4 programs a step, 128 in 32 steps,
real's execution at step 3.2: the equal-execution reading interpolates real between them).
Each kept policy is scored on all 63 held-out (E) tasks x 4 programs by real execution, with
common random numbers (sampling seed ``EVAL_SEED + seed`` for every arm and step of a seed) and
one execution cache shared by every arm (``RUNS/eval_cache.jsonl``: a repeated (task, program)
replays its execution, so step 0, the same policy in every arm, costs once), except the seeds of
``--uncached-seeds`` (default: seed 5), whose evaluations run with the cache **off** (every
program executed). Training executions go through their own cache (``environment.cache`` =
``RUNS/train_cache.jsonl``; a replay is charged its recorded cost, so charged execution is the
same with or without it), again off for the uncached seeds. Charged training execution per kept step is read from each run's metrics
(``compute/execution_items`` and ``compute/execution_s``). The endpoints are in
:mod:`experiments.autoresearch_equal_execution.analysis`; the page is rebuilt from the archive by
:mod:`experiments.autoresearch_equal_execution.page`.

    wmrl experiment equal-execution --runs runs/equal_execution \\
        --archive experiments/autoresearch_equal_execution/archive --out docs/results/autoresearch/equal_execution
    wmrl experiment equal-execution --runs runs/equal_execution --out ... --analyse   # report the finished seeds
    wmrl experiment equal-execution --quick --runs /tmp/ee --out /tmp/ee/out          # every arm, minutes

Resumable at every level: training resumes from its checkpoints, each evaluation is written to
``RUN_DIR/eval_stepNNN.json`` when done (an interrupted one replays its executed programs from the
cache), finished arm-seeds are skipped (``--pack-partial``, after stopping, packs the half-done ones
and the caches into ``--archive``; the next start unpacks and resumes them); the config is frozen into ``RUNS/config.yaml`` (and kept in the archive, whose copy a later
session's empty ``--runs`` starts from) and the evaluation settings into ``RUNS/settings.json`` at
the first start, and other ones are refused.
With ``--archive``, each finished arm-seed's small files (metrics, records, evaluations; no
checkpoint) are copied there, to be committed, and restored into a later session's empty
``--runs``. The two execution caches travel with it, gzipped (``ARCHIVE/caches/``, copied after
every arm-seed and restored into an empty ``--runs``), so a later session replays what an earlier
one executed instead of executing it again. Budget per seed (cache on): training 1,280 executions (real) + 5 x 128 (anchors_only and
the four wmrl arms; world_model and noise_control execute nothing) = 1,920; evaluation 252
executions per evaluation, 34 evaluations (6 of real, 4 of each other arm), step 0 shared by a
seed's arms: <= 27 x 252 = 6,804 (fewer: programs a policy still samples as before replay).
The uncached seed: 34 x 252 = 8,568. At most about 54,000 executions over 6 seeds.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from wmrl_autoresearch.experiments import config_path

from experiments.autoresearch_equal_execution import analysis
from experiments.autoresearch_heldout_gain import heldout_gain as hg
from wmrl_core.experiments.runner import Arm, ArmRun, pack_unfinished, run_arms
from wmrl_core.experiments.stats import repeated_evaluation_noise
from wmrl_core.metrics import read_metrics

CONFIG = config_path("quickstart.yaml")
LEARN = ["world_model.kwargs.learn_from_anchors=true"]
ARMS: dict[str, list[str]] = {
    "real": ["mode=real"],
    "anchors_only": ["mode=wmrl", "fusion.method=anchors_only", "world_model.name=noise"],
    "wmrl_rectified": ["mode=wmrl", "fusion.method=rectified", *LEARN],
    "wmrl_inverse_variance": ["mode=wmrl", "fusion.method=inverse_variance", *LEARN],
    "wmrl_shrinkage": ["mode=wmrl", "fusion.method=shrinkage", *LEARN],
    "wmrl_no_denoise": ["mode=wmrl", "fusion.enabled=false", *LEARN],
    "world_model": ["mode=world_model", *LEARN],
    "noise_control": ["mode=wmrl", "fusion.method=rectified", *hg.ARMS["noise"]],
}
"""Arm -> overrides on the main job's config, in run order within a seed."""
COMMON = ["eval.every=0", "logging.tensorboard=false"]
EVAL_SEED = hg.EVAL_SEED
"""Sampling seed of every evaluation of seed 0; seed ``s`` uses ``EVAL_SEED + s``."""
FULL = {"seeds": 6, "steps": 32, "every": 4, "eval_steps": [0, 8, 16, 32], "real_extra": [3, 4], "samples": 4}
QUICK = {"seeds": 1, "steps": 2, "every": 1, "eval_steps": [0, 1, 2], "real_extra": [], "samples": 2, "max_tasks": 2}
QUICK_OVERRIDES = ["rollout.batch_tasks=2", "rollout.group_size=2"]


def eval_steps(arm: str, plan: dict[str, Any]) -> list[int]:
    """The kept (and evaluated) steps of ``arm``."""
    return sorted({*plan["eval_steps"], *(plan["real_extra"] if arm == "real" else [])})


def plan_arms(plan: dict[str, Any]) -> dict[str, list[str]]:
    """The plan's arms (``plan["arms"]``, for a study that reuses this benchmark), else :data:`ARMS`."""
    return plan.get("arms", ARMS)


def plan_seeds(plan: dict[str, Any]) -> list[int]:
    """The plan's seeds in run order (``plan["seed_list"]``), else ``0 .. seeds - 1``."""
    return list(plan.get("seed_list", range(plan["seeds"])))


def arms(plan: dict[str, Any], pins: dict[str, list[str]] | None = None) -> list[Arm]:
    """The plan's arms, each keeping a checkpoint at its evaluated steps; ``pins`` (arm -> overrides,
    not part of the stored plan) keep an arm on the settings it started with after a default changed."""
    out = []
    for name, overrides in plan_arms(plan).items():
        kept = ",".join(map(str, eval_steps(name, plan)))
        out.append(Arm(name, (*(pins or {}).get(name, []), *overrides, f"checkpoint.at_steps=[{kept}]")))
    return out


FRESH_NOISE = 1000
"""Offset of the evaluation-noise check's sampling seed (``EVAL_SEED + FRESH_NOISE + seed``): no
evaluation of the benchmark draws from it (theirs are ``EVAL_SEED + seed``, seeds 0-5)."""
NOISE_DIR = "noise_check"


def eval_args(args, seed: int) -> argparse.Namespace:
    """What :func:`heldout_gain.evaluate_policy` reads: the frozen config, the evaluation size
    and the cache (``None`` for an uncached seed)."""
    cache = None if seed in args.uncached_seeds else args.cache
    return argparse.Namespace(
        config=args.config, cache=cache, samples=args.samples, max_tasks=args.max_tasks, override=[]
    )


def eval_file(step: int) -> str:
    return f"eval_step{step:03d}.json"


def evaluate_run(args, run: ArmRun, progress: dict[str, Any]) -> dict[str, Any]:
    """Score each kept policy of one arm-seed on E; the curve of (step, charged execution, score)."""
    by_step = {r["step"]: r for r in read_metrics(run.run_dir)}
    steps = eval_steps(run.arm.name, args.plan)
    curve = []
    for i, step in enumerate(steps, start=1):
        path = run.run_dir / eval_file(step)
        label = f"{run.arm.name} seed {run.seed} step {step}"
        started = time.perf_counter()
        fresh = not path.exists()
        state = None
        if fresh:
            state = torch.load(run.run_dir / "checkpoints" / f"step_{step:06d}.pt", weights_only=False)["policy"]
        evaluation = hg.evaluate_policy(eval_args(args, run.seed), state, EVAL_SEED + run.seed, path, label)
        s = hg.summarize_eval(evaluation)
        record = by_step[step]
        curve.append(
            {
                "step": step,
                "executions": float(record.get("compute/execution_items", 0.0)),
                "execution_s": float(record.get("compute/execution_s", 0.0)),
                "score": s["mean"],
                "se": s["se"],
                "evaluation": {k: s[k] for k in ("programs", "replayed", "container_cpu_s", "ok_fraction")},
            }
        )
        if fresh:
            progress["evaluations"] += 1
        print(
            f"[eval] {label} ({i}/{len(steps)}): score {s['mean']:.3f} ± {s['se']:.3f}, {s['programs']} programs, "
            f"{s['programs'] - s['replayed']} executed, {s['replayed']} replayed"
            f"{'' if fresh else ' (read back)'} [{time.perf_counter() - started:.0f} s]",
            flush=True,
        )
    return {"arm": run.arm.name, "seed": run.seed, "cached": run.seed not in args.uncached_seeds, "curve": curve}


def noise_check_files(args) -> dict[int, Path]:
    """The noise checks written so far, ``{seed: path}``: this run's, else the archive's."""
    found: dict[int, Path] = {}
    for folder in (args.archive / NOISE_DIR if args.archive is not None else None, args.runs / NOISE_DIR):
        if folder is not None:
            found.update({int(p.stem.removeprefix("seed")): p for p in folder.glob("seed*.json")})
    return found


def noise_check(args) -> dict[int, dict[str, Any]]:
    """The evaluation's noise, measured directly (``/work/shared/EVIDENCE.md``): each seed's initial
    policy (step 0, rebuilt from the frozen config at that seed: the same weights as its step-0
    checkpoint) evaluated a second time, on the same 63 tasks x 4 programs, under fresh sampling
    noise (``EVAL_SEED + FRESH_NOISE + seed``), beside its shared-noise evaluation (``real``'s
    ``eval_step000.json``). Seeds whose step 0 is not evaluated yet are skipped. Each check is
    written to ``RUNS/noise_check/seed<seed>.json`` (resumable) and copied to the archive.

    :return: ``{seed: {"shared": summary, "fresh": summary}}`` (:func:`heldout_gain.summarize_eval`).
    """
    out = {}
    kept = args.archive / NOISE_DIR if args.archive is not None else None
    for seed in plan_seeds(args.plan):
        shared = args.runs / f"real-seed{seed}" / eval_file(0)
        if not shared.is_file():
            continue
        path = args.runs / NOISE_DIR / f"seed{seed}.json"
        if kept is not None and (kept / path.name).is_file() and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(kept / path.name, path)
        check = eval_args(args, seed)
        check.override = [f"seed={seed}"]  # the initial policy of this seed
        label = f"noise check seed {seed} step 0"
        fresh = hg.evaluate_policy(check, None, EVAL_SEED + FRESH_NOISE + seed, path, label)
        if kept is not None:
            kept.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, kept / path.name)
        out[seed] = {"shared": hg.summarize_eval(json.loads(shared.read_text())), "fresh": hg.summarize_eval(fresh)}
        print(f"[noise] seed {seed}: shared {out[seed]['shared']['mean']:.3f}, fresh {out[seed]['fresh']['mean']:.3f}")
    return out


def evaluation_noise(args, folders: dict[tuple[str, int], Path]) -> dict[str, Any] | None:
    """The noise checks written so far against each seed's shared-noise step-0 evaluation (``real``'s),
    as :func:`~wmrl_core.experiments.stats.repeated_evaluation_noise`; ``None`` before the first check."""
    shared = {s: folders.get(("real", s), args.runs / f"real-seed{s}") / eval_file(0) for s in plan_seeds(args.plan)}
    checks = {s: path for s, path in noise_check_files(args).items() if s in shared and shared[s].is_file()}
    if not checks:
        return None
    before = {s: hg.summarize_eval(json.loads(shared[s].read_text())) for s in checks}
    again = {s: hg.summarize_eval(json.loads(path.read_text())) for s, path in checks.items()}
    return repeated_evaluation_noise(
        shared={s: v["mean"] for s, v in before.items()},
        fresh={s: v["mean"] for s, v in again.items()},
        shared_se={s: v["se"] for s, v in before.items()},
        fresh_se={s: v["se"] for s, v in again.items()},
    )


def w_corpus_cost() -> dict[str, Any]:
    """The W families' rows of the shipped corpus: what fitting the world model cost, once."""
    from wmrl_autoresearch.program.corpus import load_corpus
    from wmrl_autoresearch.tasks.families import WORLD_MODEL_FAMILIES

    rows = [r for r in load_corpus() if r["family"] in WORLD_MODEL_FAMILIES]
    return {
        "executions": len(rows),
        "rewarded": sum(r["reward"] is not None for r in rows),
        "container_cpu_s": float(sum(r["cost_s"] or 0.0 for r in rows)),
    }


def archived_cache(archive: Path, cache: Path) -> Path:
    """Where the archive keeps a copy of ``cache`` (gzipped: JSON lines compress about tenfold)."""
    return archive / "caches" / f"{cache.name}.gz"


def restore_caches(archive: Path | None, caches: list[Path]) -> None:
    """Copy each archived cache into an empty ``--runs`` (a cache already there is the newer one)."""
    for cache in caches:
        kept = archived_cache(archive, cache) if archive is not None else None
        if kept is not None and kept.exists() and not cache.exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(kept, "rb") as src, open(cache, "wb") as dst:
                shutil.copyfileobj(src, dst)
            print(f"[cache] restored {cache} from {kept}", flush=True)


def archive_caches(archive: Path | None, caches: list[Path]) -> None:
    """Gzip each cache into the archive, through a temporary file (an interrupted copy leaves the old one)."""
    for cache in caches:
        if archive is None or not cache.exists():
            continue
        kept = archived_cache(archive, cache)
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(".gz.partial")
        with open(cache, "rb") as src, gzip.GzipFile(partial, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        partial.replace(kept)


def settings(args) -> dict[str, Any]:
    return {
        "plan": args.plan,
        "samples_per_task": args.samples,
        "max_tasks": args.max_tasks,
        "uncached_seeds": sorted(args.uncached_seeds),
        "eval_seed": EVAL_SEED,
    }


def run(args) -> list[ArmRun]:
    """Train and evaluate every arm-seed (``--analyse``: collect the finished ones). ``args.on_archived``, if
    set, is called with every arm-seed finished so far each time this invocation archives one it trained or
    evaluated (not one it only found finished)."""
    plan = args.plan
    arm_list = arms(plan, getattr(args, "arm_pins", None))
    total = plan["seeds"] * len(arm_list)
    progress: dict[str, Any] = {"done": 0, "worked": 0, "trained": 0, "evaluations": 0, "work_s": 0.0}
    started = time.perf_counter()
    mark = [started, 0]  # time and fresh evaluations at the last arm-seed

    def evaluate(run: ArmRun) -> dict[str, Any]:
        return evaluate_run(args, run, progress)

    caches = [args.cache, args.train_cache]
    if not args.analyse:
        restore_caches(args.archive, caches)
    finished: list[ArmRun] = []
    on_archived = getattr(args, "on_archived", None)

    def on_run(run: ArmRun) -> None:
        finished.append(run)
        progress["done"] += 1
        now = time.perf_counter()
        worked = run.trained or progress["evaluations"] > mark[1]  # trained or evaluated here
        if worked:
            archive_caches(None if args.analyse else args.archive, caches)  # what this arm-seed executed
            progress["worked"] += 1
            progress["work_s"] += now - mark[0]
        progress["trained"] += int(run.trained)
        left = total - progress["done"]
        eta = f"{progress['work_s'] / progress['worked'] * left / 60:.0f} min" if progress["worked"] else "unknown"
        executions = run.record["curve"][-1]["executions"] if run.record else float("nan")
        print(
            f"[arm-seed {progress['done']}/{total}] {run.arm.name} seed {run.seed}: "
            f"{'trained' if run.trained else 'restored' if run.restored else 'found finished'}, "
            f"{executions:.0f} training executions [{now - mark[0]:.0f} s; {now - started:.0f} s so far, "
            f"ETA {eta} for {left} left]",
            flush=True,
        )
        mark[0], mark[1] = now, progress["evaluations"]
        if on_archived is not None and worked:
            on_archived(list(finished))  # e.g. the page rewritten as each arm-seed is archived

    overrides = [*COMMON, f"steps={plan['steps']}", f"checkpoint.every={plan['every']}"]
    if args.quick:
        overrides += QUICK_OVERRIDES
    all_steps = sorted({s for a in plan_arms(plan) for s in eval_steps(a, plan)})
    runs: list[ArmRun] = []
    for seed in plan_seeds(plan):  # seeds outer, as run_arms orders them; the cache is per seed
        cache = [] if seed in args.uncached_seeds else [f"environment.cache={args.train_cache}"]
        runs += run_arms(
            args.config,
            arm_list,
            seeds=[seed],
            runs_dir=args.runs,
            overrides=[*overrides, *cache],
            evaluate=evaluate,
            on_run=on_run,
            settings=settings(args),
            archive=args.archive,
            archive_files=[eval_file(s) for s in all_steps],
            report_only=args.analyse,
            plugin_manager=hg.plugin_manager,
            ignore=["environment.cache"],  # where replays come from, not what a run computes
            progress=True,
        )
    args.invocation = {k: progress[k] for k in ("trained", "evaluations")}
    return runs


def anchor_pairs(run_dir: Path) -> list[dict[str, Any]]:
    """A run's ``anchor_pairs.jsonl`` (empty when it has none)."""
    path = run_dir / "anchor_pairs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def run_counts(run_dir: Path) -> dict[str, float]:
    """A run's cumulative ledger counts at its last step (:data:`analysis.COUNT_KEYS`)."""
    last = read_metrics(run_dir)[-1]
    return {name: float(last.get(key, 0.0)) for name, key in analysis.COUNT_KEYS.items()}


def live_ratio(run_dir: Path) -> float:
    """The fusion's live predicted ratio against ``real`` (``value/ratio_vs_real``), mean over the steps that have it."""
    values = [r["value/ratio_vs_real"] for r in read_metrics(run_dir) if r.get("value/ratio_vs_real") is not None]
    values = [float(v) for v in values if math.isfinite(float(v))]
    return float(sum(values) / len(values)) if values else math.nan


ANCHORS_ALONE = "anchors_only (only the anchor groups generated)"
"""The accounting row of ``anchors_only`` as it would run alone: the arm as run generates (and the
``noise`` world model scores) every group, though it trains on the anchor groups only."""
ACCOUNTING_NOTE = (
    "`noise_control` is left out: its anchors are not executed (0 s charged), though its ledger counts 4 a step. "
    "`anchors_only` as run generates every group and the `noise` world model scores them; the row "
    f"'{ANCHORS_ALONE}' counts what GRPO on the anchors alone needs (the anchor groups generated and executed)."
)


def accounting(folders: dict[tuple[str, int], Path]) -> dict[str, Any]:
    """Compute at an LLM agent's cost ratios (:func:`analysis.compute_at_cost_ratios`), from the runs' counts."""
    counts: dict[str, dict[int, dict[str, float]]] = {}
    for (arm, seed), run_dir in folders.items():
        if arm == "noise_control":
            continue
        counts.setdefault(arm, {})[seed] = run_counts(run_dir)
    if "anchors_only" in counts:
        counts[ANCHORS_ALONE] = {
            s: {"generated": c["executed"], "scored": 0.0, "executed": c["executed"]}
            for s, c in counts["anchors_only"].items()
        }
    return {**analysis.compute_at_cost_ratios(counts), "note": ACCOUNTING_NOTE}


def analyse(args, runs: list[ArmRun]) -> str:
    """The report over the finished arm-seeds (any number of seeds per arm)."""
    curves: dict[str, dict[int, list]] = {name: {} for name in plan_arms(args.plan)}
    folders = {}
    for r in runs:
        curves[r.arm.name][r.seed] = r.record["curve"]
        folders[(r.arm.name, r.seed)] = r.run_dir

    def matrix(arm: str, seed: int, step: int):
        return hg.reward_matrix(json.loads((folders[(arm, seed)] / eval_file(step)).read_text()))[1]

    result = analysis.analyse({a: c for a, c in curves.items() if c}, matrix)
    result["world_model_on_anchors"] = analysis.world_model_on_anchors(
        {
            arm: {seed: anchor_pairs(folders[(arm, seed)]) for seed in by_seed}
            for arm, by_seed in curves.items()
            if arm.startswith("wmrl_") and by_seed  # the arms whose world model learns from the anchors
        }
    )
    noise = evaluation_noise(args, folders)
    if noise is not None:
        result["evaluation_noise"] = noise
    result["accounting"] = accounting(folders)
    result["live_ratio"] = analysis.live_and_measured_ratios(
        {
            arm: {s: live_ratio(folders[(arm, s)]) for s in by_seed}
            for arm, by_seed in curves.items()
            if arm.startswith("wmrl_") and by_seed
        },
        {
            arm: r["per_seed"]
            for arm, r in result["execution_to_target"].items()
            if isinstance(r, dict) and "per_seed" in r
        },
    )
    extra = {
        "settings": settings(args),
        "config_yaml": Path(args.config).read_text(),
        "this_invocation": args.invocation,
    }
    text = analysis.write_report(result, args.out, w_corpus_cost(), extra)
    print(text, flush=True)
    return text


ARCHIVED_CONFIG = "config.yaml"
"""The frozen config's copy in the archive: the page is built with it, and a later session's empty
``--runs`` starts from it rather than from the shipped config, whose defaults may have moved on."""


def freeze_config(args) -> Path:
    """``RUNS/config.yaml`` (:func:`heldout_gain.freeze_config`), first restored from the archive's
    copy into an empty ``--runs``, then kept there."""
    frozen = args.runs / "config.yaml"
    kept = args.archive / ARCHIVED_CONFIG if args.archive is not None else None
    if kept is not None and kept.is_file() and not frozen.exists():
        frozen.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(kept, frozen)
    path = hg.freeze_config(args.config, args.override, frozen)
    if kept is not None and not kept.exists():
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, kept)
    return path


def pack_partial(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--pack-partial``: what a stopped run did since its last finished arm-seed, into the archive."""
    if args.archive is None:
        parser.error("--pack-partial needs --archive (where the packs go, to be committed)")
    packs = pack_unfinished(args.runs, args.archive)
    archive_caches(args.archive, [args.cache or args.runs / "eval_cache.jsonl", args.runs / "train_cache.jsonl"])
    for pack in packs:
        print(f"[pack] {pack} ({pack.stat().st_size / 1e6:.1f} MB)", flush=True)
    print(f"[pack] {len(packs)} half-done arm-seed(s) and the caches in {args.archive}; commit them", flush=True)
    return 0


def main(argv: list[str] | None = None, prog: str = "wmrl experiment equal-execution") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=CONFIG, help="the main job's config")
    parser.add_argument("--runs", type=Path, default=Path("runs/equal_execution"), help="run folders (resumable)")
    parser.add_argument("--archive", type=Path, default=None, help="keep finished arm-seeds' small files here")
    parser.add_argument("--out", type=Path, default=Path("docs/results/autoresearch/equal_execution"))
    parser.add_argument("--cache", type=Path, default=None, help="evaluation cache (default RUNS/eval_cache.jsonl)")
    parser.add_argument(
        "--uncached-seeds", type=int, nargs="*", default=[5], help="seeds trained and evaluated with the caches off"
    )
    parser.add_argument("--analyse", action="store_true", help="report the finished arm-seeds; run nothing")
    parser.add_argument("--quick", action="store_true", help="1 seed, 2 steps, 2 tasks x 2 programs, B=2 G=2")
    parser.add_argument("--override", nargs="*", default=[], help="extra key=value overrides of the base config")
    parser.add_argument(
        "--pack-partial",
        action="store_true",
        help="after stopping a run: pack its half-done arm-seeds (checkpoints included) and both caches into "
        "--archive, to be committed; the next start on any machine unpacks and resumes them",
    )
    parser.add_argument(
        "--noise-check",
        action="store_true",
        help="measure the evaluation's noise directly: each seed's initial policy evaluated again under fresh "
        "sampling noise (252 executions a seed; trains and evaluates no arm), then the report",
    )
    args = parser.parse_args(argv)
    if args.pack_partial:
        return pack_partial(parser, args)
    if args.noise_check:
        args.analyse = True  # train and evaluate no arm: only the noise check executes
    args.plan = dict(QUICK if args.quick else FULL)
    args.samples, args.max_tasks = args.plan.pop("samples"), args.plan.pop("max_tasks", None)
    args.uncached_seeds = set(args.uncached_seeds)
    args.cache = args.cache or args.runs / "eval_cache.jsonl"
    args.train_cache = args.runs / "train_cache.jsonl"
    args.config = freeze_config(args)
    args.invocation = {"trained": 0, "evaluations": 0}
    torch.set_num_threads(1)  # tiny networks: extra threads only contend on a shared machine
    runs = run(args)
    if args.noise_check:
        noise_check(args)
    analyse(args, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

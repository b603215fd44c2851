"""``wmrl-autoresearch``: list tasks, run and grade one script, build the image, benchmark.

Commands::

    wmrl-autoresearch tasks [--split train|heldout|all] [--task-file F] [--json]
    wmrl-autoresearch tasks --competitions REGISTRY DATA [--heldout ID|SPLIT.txt] [--tabular-only] [--json]
    wmrl-autoresearch build-pool [--output PATH]   # vet the packaged datasets, write the pool manifest
    wmrl-autoresearch run-solution TASK SCRIPT.py [--sandbox NAME] [--timeout S] ...   # NAME: docker, local-unsafe ...
    wmrl-autoresearch build-image [--tag T] [--mirror URL] [--pip-arg ARG] [--if-missing]
    wmrl-autoresearch bench-sandbox [--latency-runs N] [--throughput-runs N] [--parallel P] [--sklearn-runs N]
                                    [--repetitions R] [--sklearn-only] [--json]
    wmrl-autoresearch sweep        # remove sandbox containers left by dead processes
    wmrl-autoresearch build-corpus --out DIR [--executions 5000] [--warm 2] [--parallel 2]   # resumable
    wmrl-autoresearch build-world-model [--families W] [--out DIR] [--report DIR]   # fit the outcome model
    wmrl-autoresearch corpus-cache --config CONFIG.yaml --cache CACHE.jsonl [--corpus PATH]

``run-solution`` prints the structured outcome as JSON (status, score, reward, runtime_s,
logs ...) and exits 0 when the status is ``ok``, 1 for a failed solution, 2 for a sandbox error.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

__all__ = ["main"]


def _competition_source(args) -> dict | None:
    """The ``competitions`` environment key from ``--competitions REGISTRY DATA`` (and ``--heldout``)."""
    if not args.competitions:
        return None
    registry, data = args.competitions
    heldout = getattr(args, "heldout", [])
    if len(heldout) == 1 and Path(heldout[0]).is_file():  # an MLE-bench split file
        heldout = heldout[0]
    return {
        "registry": registry,
        "data": data,
        "heldout": heldout,
        "tabular_only": bool(getattr(args, "tabular_only", False)),
    }


def _cmd_competitions(args) -> int:
    """The competitions kept (split, grader, direction, reward, program policy) and every decision."""
    from wmrl_autoresearch.vetting.competitions import load_competitions

    found = load_competitions(_competition_source(args))
    tasks = [t for t in found.tasks if args.split in ("all", t.split)]
    if args.json:
        rows = [{**t.public_metadata(), "split": t.split, "source": t.source} for t in tasks]
        print(json.dumps({"competitions": rows, "decisions": found.report()}, indent=2))
        return 0
    print(f"{'id':34} {'split':8} {'grader':16} {'direction':9} {'rows':>6}  reward; program policy")
    for t in tasks:
        direction = "higher" if t.higher_is_better else "lower"
        print(
            f"{t.id:34} {t.split:8} {t.metric:16} {direction:9} {t.n_test:6d}  "
            f"{t.reward_basis}; program policy {t.program_policy_note}"
        )
    decisions = found.report()
    print(f"{len(tasks)} competition(s); {len(decisions)} decision(s)")
    for line in decisions:
        print(line)
    return 0


def _cmd_tasks(args) -> int:
    from wmrl_autoresearch.environment import collect_tasks

    if args.competitions:
        return _cmd_competitions(args)
    tasks = collect_tasks(task_sets=args.task_set or None, task_files=args.task_file)
    if args.split != "all":
        tasks = [t for t in tasks if t.data.split == args.split]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        **t.data.public_metadata(),
                        "split": t.data.split,
                        "source": t.data.source,
                        "licence": t.data.licence,
                    }
                    for t in tasks
                ],
                indent=2,
            )
        )
        return 0
    print(f"{'id':34} {'split':8} {'kind':15} {'metric':18} {'train':>6} {'test':>6} {'feat':>5}  source; licence")
    for t in tasks:
        d = t.data
        print(
            f"{d.id:34} {d.split:8} {d.kind:15} {d.metric:18} {d.n_train:6d} {d.n_test:6d} {d.n_features:5d}  "
            f"{d.source}; {d.licence or 'not recorded'}"
        )
    _print_cross_split_decisions()
    return 0


def _print_cross_split_decisions() -> None:
    """The pool build's cross-split deduplication by content: which task was dropped, its twin, the evidence."""
    from wmrl_autoresearch.tasks.dataset_pool import load_manifest

    try:
        decisions = load_manifest().get("cross_split", [])
    except FileNotFoundError:
        return
    print(f"cross-split deduplication by content (pool build): {len(decisions)} task(s) dropped")
    for d in decisions:
        print(f"dropped {d['task_id']} ({d['split']}): same data as {d['twin']} ({d['twin_split']}); {d['evidence']}")


def _cmd_build_pool(args) -> int:
    from collections import Counter

    from wmrl_autoresearch.tasks.dataset_pool import MANIFEST_PATH
    from wmrl_autoresearch.vetting.build import build_pool, write_manifest

    doc = build_pool(progress=print if args.verbose else None)
    path = write_manifest(doc, args.output or MANIFEST_PATH)
    counts = Counter((e["recipe"]["source"], e["card"]["split"]) for e in doc["tasks"])
    print(f"wrote {path}: {len(doc['tasks'])} tasks, {len(doc['rejected'])} datasets rejected")
    for (source, split), n in sorted(counts.items()):
        print(f"  {source:16} {split:8} {n:4d}")
    return 0


def _cmd_run_solution(args) -> int:
    from wmrl_autoresearch.environment import AutoResearchEnvironment
    from wmrl_autoresearch.grading.outcomes import outcome_to_dict
    from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward

    script_path = Path(args.script)
    if not script_path.is_file():
        print(f"error: script {script_path} does not exist", file=sys.stderr)
        return 2
    limits = {
        k: v
        for k, v in {"timeout_s": args.timeout, "memory_mb": args.memory_mb, "cpus": args.cpus}.items()
        if v is not None
    }
    env = AutoResearchEnvironment(
        sandbox=args.sandbox,
        max_parallel=1,
        image=args.image,
        task_files=args.task_file,
        limits=limits,
        gpus=args.gpus,
        competitions=_competition_source(args),
    )
    try:
        task = env.task(args.task)
        outcome = env.execute([task], [script_path.read_text(encoding="utf-8", errors="replace")])[0]
    finally:
        env.close()
    record = outcome_to_dict(task.id, outcome)
    record["reward"] = AutoResearchScoreReward()(task, outcome)
    print(json.dumps(record, indent=2, default=str))
    return 0 if outcome.status == "ok" else 2 if outcome.status == "sandbox_error" else 1


def _cmd_build_image(args) -> int:
    from wmrl_autoresearch.sandbox.docker_client import docker_client
    from wmrl_autoresearch.sandbox.image import OfflineImageBuild, build_image_offline, image_exists

    client = docker_client(timeout_s=900)
    if args.if_missing and image_exists(client, args.tag):
        print(f"image {args.tag} already exists; nothing to do")
        return 0
    build = OfflineImageBuild(tag=args.tag, mirror=args.mirror, extra_pip_args=tuple(args.pip_arg))
    build = build_image_offline(build, client=client)
    size_mb = client.images.get(args.tag).attrs.get("Size", 0) / 1e6
    print(f"built {args.tag} ({size_mb:.0f} MB) in {sum(build.timings_s.values()):.0f} s: {build.timings_s}")
    return 0


def _cmd_bench(args) -> int:
    from wmrl_autoresearch.experiments.sandbox_bench import bench_sandbox

    result = bench_sandbox(
        latency_runs=args.latency_runs,
        throughput_runs=args.throughput_runs,
        parallel=args.parallel,
        backend=args.sandbox,
        image=args.image,
        sklearn_runs=args.sklearn_runs,
        repetitions=args.repetitions,
        sklearn_only=args.sklearn_only,
    )
    print(json.dumps(result.as_dict(), indent=2) if args.json else result.summary())
    return 0


def _cmd_sweep(args) -> int:
    from wmrl_autoresearch.sandbox.docker_client import docker_client
    from wmrl_autoresearch.sandbox.orphans import sweep_orphans

    removed = sweep_orphans(docker_client())
    print(f"removed {len(removed)} orphaned sandbox container(s)" + (f": {', '.join(removed)}" if removed else ""))
    return 0


def _cmd_build_corpus(args) -> int:
    from wmrl_autoresearch.program.corpus import build_corpus

    build_corpus(
        args.out,
        args.executions,
        seed=args.seed,
        warm=args.warm,
        parallel=args.parallel,
        batch=args.batch,
        limits={"timeout_s": args.timeout_s},
        log=lambda line: print(line, flush=True),
    )
    return 0


def _cmd_corpus_cache(args) -> int:
    from wmrl_autoresearch.program.corpus import export_cache_for_config

    n = export_cache_for_config(args.config, args.cache, args.corpus, args.override)
    print(f"{n} executions written to the execution cache {args.cache}, keyed for {args.config}")
    return 0


def _add_sandbox_options(parser: argparse.ArgumentParser, sandboxes) -> None:
    """``--sandbox NAME`` (a registered backend; an unknown name fails with the known ones) and ``--image``."""
    listing = "; ".join(spec.summary() for spec in sandboxes).replace("%", "%%")  # argparse formats help with %
    parser.add_argument(
        "--sandbox", default="docker", metavar="NAME", help=f"the sandbox backend (default: docker): {listing}"
    )
    images = ", ".join(f"{spec.name}: {spec.image}" for spec in sandboxes if spec.image)
    parser.add_argument("--image", help=f"the sandbox image, for backends that take one (default: {images or 'none'})")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wmrl-autoresearch", description=__doc__.split("\n")[0])
    p.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = p.add_subparsers(dest="command", required=True)
    _add_task_commands(sub)
    _add_sandbox_commands(sub)
    _add_corpus_commands(sub)
    return p


def _add_task_commands(sub) -> None:
    """``tasks`` and ``build-pool``."""
    t = sub.add_parser("tasks", help="list the tasks")
    t.add_argument("--split", choices=["train", "heldout", "all"], default="all")
    t.add_argument(
        "--task-set",
        action="append",
        default=[],
        help="only this registered task set, e.g. autoresearch-builtin (repeatable; default: all)",
    )
    t.add_argument("--task-file", action="append", default=[], help="extra YAML/JSON/CSV task description")
    t.add_argument("--json", action="store_true", help="print JSON (with descriptions)")
    t.add_argument(
        "--competitions",
        nargs=2,
        metavar=("REGISTRY", "DATA"),
        help="list prepared MLE-bench-format competitions instead: the registry (mlebench/competitions) and "
        "the data directory (mlebench prepare --data-dir), with every vetting decision",
    )
    t.add_argument(
        "--heldout", action="append", default=[], help="a held-out competition id (repeatable) or a split file"
    )
    t.add_argument("--tabular-only", action="store_true", help="keep only competitions the program policy solves")
    t.set_defaults(fn=_cmd_tasks)

    v = sub.add_parser("build-pool", help="vet every packaged dataset and write the task pool manifest (minutes)")
    v.add_argument("--output", help="manifest path (default: the package's tasks/data/pool.json)")
    v.set_defaults(fn=_cmd_build_pool)


def _add_sandbox_commands(sub) -> None:
    """``run-solution``, ``build-image``, ``bench-sandbox`` and ``sweep``."""
    from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE
    from wmrl_autoresearch.sandbox.registry import sandbox_table

    sandboxes = sandbox_table()
    r = sub.add_parser("run-solution", help="run and grade one script on one task; prints the outcome as JSON")
    r.add_argument("task", help="task id (see `wmrl-autoresearch tasks`)")
    r.add_argument("script", help="path of the Python solution script")
    _add_sandbox_options(r, sandboxes)
    r.add_argument(
        "--timeout",
        type=float,
        help="CPU-time limit in CPU seconds (default: the task's); the wall-clock safety net follows from it",
    )
    r.add_argument("--memory-mb", type=int, help="memory limit in MiB (default: the task's)")
    r.add_argument("--cpus", type=float, help="CPU quota in cores (default: the task's)")
    r.add_argument("--gpus", default="auto", help="'auto', 'none' or comma-separated NVIDIA device ids")
    r.add_argument("--task-file", action="append", default=[], help="extra YAML/JSON/CSV task description")
    r.add_argument(
        "--competitions",
        nargs=2,
        metavar=("REGISTRY", "DATA"),
        help="run on a prepared MLE-bench-format competition (TASK is its id)",
    )
    r.set_defaults(fn=_cmd_run_solution)

    b = sub.add_parser("build-image", help="build the sandbox image without any registry (debootstrap + import)")
    b.add_argument("--tag", default=SANDBOX_IMAGE)
    b.add_argument("--mirror", default="http://deb.debian.org/debian", help="Debian mirror for debootstrap")
    b.add_argument("--pip-arg", action="append", default=[], help="extra pip argument (repeatable)")
    b.add_argument("--if-missing", action="store_true", help="do nothing when the image exists")
    b.set_defaults(fn=_cmd_build_image)

    m = sub.add_parser("bench-sandbox", help="measure cold/warm start-up latency and parallel throughput")
    m.add_argument("--latency-runs", type=int, default=7)
    m.add_argument("--throughput-runs", type=int, default=12)
    m.add_argument("--parallel", type=int, default=None, help="sandboxes at once (default: CPU cores)")
    m.add_argument("--sklearn-runs", type=int, default=8, help="runs per pandas + scikit-learn batch")
    m.add_argument("--repetitions", type=int, default=3, help="cold and warm pandas + scikit-learn batches each")
    m.add_argument("--sklearn-only", action="store_true", help="only the pandas + scikit-learn cold/warm batches")
    _add_sandbox_options(m, sandboxes)
    m.add_argument("--json", action="store_true")
    m.set_defaults(fn=_cmd_bench)

    s = sub.add_parser("sweep", help="remove sandbox containers whose owner process is gone")
    s.set_defaults(fn=_cmd_sweep)


def _add_corpus_commands(sub) -> None:
    """``build-corpus``, ``corpus-cache`` and ``build-world-model``."""
    c = sub.add_parser(
        "build-corpus",
        help="execute sampled programs on the training tasks (never held-out) in sandboxes; resumable (hours)",
    )
    c.add_argument("--out", type=Path, required=True, help="directory of corpus.jsonl (appended), corpus.jsonl.gz")
    c.add_argument("--executions", type=int, default=5000, help="size of the corpus (jobs already done are skipped)")
    c.add_argument("--seed", type=int, default=0, help="decides the job list (tasks and programs)")
    c.add_argument("--warm", type=int, default=2, help="warm pre-importing containers kept ready")
    c.add_argument("--parallel", type=int, default=2, help="sandboxes running at once")
    c.add_argument(
        "--batch", type=int, default=2, help="executions per call to the environment (several calls in flight)"
    )
    c.add_argument("--timeout-s", type=float, default=30.0, help="CPU-second limit per run (the benchmark configs' 30)")
    c.set_defaults(fn=_cmd_build_corpus)

    e = sub.add_parser(
        "corpus-cache", help="write the corpus's executions into an execution cache keyed for a training config"
    )
    e.add_argument("--config", required=True, help="the config a benchmark will run (its environment keys the cache)")
    e.add_argument("--cache", type=Path, required=True, help="execution-cache file (appended)")
    e.add_argument("--corpus", default=None, help="corpus .jsonl(.gz) (default: the shipped one)")
    e.add_argument("--override", action="append", default=[], help="config override, as for training (repeatable)")
    e.set_defaults(fn=_cmd_corpus_cache)

    # its options are program.build's own (main() hands them over): listed here for --help
    sub.add_parser(
        "build-world-model",
        help="fit the outcome model on the corpus (--families W: the world-model families only); --help for options",
        add_help=False,
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["build-world-model"]:
        from wmrl_autoresearch.program.build import main as build_world_model

        try:
            return build_world_model(argv[1:])
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if getattr(args, "gpus", None) not in (None, "auto", "none"):
        args.gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one clean line for configuration errors (docker down, unknown task ...)
        from wmrl_autoresearch.sandbox.docker_client import DockerUnavailableError
        from wmrl_autoresearch.sandbox.image import ImageBuildError

        if isinstance(exc, (DockerUnavailableError, ImageBuildError, KeyError, ValueError, FileNotFoundError)):
            print(f"error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

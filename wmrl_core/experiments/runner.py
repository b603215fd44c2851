"""The arm runner: train every arm for every seed, resumably, and refuse to mix settings.

An *arm* is a named list of config overrides on top of one base config (``mode=real``,
``fusion.method=inverse_variance``...). :func:`run_arms` runs each arm for each seed, seeds
outer and arms inner, so that machine noise and a partial run hit every arm alike, each arm-seed
in its own run directory ``RUNS/<arm>-seed<seed>``. Run again with the same arguments, it

* skips a finished arm-seed (``summary.json`` at the configured ``steps``, and its evaluation
  record written), after checking that its stored ``config.yaml`` has the settings it would get
  now (:class:`~wmrl_core.errors.ConfigError` otherwise);
* resumes a half-done one from its checkpoint (``resume=true``; the trainer refuses a
  checkpoint whose settings changed);
* refuses other experiment-level ``settings`` than the first start wrote to
  ``RUNS/settings.json`` (evaluation sizes, checkpoints: what is not in the training config);
* with ``archive``, copies each finished arm-seed's small files (no checkpoint) to
  ``ARCHIVE/<arm>-seed<seed>`` and restores them into a run folder that lacks them, so that an
  experiment longer than one machine's life continues on the next; a half-done arm-seed packed
  by :func:`pack_unfinished` (checkpoints included) is unpacked into a missing run folder and
  resumed, and its pack is deleted once the arm-seed is finished and archived.

An optional ``evaluate(run) -> dict`` is called once per arm-seed after its training (or
without training, for an arm with ``train=False``, e.g. the base policy); its JSON-able result
is cached in ``RUN_DIR/record.json`` and handed back as :attr:`ArmRun.record`::

    from wmrl_core.experiments.runner import Arm, run_arms

    arms = [Arm("real", ("mode=real",)), Arm("wmrl", ("mode=wmrl", "steps=120"))]
    runs = run_arms("configs/synthetic/wmrl.yaml", arms, seeds=[0, 1, 2], runs_dir="runs/x/runs",
                    overrides=["eval.every=2"], evaluate=lambda run: {"final": score(run.run_dir)})
    for run in runs:                       # in run order: seed 0 real, seed 0 wmrl, seed 1 real...
        print(run.arm.name, run.seed, run.record["final"], run.trained)
"""

from __future__ import annotations

import json
import math
import shutil
import tarfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmrl_core.config import TrainConfig, flatten, load_config, unread_settings
from wmrl_core.errors import ConfigError

__all__ = [
    "Arm",
    "ArmRun",
    "run_arms",
    "as_arms",
    "by_arm",
    "check_settings",
    "pack_unfinished",
    "unpack_unfinished",
    "RECORD_FILE",
    "PARTIAL_DIR",
    "ARCHIVED_FILES",
    "IGNORED_SETTINGS",
]

RECORD_FILE = "record.json"
"""What ``evaluate`` returned for an arm-seed; its presence marks the evaluation as done."""
RUNNER_FILE = "runner.json"
"""The runner's own bookkeeping of an arm-seed: arm, seed, overrides, training CPU seconds."""
ARCHIVED_FILES = (
    "config.yaml",
    "summary.json",
    "metrics.jsonl",
    "anchor_pairs.jsonl",
    "run.json",
    RUNNER_FILE,
    RECORD_FILE,
)
"""What of a finished arm-seed survives in an archive (no checkpoint: a few kB, fit for git)."""
PARTIAL_DIR = "partial"
"""Where in an archive :func:`pack_unfinished` keeps half-done arm-seeds, one ``<arm>-seed<seed>.tar.gz`` each."""
IGNORED_SETTINGS = ("resume", "resume_allow_changes", "run_dir", "logging", "checkpoint")
"""Config keys (or whole sections) a finished arm-seed may differ in from what it would get now:
where and how it was logged and checkpointed, not what it computed."""


@dataclass(frozen=True)
class Arm:
    """One arm of an experiment.

    :param name: the arm's name, part of its run folders' names (``<name>-seed<seed>``).
    :param overrides: dotted config overrides on top of the base config and the common ones.
    :param train: ``False`` for an arm that is only evaluated (e.g. the untrained base policy):
        its config is made, nothing is trained, ``evaluate`` still runs.
    """

    name: str
    overrides: tuple[str, ...] = ()
    train: bool = True

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ConfigError(f"an arm needs a non-empty name without '/', got {self.name!r}")
        object.__setattr__(self, "overrides", tuple(self.overrides))


@dataclass
class ArmRun:
    """One arm-seed: where it ran, with which config, and what its evaluation recorded."""

    arm: Arm
    seed: int
    run_dir: Path
    config: TrainConfig
    trained: bool = False
    """Trained (or resumed) by this call; ``False``: found finished, restored, or not a trained arm."""
    restored: bool = False
    """Its files came back from the archive in this call."""
    record: dict[str, Any] = field(default_factory=dict)
    """What ``evaluate`` returned (``{}`` without one), cached in ``RUN_DIR/record.json``."""
    train_cpu_s: float = math.nan
    """CPU seconds of this process spent in training, summed over the calls that trained it (NaN:
    not trained by the runner). Child processes (sandboxes, simulator workers) are not in it."""

    @property
    def name(self) -> str:
        """``<arm>-seed<seed>``, the run folder's name."""
        return self.run_dir.name


def as_arms(arms: Mapping[str, Sequence[str] | None] | Iterable[Arm]) -> list[Arm]:
    """``{name: overrides}`` (``None``: an arm that is not trained) or :class:`Arm` s, as a list."""
    if isinstance(arms, Mapping):
        return [Arm(name, tuple(o or ()), train=o is not None) for name, o in arms.items()]
    out = list(arms)
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"arm names must be unique, got {names}")
    return out


def by_arm(runs: Iterable[ArmRun]) -> dict[str, list[ArmRun]]:
    """The runs grouped by arm name (arms in first-seen order, seeds in run order)."""
    out: dict[str, list[ArmRun]] = {}
    for run in runs:
        out.setdefault(run.arm.name, []).append(run)
    return out


def check_settings(folder: str | Path, settings: Mapping[str, Any]) -> None:
    """Write ``folder/settings.json`` the first time; afterwards refuse other settings.

    :raises ConfigError: naming each setting that differs, with the stored and the new value.
    """
    path = Path(folder) / "settings.json"
    now = json.loads(json.dumps(dict(settings), default=str))  # as it reads back from the file
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(now, indent=2) + "\n")
        return
    stored = json.loads(path.read_text())
    differ = sorted(k for k in set(stored) | set(now) if stored.get(k) != now.get(k))
    if differ:
        detail = "; ".join(f"{k}: stored {stored.get(k)!r}, now {now.get(k)!r}" for k in differ)
        raise ConfigError(
            f"{path.parent} holds arm-seeds of an experiment with other settings ({detail}); pass the same "
            "arguments, or another output folder"
        )


def _matches(key: str, prefixes: Sequence[str]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def _changed_settings(run_dir: Path, cfg: TrainConfig, ignore: Sequence[str]) -> list[str]:
    """Settings in which the config stored in ``run_dir`` differs from ``cfg``. A setting added since
    the run was written is absent from its file and not compared: the run did what the code did before
    the setting existed, which today's default need not be."""
    from omegaconf import OmegaConf

    ignore = [*ignore, *unread_settings(cfg)]
    path = run_dir / "config.yaml"
    written = set(_flat_keys(OmegaConf.to_container(OmegaConf.load(path))))
    stored = flatten(load_config(path))
    now = flatten(cfg)
    missing = object()
    return [
        f"{k}: {stored.get(k)!r} -> {now.get(k)!r}"
        for k in sorted(set(stored) | set(now))
        if k in written and stored.get(k, missing) != now.get(k, missing) and not _matches(k, ignore)
    ]


def _flat_keys(node: Any, prefix: str = "") -> list[str]:
    """The dotted keys of a config file's leaves (an empty mapping is a leaf, as in :func:`flatten`)."""
    if isinstance(node, dict) and (node or not prefix):
        return [key for k, v in node.items() for key in _flat_keys(v, f"{prefix}.{k}" if prefix else str(k))]
    return [prefix]


def _trained_to(run_dir: Path, steps: int) -> bool:
    """Training of ``run_dir`` finished at ``steps`` (its ``summary.json`` says so)."""
    try:
        return int(json.loads((run_dir / "summary.json").read_text())["steps"]) == steps
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _copy(src: Path, dest: Path, names: Sequence[str]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        if (src / name).is_file():
            shutil.copy2(src / name, dest / name)


def _read_json(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text())) if path.is_file() else {}


def _pack_path(archive: Path, name: str) -> Path:
    return archive / PARTIAL_DIR / f"{name}.tar.gz"


def pack_unfinished(runs_dir: str | Path, archive: str | Path) -> list[Path]:
    """Pack every half-done arm-seed of ``runs_dir`` into ``ARCHIVE/partial/<arm>-seed<seed>.tar.gz``.

    Half-done: a run folder (``<arm>-seed<seed>``, with a ``config.yaml``) whose evaluation record
    is missing and that the archive does not hold finished. The whole folder is packed, checkpoints
    included, so that :func:`run_arms` on another machine resumes it where it stopped (its trainer
    checks the stored settings) instead of starting it again. Written through a temporary file: an
    interrupted pack leaves the previous one. Call it after stopping the experiment.

    :return: the packs written, in name order.
    """
    runs_dir, archive = Path(runs_dir), Path(archive)
    written = []
    for folder in sorted(p for p in runs_dir.glob("*-seed*") if p.is_dir()):
        if not (folder / "config.yaml").is_file() or (folder / RECORD_FILE).is_file():
            continue
        if (archive / folder.name / RECORD_FILE).is_file():
            continue
        pack = _pack_path(archive, folder.name)
        pack.parent.mkdir(parents=True, exist_ok=True)
        partial = pack.with_name(pack.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(folder, arcname=folder.name)
        partial.replace(pack)
        written.append(pack)
    return written


def unpack_unfinished(archive: str | Path, runs_dir: str | Path, name: str) -> bool:
    """Unpack ``ARCHIVE/partial/<name>.tar.gz`` into ``runs_dir`` when ``runs_dir/<name>`` does not
    exist (a run folder already there is the newer state and is kept). Returns whether it unpacked."""
    pack, target = _pack_path(Path(archive), name), Path(runs_dir) / name
    if target.exists() or not pack.is_file():
        return False
    with tarfile.open(pack, "r:gz") as tar:
        foreign = [m.name for m in tar.getmembers() if m.name != name and not m.name.startswith(name + "/")]
        if foreign:
            raise ConfigError(f"{pack} holds files outside {name}/ ({foreign[:3]}); it is not a pack of that arm-seed")
        tar.extractall(Path(runs_dir), filter="data")
    return True


def run_arms(
    config: str | Path,
    arms: Mapping[str, Sequence[str] | None] | Iterable[Arm],
    seeds: Iterable[int],
    runs_dir: str | Path,
    *,
    overrides: Sequence[str] = (),
    reuse: bool = True,
    evaluate: Callable[[ArmRun], Mapping[str, Any]] | None = None,
    on_run: Callable[[ArmRun], None] | None = None,
    settings: Mapping[str, Any] | None = None,
    archive: str | Path | None = None,
    archive_files: Sequence[str] = (),
    ignore: Sequence[str] = (),
    report_only: bool = False,
    plugin_manager: Callable[[], Any] | None = None,
    progress: bool = False,
) -> list[ArmRun]:
    """Train (and evaluate) every arm for every seed, seeds outer, arms inner.

    Each run's config is ``config`` with ``[*overrides, *arm.overrides, seed=S, run_dir=D,
    logging.progress=P]`` (plus ``resume=true`` when ``D`` holds a checkpoint to continue).

    :param config: the base YAML config.
    :param arms: :class:`Arm` s, or ``{name: overrides}`` with ``None`` for an untrained arm.
    :param seeds: the seeds, in run order.
    :param runs_dir: the folder of the run folders ``<arm>-seed<seed>`` (and ``settings.json``).
    :param overrides: overrides common to every arm, applied before the arm's own.
    :param reuse: ``True``: skip finished arm-seeds and resume half-done ones; ``False``: train and
        evaluate every arm-seed from scratch (and write ``settings`` afresh).
    :param evaluate: called once per arm-seed after training; its result is cached in
        ``RUN_DIR/record.json``, so a resumed experiment does not evaluate again.
    :param on_run: called for every arm-seed in run order, trained or found finished (progress lines).
    :param settings: experiment-level settings outside the training config (evaluation sizes,
        checkpoint paths...); the first start writes them to ``runs_dir/settings.json`` (and to the
        archive), a later one with other values raises :class:`ConfigError`.
    :param archive: a folder that keeps each finished arm-seed's :data:`ARCHIVED_FILES` (plus
        ``archive_files``); an arm-seed finished there and missing from ``runs_dir`` is restored.
    :param ignore: config keys (or sections) a finished arm-seed may differ in besides
        :data:`IGNORED_SETTINGS`, e.g. a worker count that does not change results.
    :param report_only: train and evaluate nothing; return the arm-seeds already finished.
    :param plugin_manager: a factory of the plugin manager every training uses (extra plugins);
        default: the installed plugins.
    :param progress: ``P``: each training shows its steps (a line each in a log file), after a line
        naming the arm-seed; for experiments of few long arm-seeds, off for many short ones.
    :return: one :class:`ArmRun` per finished arm-seed, in run order.
    :raises ConfigError: a finished arm-seed's stored config, or the stored ``settings``, differ
        from this call's; an arm-seed is half-done in ``runs_dir`` and finished in the archive.
    """
    arm_list = as_arms(arms)
    runs_dir = Path(runs_dir)
    archive_dir = Path(archive) if archive is not None else None
    kept, ignored = (*ARCHIVED_FILES, *archive_files), (*IGNORED_SETTINGS, *ignore)
    plan = _Plan(config, runs_dir, archive_dir, kept, reuse, evaluate, ignored, plugin_manager, progress)
    if settings is not None:
        _check_experiment_settings(settings, (runs_dir, plan.archive), fresh=not reuse)
    runs: list[ArmRun] = []
    for seed in seeds:
        for arm in arm_list:
            run_dir = runs_dir / f"{arm.name}-seed{seed}"
            base = [*overrides, *arm.overrides, f"seed={seed}", f"run_dir={run_dir}"]
            base.append(f"logging.progress={str(progress).lower()}")
            run = ArmRun(arm, seed, run_dir, load_config(config, base))
            if plan.archive is not None and reuse:
                _restore_from_archive(run, plan, unpack=not report_only)
            if reuse and arm.train and _trained_to(run_dir, run.config.steps):  # finished, or trained not evaluated
                _refuse_changed_settings(run, plan)
            if not (reuse and plan.finished(run, run_dir)):
                if report_only:
                    continue
                _train_and_evaluate(run, base, plan)
            _read_back_and_archive(run, plan)
            runs.append(run)
            if on_run is not None:
                on_run(run)
    return runs


@dataclass(frozen=True)
class _Plan:
    """What every arm-seed of one :func:`run_arms` call shares."""

    config: str | Path
    runs_dir: Path
    archive: Path | None
    archived: tuple[str, ...]
    reuse: bool
    evaluate: Callable[[ArmRun], Mapping[str, Any]] | None
    ignore: tuple[str, ...]
    plugin_manager: Callable[[], Any] | None
    progress: bool

    def finished(self, run: ArmRun, folder: Path) -> bool:
        """``folder`` holds ``run``'s arm-seed trained to its steps (if it trains) and evaluated (if
        the experiment evaluates)."""
        trained = not run.arm.train or _trained_to(folder, run.config.steps)
        return trained and (self.evaluate is None or (folder / RECORD_FILE).is_file())


def _check_experiment_settings(settings: Mapping[str, Any], folders: Sequence[Path | None], *, fresh: bool) -> None:
    """The experiment-level settings against each folder's ``settings.json`` (written by the first start;
    ``fresh``: forget what an earlier start wrote)."""
    for folder in folders:
        if folder is None:
            continue
        if fresh and (folder / "settings.json").exists():
            (folder / "settings.json").unlink()
        check_settings(folder, settings)


def _read_back_and_archive(run: ArmRun, plan: _Plan) -> None:
    """Read ``run``'s record and CPU seconds back from its folder; archive it once it is finished (its
    half-done pack, stale then, is deleted)."""
    run_dir = run.run_dir
    run.record = _read_json(run_dir / RECORD_FILE)
    run.train_cpu_s = float(_read_json(run_dir / RUNNER_FILE).get("train_cpu_s", math.nan))
    if plan.archive is not None and not run.restored and plan.finished(run, run_dir):
        _copy(run_dir, plan.archive / run_dir.name, plan.archived)
        _pack_path(plan.archive, run_dir.name).unlink(missing_ok=True)


def _restore_from_archive(run: ArmRun, plan: _Plan, *, unpack: bool) -> None:
    """Bring back what the archive holds of ``run``: a half-done pack (``unpack``), resumed by the
    training that follows, or a finished arm-seed's files (``run.restored``)."""
    from wmrl_core.checkpoint import has_checkpoint

    assert plan.archive is not None
    archived = plan.archive / run.name
    if unpack and not plan.finished(run, archived) and unpack_unfinished(plan.archive, plan.runs_dir, run.name):
        print(f"[runner] {run.name}: resuming the half-done run packed in {plan.archive / PARTIAL_DIR}", flush=True)
    if not plan.finished(run, run.run_dir) and plan.finished(run, archived):
        if has_checkpoint(run.run_dir / "checkpoints"):
            raise ConfigError(
                f"{run.run_dir} holds an unfinished run and {archived} a finished one of the "
                f"same arm-seed; remove one of them (rm -r {run.run_dir}, or the archived copy) and run again"
            )
        _copy(archived, run.run_dir, plan.archived)
        run.restored = True


def _refuse_changed_settings(run: ArmRun, plan: _Plan) -> None:
    changed = _changed_settings(run.run_dir, run.config, plan.ignore)
    if changed:
        raise ConfigError(
            f"{run.run_dir} finished training with other settings than this experiment gives it now: "
            f"{'; '.join(changed)}. Put them back, or use another output folder"
        )


def _train_and_evaluate(run: ArmRun, base: list[str], plan: _Plan) -> None:
    """Train ``run`` (resuming its checkpoint) unless it is trained, book its CPU seconds, evaluate it."""
    from wmrl_core.checkpoint import has_checkpoint
    from wmrl_core.trainer import train

    run_dir = run.run_dir
    book = _read_json(run_dir / RUNNER_FILE) if plan.reuse else {}
    if run.arm.train and not (plan.reuse and _trained_to(run_dir, run.config.steps)):
        resume = plan.reuse and has_checkpoint(run_dir / "checkpoints")
        if resume:
            run.config = load_config(plan.config, [*base, "resume=true"])
        if plan.progress:
            print(f"[runner] {run.name}: training{' (resumed)' if resume else ''}", flush=True)
        started = time.process_time()
        train(run.config, plugin_manager=plan.plugin_manager() if plan.plugin_manager else None)
        book["train_cpu_s"] = float(book.get("train_cpu_s", 0.0)) + time.process_time() - started
        run.trained = True
    book.update(arm=run.arm.name, seed=run.seed, overrides=list(run.arm.overrides))
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RUNNER_FILE).write_text(json.dumps(book, indent=1) + "\n")
    if plan.evaluate is not None:
        (run_dir / RECORD_FILE).write_text(json.dumps(dict(plan.evaluate(run)), default=float) + "\n")

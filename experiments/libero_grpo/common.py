"""What the LIBERO GRPO studies share: success on init states with evaluation noise shared across arms, the
arms-by-seeds run through :func:`~wmrl_core.experiments.runner.run_arms`, and per-run summaries."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def evaluation_noise_seed(seed: int) -> int:
    """The shared evaluation noise of experiment seed ``seed`` (every arm of a seed draws the same)."""
    return 1_000_003 * seed + 11


def success_counts(
    env: Any,
    policy: Any,
    seed: int,
    label: str,
    *,
    split: str = "train",
    inits: Sequence[int] | None = None,
    samples: int = 1,
) -> dict[str, Any]:
    """``samples`` sampled episodes of ``policy`` from every init state of ``split`` (those in ``inits``
    when given) of the environment's tasks, drawn from :func:`evaluation_noise_seed`; successes in all and
    per task, and the episodes the simulator could not run (left out of both counts)."""
    import torch

    tasks = [t for t in env.tasks(split) if inits is None or t.data["init_state"] in set(inits)]
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(evaluation_noise_seed(seed))
        rollouts = policy.generate(tasks, samples)
    outcomes = env.execute(rollouts.tasks, rollouts.solutions)
    ok = [(o, t) for o, t in zip(outcomes, rollouts.tasks) if o.status == "ok"]
    task_ids = sorted({t.data["task_index"] for t in tasks})
    per_task = {str(i): [int(o.score) for o, t in ok if t.data["task_index"] == i] for i in task_ids}
    out = {
        "successes": int(sum(o.score for o, _ in ok)),
        "episodes": len(ok),
        "infrastructure_failures": len(outcomes) - len(ok),
        "per_task": {k: [sum(v), len(v)] for k, v in per_task.items()},
    }
    print(f"  eval {label} ({split}): {out['successes']}/{out['episodes']}", flush=True)
    return out


class LazyLiberoEnv:
    """The evaluation environment of a study's ``evaluate(run)``: built on first use, closed by :meth:`close`."""

    def __init__(self, tasks: Sequence[int]) -> None:
        self.tasks, self._env = list(tasks), None

    def env(self):
        if self._env is None:
            from wmrl_libero.environment import LiberoEnvironment

            self._env = LiberoEnvironment(
                task_indices=self.tasks, num_workers=2, envs_per_worker=2, trajectory_states=0
            )
        return self._env

    def close(self) -> None:
        if self._env is not None:
            self._env.close()


def training_curve(run_dir: Path) -> list[float]:
    """A ``real`` run's success per training step on the step's simulated episodes (``reward/real_mean``)."""
    from wmrl_core.metrics import read_metrics

    return [float(r["reward/real_mean"]) for r in read_metrics(run_dir) if r.get("reward/real_mean") is not None]


def update_summary(run_dir: Path) -> dict[str, float]:
    """A trained arm-seed's update diagnostics: sigma after the first and the last update, the action-mean
    shift from the start on the probe set, and per-step means of clip fraction, approximate KL and the share
    of groups that entered the update."""
    from wmrl_core.metrics import read_metrics

    rows = [r for r in read_metrics(run_dir) if r.get("policy/sigma_mean") is not None]
    share = [r["grpo/informative_group_share"] for r in rows if r.get("grpo/informative_group_share") is not None]
    return {
        "sigma_first": float(rows[0]["policy/sigma_mean"]),
        "sigma_last": float(rows[-1]["policy/sigma_mean"]),
        "action_shift": float(rows[-1]["policy/action_shift_from_start"]),
        "clip_fraction": float(np.mean([r["policy/clip_fraction"] for r in rows])),
        "approx_kl": float(np.mean([r["policy/approx_kl"] for r in rows])),
        "informative_group_share": float(np.mean(share))
        if share
        else None,  # logged since grpo/informative_group_share
    }


def run_study(
    config: Path,
    arms: Mapping[str, Sequence[str] | None],
    seeds: Sequence[int],
    runs: Path,
    archive: Path,
    *,
    overrides: Sequence[str],
    settings: Mapping[str, Any],
    evaluate: LazyLiberoEnv | Callable[[Any], Any],
    report_only: bool,
    after_run: Callable[[Any], None] | None = None,
) -> list[Any]:
    """Every arm for every seed (resumable; finished arm-seeds archived), the evaluation environment closed
    whatever happens; the worker count may differ between resumptions. ``after_run(run)`` follows each
    arm-seed's progress line (``run_arms``' ``on_run``)."""
    from wmrl_core.experiments.runner import run_arms

    def on_run(run) -> None:
        print(f"== seed {run.seed} {run.arm.name}", flush=True)
        if after_run is not None:
            after_run(run)

    try:
        return run_arms(
            config,
            arms,
            seeds,
            runs,
            overrides=overrides,
            evaluate=evaluate,
            settings=settings,
            archive=archive,
            ignore=["environment.kwargs.num_workers"],
            report_only=report_only,
            progress=True,
            on_run=on_run,
        )
    finally:
        evaluate.close()


def int_keys(d: dict) -> dict:
    """JSON keeps seeds as strings; a page reads them back as ints (``json.loads(..., object_hook=int_keys)``)."""
    return {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in d.items()}


def collect(
    arm_runs: Sequence[Any],
) -> tuple[dict[str, dict[int, dict]], dict[int, list[float]], dict[str, dict[int, dict]]]:
    """From finished arm-seeds: evaluation records ``[arm][seed]``, ``real``'s training curves ``[seed]`` and
    the trained arms' :func:`update_summary` ``[arm][seed]``."""
    records: dict[str, dict[int, dict]] = {}
    curves: dict[int, list[float]] = {}
    updates: dict[str, dict[int, dict[str, Any]]] = {}
    for run in arm_runs:
        records.setdefault(run.arm.name, {})[run.seed] = run.record
        if run.arm.train:
            updates.setdefault(run.arm.name, {})[run.seed] = update_summary(run.run_dir)
        if run.arm.name == "real":
            curves[run.seed] = training_curve(run.run_dir)
    return records, curves, updates


def update_table(updates: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> str:
    """:func:`update_summary` of every trained arm-seed, one row each (JSON-read seeds sort as ints)."""
    from wmrl_core.experiments.report import markdown_table, number

    header = ["arm", "seed", "sigma, first update", "sigma, last", "action-mean shift", "clip fraction", "approx. KL"]
    return markdown_table(
        [*header, "groups used"],
        [
            [
                arm,
                str(s),
                number(u["sigma_first"]),
                number(u["sigma_last"]),
                number(u["action_shift"], 4),
                number(u["clip_fraction"]),
                number(u["approx_kl"], 4),
                number(u["informative_group_share"], 2),
            ]
            for arm in ("real", "noise_control")
            for s, u in sorted(updates.get(arm, {}).items())
        ],
        align="llrrrrrr",
    )

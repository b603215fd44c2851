"""The synthetic theorem experiment: its arms, their curves, and the report.

``wmrl experiment synthetic`` runs ``real``, ``world_model``, ``wmrl`` (rectified fusion),
``inverse_variance`` fusion, the ablations and the independent and confident-decoy world models
on the synthetic bandit (:data:`SYNTHETIC_ARMS`) and reports, per arm: final true reward (mean
and 95% t-interval over seeds), compute spent, and compute to reach 95% of the ``real`` arm's
final true reward, with the :data:`PAIRED_COMPARISONS` seed by seed. The arms run through
:func:`wmrl_core.experiments.runner.run_arms` (seeds outer, so that machine noise hits every arm
alike); :func:`run_curves` reads each run's evaluation curve into an :class:`ArmResult`, and the
report functions (:func:`summarize`, :func:`write_report`) work on those, whatever the domain.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_core.experiments.package_data import synthetic_config
from wmrl_core.experiments.report import seed_list
from wmrl_core.experiments.runner import ArmRun, run_arms
from wmrl_core.experiments.stats import mean_ci95
from wmrl_core.metrics import nanmean, read_metrics

__all__ = [
    "SYNTHETIC_ARMS",
    "PAIRED_COMPARISONS",
    "DIAGNOSED_ARMS",
    "WMRL_STEPS",
    "with_steps",
    "plot_diagnostics",
    "DIAGNOSTIC_KEYS",
    "run_record",
    "save_archive",
    "load_archive",
    "ArmResult",
    "run_curves",
    "compute_to_reach",
    "smoothed_final",
    "paired_compute_ratios",
    "summarize",
    "per_seed",
    "per_seed_table",
    "markdown_table",
    "plot_curves",
    "write_report",
    "build_parser",
    "main",
]

WMRL_STEPS = 120
"""Steps of every arm but ``real`` (60 in the config): arms are compared on the compute they need
to reach ``real``'s final true reward, not on the score at equal steps, and a world-model step
costs about a seventh of a real one."""

SYNTHETIC_ARMS: dict[str, list[str]] = {
    "real": ["mode=real"],
    "world_model": ["mode=world_model", f"steps={WMRL_STEPS}"],
    "wmrl": ["mode=wmrl", f"steps={WMRL_STEPS}"],  # the defaults: mse_weighted fusion, smoothed calibration
    # GRPO on the anchor groups alone (weight 0): what WMRL gains over it is the world model's
    "wmrl_anchors_only": ["mode=wmrl", "fusion.method=anchors_only", f"steps={WMRL_STEPS}"],
    "wmrl_inverse_variance": ["mode=wmrl", "fusion.method=inverse_variance", f"steps={WMRL_STEPS}"],
    "wmrl_rectified": ["mode=wmrl", "fusion.method=rectified", f"steps={WMRL_STEPS}"],
    "wmrl_shrinkage": ["mode=wmrl", "fusion.method=shrinkage", f"steps={WMRL_STEPS}"],
    "wmrl_isotonic": ["mode=wmrl", "calibration.calibrator=isotonic", f"steps={WMRL_STEPS}"],
    "wmrl_no_calibration": ["mode=wmrl", "calibration.enabled=false", f"steps={WMRL_STEPS}"],
    "wmrl_pooled": ["mode=wmrl", "fusion.method=pooled", f"steps={WMRL_STEPS}"],
    # the matched noise control: a world model whose scores carry nothing about the task
    "wmrl_noise_wm": ["mode=wmrl", "world_model.name=noise", f"steps={WMRL_STEPS}"],
    "wmrl_independent_wm": ["mode=wmrl", "world_model.kwargs.quality=independent", f"steps={WMRL_STEPS}"],
    "wmrl_confident_decoy": ["mode=wmrl", "world_model.kwargs.quality=confident_decoy", f"steps={WMRL_STEPS}"],
    "wmrl_confident_decoy_inverse_variance": [
        "mode=wmrl",
        "world_model.kwargs.quality=confident_decoy",
        "fusion.method=inverse_variance",
        f"steps={WMRL_STEPS}",
    ],
    "wmrl_confident_decoy_rectified": [
        "mode=wmrl",
        "world_model.kwargs.quality=confident_decoy",
        "fusion.method=rectified",
        f"steps={WMRL_STEPS}",
    ],
}


def with_steps(arms: dict[str, list[str]], steps: int, real_steps: int) -> dict[str, list[str]]:
    """The same arms with ``steps`` (``real_steps`` for ``real``): a faster setting for tests."""
    return {
        name: [o for o in overrides if not o.startswith("steps=")]
        + [f"steps={real_steps if name == 'real' else steps}"]
        for name, overrides in arms.items()
    }


DIAGNOSTIC_KEYS = ("fusion/w_world_model", "fusion/gate_open", "calibration/tied_group_share", "fusion/n_effective")
"""Per-step metrics each run keeps (in :attr:`ArmResult.diagnostics` and the archive) for the late means
of the table and the panels of ``diagnostics.png``."""


@dataclass
class ArmResult:
    name: str
    curves: list[list[tuple[float, float]]] = field(default_factory=list)
    """Per seed: (cumulative compute in s, evaluation score) at each evaluation."""
    finals: list[float] = field(default_factory=list)
    compute: list[dict[str, float]] = field(default_factory=list)
    w_world_model: list[float] = field(default_factory=list)
    """Per seed: mean world-model fusion weight over the second half of training (``fusion/w_world_model``:
    the weight of the calibrated stream, or :math:`\\hat\\lambda` for ``rectified``)."""
    tied_share: list[float] = field(default_factory=list)
    """Per seed: mean share of world-model groups with all-equal calibrated rewards, second half."""
    n_effective: list[float] = field(default_factory=list)
    """Per seed: mean real rollouts each update is worth (``fusion/n_effective``), second half."""
    runs: list[dict[str, Any]] = field(default_factory=list)
    """Per seed: the run as :func:`run_record` keeps it, with its ``seed`` (what the archive stores)."""

    @property
    def initials(self) -> list[float]:
        """Per seed: score of the untrained policy (the evaluation at step 0)."""
        return [c[0][1] for c in self.curves]

    def add_run(self, seed: int, run: dict[str, Any]) -> None:
        """Append one seed's run, given as :func:`run_record` makes it."""
        self.runs.append({**run, "seed": seed})
        self.curves.append([(float(x), float(y)) for x, y in run["curve"]])
        self.finals.append(_final_score(self.curves[-1]))
        self.compute.append(dict(run["compute"]))
        for key, values in (
            ("fusion/w_world_model", self.w_world_model),
            ("calibration/tied_group_share", self.tied_share),
            ("fusion/n_effective", self.n_effective),
        ):
            half = [v for step, v in run["diagnostics"].get(key, []) if step >= run["records"] // 2]
            values.append(float(np.mean(half)) if half else math.nan)


def run_record(records: Sequence[dict[str, Any]], metric: str = "eval/true_reward") -> dict[str, Any]:
    """What the report needs of one run's ``metrics.jsonl`` records: the evaluation curve against cumulative
    compute, the compute by stage at the end, and the per-step :data:`DIAGNOSTIC_KEYS` (a few kB a run,
    so that the archive of a whole experiment can be committed and its page rebuilt from it)."""
    return {
        "records": len(records),
        "curve": [[r["compute/total_s"], r[metric]] for r in records if r.get(metric) is not None],
        "compute": {
            k.split("/")[1]: records[-1][k]
            for k in ("compute/generation_s", "compute/world_model_s", "compute/execution_s", "compute/total_s")
        },
        "diagnostics": {
            key: [[r["step"], r[key]] for r in records if r.get(key) is not None] for key in DIAGNOSTIC_KEYS
        },
    }


def _final_score(curve: Sequence[tuple[float, float]], last_k: int = 3) -> float:
    """Mean of the last ``last_k`` evaluations (one evaluation is too noisy to compare), but
    never reaching back into the first two thirds of a short curve (the untrained policy)."""
    k = max(1, min(last_k, len(curve) // 3))
    return float(np.mean([s for _, s in curve[-k:]]))


def run_curves(
    config_path: str | Path,
    arms: dict[str, list[str]],
    seeds: Sequence[int],
    out_dir: str | Path,
    overrides: Sequence[str] = (),
    metric: str = "eval/true_reward",
    reuse: bool = False,
) -> dict[str, ArmResult]:
    """Train every arm for every seed (seeds outer, arms inner) in ``out_dir/runs`` and collect
    their curves of ``metric`` against cumulative compute.

    :param reuse: keep runs that already finished in ``out_dir`` (their ``summary.json``
        exists) instead of training them again: an interrupted benchmark resumes.
    """
    results = {name: ArmResult(name) for name in arms}

    def collect(run: ArmRun) -> None:
        res = results[run.arm.name]
        res.add_run(run.seed, run_record(read_metrics(run.run_dir), metric))
        print(
            f"  {run.arm.name:<22} seed {run.seed}: final {metric} {res.finals[-1]:.3f}, "
            f"compute {res.compute[-1]['total_s']:.0f} s",
            flush=True,
        )

    run_arms(config_path, arms, seeds, Path(out_dir) / "runs", overrides=overrides, reuse=reuse, on_run=collect)
    return results


def save_archive(results: dict[str, ArmResult], path: str | Path, settings: dict[str, Any]) -> None:
    """Every run of ``results`` as :func:`run_record` keeps it, with the experiment's ``settings``, gzipped
    JSON (deterministic bytes: no timestamp in the gzip header)."""
    runs = [{"arm": name, **run} for name, res in results.items() for run in res.runs]
    text = json.dumps({"settings": settings, "runs": runs}, indent=0, sort_keys=True)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(gzip.compress(text.encode(), mtime=0))


def load_archive(path: str | Path) -> tuple[dict[str, ArmResult], dict[str, Any]]:
    """The results and settings :func:`save_archive` wrote, arms in the order they were run."""
    data = json.loads(gzip.decompress(Path(path).read_bytes()))
    results: dict[str, ArmResult] = {}
    for run in data["runs"]:
        results.setdefault(run["arm"], ArmResult(run["arm"])).add_run(run["seed"], run)
    return results, data["settings"]


def compute_to_reach(curve: Sequence[tuple[float, float]], target: float, smooth: int = 2) -> float | None:
    """First cumulative compute at which the running mean of ``smooth`` evaluations reaches ``target``.

    The first evaluation is the untrained policy (step 0) and never counts: an arm reaches a
    target by training, so a target below the starting score is reached at the first
    evaluation after training, not at zero compute.
    """
    trained = list(curve[1:])
    scores = np.array([s for _, s in trained])
    for i in range(len(trained)):
        window = scores[max(0, i - smooth + 1) : i + 1]
        if window.mean() >= target:
            return float(trained[i][0])
    return None


def smoothed_final(curve: Sequence[tuple[float, float]], smooth: int = 2) -> float:
    """Mean of the last ``smooth`` trained evaluations (step 0 excluded when there are others):
    exactly the running mean that :func:`compute_to_reach` tests at the end of a curve."""
    trained = [s for _, s in curve[1:]] or [curve[0][1]]
    return float(np.mean(trained[-smooth:]))


def summarize(
    results: dict[str, ArmResult], baseline: str = "real", fraction: float = 0.95, smooth: int = 2
) -> dict[str, Any]:
    """Per-arm final score, compute by stage, and compute to reach the target.

    The target is ``fraction`` times the baseline's mean over seeds of :func:`smoothed_final`,
    the same running mean of ``smooth`` evaluations that reaching it is tested with, so the
    baseline reaches its own target (fraction 1) on about half of its seeds, not only where one
    noisy last evaluation happens to be high. The speed-up is paired by seed:
    :math:`s_i = C^{base}_i / C^{arm}_i`, reported as the mean and 95% t-interval of :math:`s_i`
    over the seeds where both arms reach the target, with how many those are
    (``speedup_seeds``; a ratio over few seeds favours the seeds where the baseline was lucky).

    ``gain`` is the paired improvement over the untrained policy, final minus step-0 score; a
    baseline whose gain is not positive makes "reaching its final score" a weak target, which
    ``baseline_improved`` records so that reports can say so.
    """
    target = fraction * float(np.mean([smoothed_final(c, smooth) for c in results[baseline].curves]))
    base_reach = [compute_to_reach(c, target, smooth) for c in results[baseline].curves]
    rows: dict[str, dict[str, Any]] = {}
    for name, res in results.items():
        reach = [compute_to_reach(c, target, smooth) for c in res.curves]
        reached = [r for r in reach if r is not None]
        final_mean, final_ci = mean_ci95(res.finals)
        ratios = [b / a for b, a in zip(base_reach, reach) if a and b]
        speed, speed_ci = mean_ci95(ratios) if ratios else (None, None)
        gain_mean, gain_ci = mean_ci95([f - i for f, i in zip(res.finals, res.initials)])
        rows[name] = {
            "final_mean": final_mean,
            "final_ci95": final_ci,
            "initial_mean": float(np.mean(res.initials)),
            "gain_mean": gain_mean,
            "gain_ci95": gain_ci,
            **{
                f"compute_{stage}_s": float(np.mean([c[f"{stage}_s"] for c in res.compute]))
                for stage in ("generation", "world_model", "execution", "total")
            },
            "compute_to_target_s": float(np.mean(reached)) if len(reached) == len(reach) else None,
            "seeds_reaching_target": f"{len(reached)}/{len(reach)}",
            "speedup_vs_baseline": speed,
            "speedup_ci95": speed_ci,
            "speedup_seeds": f"{len(ratios)}/{len(reach)}",
            "w_world_model_late": nanmean(res.w_world_model),
            "tied_share_late": nanmean(res.tied_share),
            "n_effective_late": nanmean(res.n_effective),
        }
    baseline_improved = rows[baseline]["gain_mean"] > 0
    paired = [
        paired_compute_ratios(results, arm, ref, target, smooth)
        for arm, ref in PAIRED_COMPARISONS
        if arm in results and ref in results
    ]
    return {
        "baseline": baseline,
        "target": target,
        "fraction": fraction,
        "smooth": smooth,
        "baseline_improved": bool(baseline_improved),
        "arms": rows,
        "paired": paired,
        "per_seed": per_seed(results, baseline, smooth),
    }


def per_seed(results: dict[str, ArmResult], baseline: str = "real", smooth: int = 2) -> dict[str, dict[str, list]]:
    """Every seed of every arm: its smoothed final (:func:`smoothed_final`), that minus the baseline's on the
    same seed (the seeds are paired: the same bandit), and the world model's late weight."""
    base = {_seed(results[baseline], i): smoothed_final(c, smooth) for i, c in enumerate(results[baseline].curves)}
    table: dict[str, dict[str, list]] = {}
    for name, res in results.items():
        seeds = [_seed(res, i) for i in range(len(res.curves))]
        finals = [smoothed_final(c, smooth) for c in res.curves]
        table[name] = {
            "seeds": seeds,
            "final": finals,
            "minus_baseline": [f - base[s] if s in base else None for s, f in zip(seeds, finals)],
            "w_world_model_late": list(res.w_world_model),
        }
    return table


def _seed(res: ArmResult, i: int) -> int:
    """The seed of ``res``'s ``i``-th run (its position where the runs were not recorded)."""
    return int(res.runs[i]["seed"]) if i < len(res.runs) else i


PAIRED_COMPARISONS = (
    ("wmrl", "wmrl_inverse_variance"),
    ("wmrl", "wmrl_anchors_only"),
    ("wmrl_rectified", "wmrl_inverse_variance"),
    ("wmrl_isotonic", "wmrl"),
    ("wmrl_noise_wm", "wmrl_anchors_only"),
    ("wmrl_shrinkage", "wmrl_inverse_variance"),
    ("wmrl_shrinkage_calibrated", "wmrl_inverse_variance"),
    ("wmrl_gradient_lambda", "wmrl_inverse_variance"),
    ("wmrl_rollout_moments", "wmrl_inverse_variance"),
    ("wmrl_confident_decoy", "wmrl_confident_decoy_inverse_variance"),
)
"""(arm, reference) pairs whose compute to the target is compared seed by seed in the report."""


def paired_compute_ratios(
    results: dict[str, ArmResult], arm: str, reference: str, target: float, smooth: int = 2
) -> dict[str, Any]:
    """Per seed :math:`q_i = C^{arm}_i / C^{ref}_i`, compute to ``target`` of ``arm`` over that of
    ``reference`` on the same seed (same bandit, same task draws), and the mean and 95%
    t-interval of :math:`q_i` over the seeds where both reach it (below 1: ``arm`` is faster)."""
    pairs = zip(results[arm].curves, results[reference].curves, strict=True)
    reach = [(compute_to_reach(a, target, smooth), compute_to_reach(r, target, smooth)) for a, r in pairs]
    ratios = [a / r if a and r else None for a, r in reach]
    mean, ci = mean_ci95([q for q in ratios if q is not None])
    return {"arm": arm, "reference": reference, "per_seed": ratios, "mean": mean, "ci95": ci}


def _seconds(x: float) -> str:
    """Whole seconds, but small costs (a ridge world model, a GRU policy) keep two digits, not 0."""
    return f"{x:.0f}" if x >= 10 or x == 0 else f"{x:.2g}"


def markdown_table(summary: dict[str, Any], metric_label: str = "final true reward") -> str:
    lines = [
        f"| arm | {metric_label} (95% CI) | gain over untrained (95% CI) | generation (s) | world model (s) | execution (s) | total (s) | "
        f"compute to {summary['fraction']:.0%} of {summary['baseline']}'s final, mean of last "
        f"{summary.get('smooth', 2)} evaluations ({summary['target']:.3f}) | "
        f"speed-up (95% CI) | w_W or λ̂ (late) | tied WM groups (late) | n_eff per step (late) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in summary["arms"].items():
        ctt = (
            _seconds(r["compute_to_target_s"])
            if r["compute_to_target_s"] is not None
            else f"not reached ({r['seeds_reaching_target']})"
        )
        speed = (
            f"{r['speedup_vs_baseline']:.1f}x ± {r['speedup_ci95']:.1f} ({r['speedup_seeds']} seeds)"
            if r["speedup_vs_baseline"]
            else "-"
        )
        w, tied, n_eff = (
            f"{r[k]:{fmt}}" if math.isfinite(r.get(k, math.nan)) else "-"
            for k, fmt in (("w_world_model_late", ".2f"), ("tied_share_late", ".0%"), ("n_effective_late", ".0f"))
        )
        lines.append(
            f"| {name} | {r['final_mean']:.3f} ± {r['final_ci95']:.3f} | {r['gain_mean']:+.3f} ± {r['gain_ci95']:.3f} | "
            f"{_seconds(r['compute_generation_s'])} | {_seconds(r['compute_world_model_s'])} | "
            f"{_seconds(r['compute_execution_s'])} | {_seconds(r['compute_total_s'])} | "
            f"{ctt} | {speed} | {w} | {tied} | {n_eff} |"
        )
    if summary.get("paired"):
        lines += [
            "",
            "Compute to the target, paired by seed (below 1: the arm is faster than its reference):",
            "",
            "| arm / reference | ratio per seed | mean ratio (95% CI) |",
            "|---|---|---|",
        ]
        for p in summary["paired"]:
            per_seed = ", ".join("-" if q is None else f"{q:.2f}" for q in p["per_seed"])
            lines.append(f"| {p['arm']} / {p['reference']} | {per_seed} | {p['mean']:.2f} ± {p['ci95']:.2f} |")
    if summary.get("per_seed"):
        lines += ["", *per_seed_table(summary)]
    if not summary.get("baseline_improved", True):
        lines.append(
            f"\nThe {summary['baseline']} arm did not improve on the untrained policy (gain "
            f"{summary['arms'][summary['baseline']]['gain_mean']:+.3f}): its final score is a weak target, "
            "reached by any arm whose first trained evaluation does not fall below it."
        )
    return "\n".join(lines)


def per_seed_table(summary: dict[str, Any]) -> list[str]:
    """The markdown lines of :func:`per_seed`: each seed's final minus the baseline's on the same seed, how
    many seeds end at or above it, and the world model's late weight per seed."""
    base = summary["baseline"]
    lines = [
        f"Every seed: smoothed final minus {base}'s on the same seed, and the world model's weight (late):",
        "",
        f"| arm | final − {base}, per seed | seeds at or above {base} | weight per seed (late) |",
        "|---|---|---|---|",
    ]
    for name, row in summary["per_seed"].items():
        diffs = [d for d in row["minus_baseline"] if d is not None]
        per = ", ".join(f"{s}: {d:+.3f}" for s, d in zip(row["seeds"], row["minus_baseline"]) if d is not None)
        weights = ", ".join("-" if not math.isfinite(w) else f"{w:.2f}" for w in row["w_world_model_late"])
        lines.append(f"| {name} | {per} | {sum(d >= 0 for d in diffs)}/{len(diffs)} | {weights} |")
    return lines


def plot_curves(
    results: dict[str, ArmResult],
    path: Path,
    ylabel: str = "true reward",
    target: float | None = None,
    optimum: float | None = None,
    target_label: str = "target",
    shifted: dict[str, tuple[float, str]] | None = None,
    xscale: str = "symlog",
) -> None:
    """Mean score against cumulative compute per arm (band: min to max over seeds).

    :param shifted: ``{arm: (offset_s, label)}`` draws that arm again, dashed, moved right by a
        one-off cost that its runs did not pay (e.g. fitting the world model).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    # more arms than the default cycle's 10 colours would repeat colours (tab20 is a ListedColormap:
    # it has .colors, which the Colormap type returned by get_cmap does not declare)
    palette = plt.get_cmap("tab20").colors if len(results) > 10 else [None] * len(results)  # type: ignore[attr-defined]
    for (name, res), color in zip(results.items(), palette):
        grid = np.unique(np.concatenate([[x for x, _ in c] for c in res.curves]))
        ys = np.array([np.interp(grid, [x for x, _ in c], [y for _, y in c]) for c in res.curves])
        (line,) = ax.plot(grid, ys.mean(axis=0), label=name, color=color)
        # the evaluations themselves, so that the mean line is not mistaken for data
        ax.scatter(
            [x for c in res.curves for x, _ in c],
            [y for c in res.curves for _, y in c],
            s=8,
            color=line.get_color(),
            alpha=0.6,
        )
        if len(ys) > 1:
            ax.fill_between(grid, ys.min(axis=0), ys.max(axis=0), color=line.get_color(), alpha=0.15)
        if shifted and name in shifted:
            offset, label = shifted[name]
            ax.plot(grid + offset, ys.mean(axis=0), ls="--", color=line.get_color(), label=label)
    if target is not None:
        ax.axhline(target, color="gray", ls="--", lw=1, label=target_label)
    if optimum is not None:
        ax.axhline(optimum, color="black", ls=":", lw=1, label="optimum")
    if xscale == "symlog":  # compute spans decades across arms; linear up to 100 s keeps 0 on the axis
        ax.set_xscale("symlog", linthresh=100)
    ax.set_xlim(left=0)
    ax.set_xlabel("cumulative compute (charged seconds)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_diagnostics(
    results: dict[str, ArmResult],
    arms: Sequence[str],
    path: Path,
    keys: Sequence[tuple[str, str]] = (
        ("fusion/w_world_model", "weight of the world-model stream"),
        ("fusion/gate_open", "share of runs with the gate open"),
        ("fusion/n_effective", "real rollouts the update is worth"),
        ("calibration/tied_group_share", "world-model groups tied"),
    ),
) -> None:
    """Per-step fusion diagnostics of ``arms`` (mean over their seeds), one panel per metric key."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.8))
    for ax, (key, label) in zip(np.atleast_1d(axes), keys):
        for i, name in enumerate(arms):  # one colour per arm in every panel, whichever panels it has data for
            by_step: dict[int, list[float]] = {}
            for run in results[name].runs:
                for step, value in run["diagnostics"].get(key, []):
                    by_step.setdefault(step, []).append(value)
            if by_step:
                steps = sorted(by_step)
                ax.plot(steps, [np.mean(by_step[t]) for t in steps], label=name, lw=1.2, color=f"C{i % 10}")
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(
    results: dict[str, ArmResult],
    out_dir: str | Path,
    title: str,
    optimum: float | None = None,
    fraction: float = 0.95,
    metric_label: str = "final true reward",
) -> dict[str, Any]:
    """Write ``summary.json``, ``table.md`` and ``reward_vs_compute.png`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(results, fraction=fraction)
    summary["title"] = title
    summary["optimum"] = optimum
    table = markdown_table(summary, metric_label)
    (out_dir / "table.md").write_text(f"# {title}\n\n{table}\n")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot_curves(
        results,
        out_dir / "reward_vs_compute.png",
        ylabel=metric_label.replace("final ", ""),
        target=summary["target"],
        optimum=optimum,
        target_label=f"{fraction:.0%} of real's final",
    )
    return summary


# ------------------------------------------------------------------ `wmrl experiment synthetic`

DIAGNOSED_ARMS = (
    "wmrl",
    "wmrl_inverse_variance",
    "wmrl_rectified",
    "wmrl_noise_wm",
    "wmrl_independent_wm",
    "wmrl_confident_decoy",
)
"""Arms whose per-step fusion diagnostics ``diagnostics.png`` draws (those that were run)."""


def build_parser(prog: str = "wmrl experiment synthetic") -> argparse.ArgumentParser:
    """The options of ``wmrl experiment synthetic``."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="The synthetic theorem experiment: every arm of SYNTHETIC_ARMS over seeds on the synthetic "
        "bandit; writes table.md, summary.json, reward_vs_compute.png and diagnostics.png to --out.",
    )
    p.add_argument(
        "--config", default=str(synthetic_config()), help="the base config (default: the shipped synthetic job)"
    )
    p.add_argument("--seeds", type=seed_list, default=[0, 1, 2], help="seeds, a list or ranges (default 0-2)")
    p.add_argument(
        "--out", default="runs/experiment-synthetic", help="where the report (and, unless --runs, the runs) go"
    )
    p.add_argument("--runs", help="folder for the runs (they go in RUNS/runs; default: --out)")
    p.add_argument("--arms", nargs="*", help=f"subset of arms (default: all): {', '.join(SYNTHETIC_ARMS)}")
    p.add_argument(
        "--reuse", action="store_true", help="keep runs already finished in --out (resume an interrupted experiment)"
    )
    p.add_argument(
        "--archive", help="also write every run's curve and diagnostics to this .json.gz (a page is rebuilt from it)"
    )
    p.add_argument(
        "--from-archive", metavar="ARCHIVE", help="run nothing: rebuild the report in --out from this .json.gz"
    )
    p.add_argument(
        "--replications", type=int, default=500, help="replications of the policy-evaluation experiment (0 skips it)"
    )
    p.add_argument("overrides", nargs="*", help="overrides applied to every arm")
    return p


def _results(args: argparse.Namespace) -> dict[str, ArmResult]:
    """The arms' results: read from ``--from-archive``, or run (and archived if ``--archive``)."""
    from wmrl_core.errors import WMRLError

    if args.from_archive:
        if not Path(args.from_archive).is_file():
            raise WMRLError(f"--from-archive {args.from_archive}: no such file; pass the study's .json.gz archive")
        return load_archive(args.from_archive)[0]
    config = Path(args.config)
    if not config.is_file():
        raise WMRLError(f"config {config} not found; run from the repository root or pass --config PATH")
    unknown = sorted(set(args.arms or ()) - set(SYNTHETIC_ARMS))
    if unknown:
        raise WMRLError(f"unknown arms {unknown}; choose from {', '.join(SYNTHETIC_ARMS)}")
    arms = {k: v for k, v in SYNTHETIC_ARMS.items() if not args.arms or k in args.arms}
    runs = Path(args.runs) if args.runs else Path(args.out)
    results = run_curves(config, arms, seeds=args.seeds, out_dir=runs, overrides=args.overrides, reuse=args.reuse)
    if args.archive:
        settings = {"arms": arms, "seeds": list(args.seeds), "overrides": list(args.overrides)}
        save_archive(results, args.archive, settings)
    return results


def main(argv: Sequence[str] | None = None, prog: str = "wmrl experiment synthetic") -> int:
    """``wmrl experiment synthetic [options] [overrides]``; returns the exit status."""
    from wmrl_core.synthetic.bandit import BanditTruth

    args = build_parser(prog).parse_args(argv)
    results = _results(args)
    out = Path(args.out)
    summary = write_report(results, out, title="Synthetic theorem experiment", optimum=BanditTruth().optimum)
    print((out / "table.md").read_text())
    diagnosed = [a for a in DIAGNOSED_ARMS if a in results]
    if diagnosed:
        plot_diagnostics(results, diagnosed, out / "diagnostics.png")
    print(f"plots: {out / 'reward_vs_compute.png'}, {out / 'diagnostics.png'}; JSON: {out / 'summary.json'}")
    if args.replications:
        from experiments.synthetic.policy_evaluation import write_policy_evaluation

        print(write_policy_evaluation(out / "policy_evaluation.md", replications=args.replications))
    return 0 if summary else 1


if __name__ == "__main__":
    raise SystemExit(main(prog="python -m experiments.synthetic.theorem"))

"""Plots of one run, written to ``RUN_DIR/plots/`` at the end of training (``wmrl plot RUN_DIR``).

A metric ``K`` logged with a standard error ``K_se`` (the evaluation's ``eval/*_se``) is drawn
with error bars of one standard error.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from wmrl_core.metrics import read_metrics

__all__ = ["plot_run", "panel_series"]

PANELS = (
    ("rewards", ("reward/real_mean", "reward/world_model_mean", "reward/calibrated_mean"), "reward (train batch)"),
    ("evaluation", ("eval/true_reward", "eval/reward"), "evaluation score"),
    ("fusion", ("fusion/w_world_model", "fusion/rho2", "fusion/lambda"), "weight / explained variance / lambda"),
    ("effective_samples", ("fusion/n_real", "fusion/n_effective"), "real rollouts the update is worth"),
    (
        "calibration",
        (
            "calibration/within_group_error_raw",
            "calibration/within_group_error_calibrated",
            "calibration/tied_group_share",
        ),
        "within-group error (raw vs calibrated) / tied share",
    ),
    (
        "compute",
        ("compute/generation_s", "compute/world_model_s", "compute/execution_s", "compute/total_s"),
        "cumulative compute (charged s)",
    ),
)


Series = dict[str, tuple[list[int], list[float], list[float] | None]]


def panel_series(records: list[dict[str, Any]], keys: tuple[str, ...]) -> Series:
    """``{key: (steps, values, standard errors or None)}`` for the keys the records have; the
    errors come from ``key + "_se"`` where every point of the key has a finite one."""
    out: Series = {}
    for key in keys:
        rows = [r for r in records if _finite(r.get(key))]
        if not rows:
            continue
        se: list[Any] = [r.get(f"{key}_se") for r in rows]
        out[key] = (
            [int(r["step"]) for r in rows],
            [float(r[key]) for r in rows],
            [float(e) for e in se] if all(_finite(e) for e in se) else None,
        )
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def plot_run(run_dir: str | Path) -> list[Path]:
    """One PNG per panel with the metrics the run has; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    records = read_metrics(run_dir)
    out_dir = run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    written = []
    for name, keys, ylabel in PANELS:
        series = panel_series(records, keys)
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for key, (steps, values, se) in series.items():
            marker = "." if len(steps) < 30 else None
            if se is not None:
                ax.errorbar(steps, values, yerr=se, marker=marker, capsize=2, label=f"{key} ± 1 se")
            else:
                ax.plot(steps, values, marker=marker, label=key)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written

"""Plots of one run, written to ``RUN_DIR/plots/`` at the end of training (``wmrl plot RUN_DIR``)."""

from __future__ import annotations

from pathlib import Path

from wmrl_core.metrics import read_metrics

__all__ = ["plot_run"]

PANELS = (
    ("rewards", ("reward/real_mean", "reward/world_model_mean", "reward/calibrated_mean"), "reward (train batch)"),
    ("evaluation", ("eval/true_reward", "eval/reward"), "evaluation score"),
    ("fusion", ("fusion/w_world_model", "fusion/rho2", "fusion/lambda"), "weight / explained variance / lambda"),
    ("effective_samples", ("fusion/n_real", "fusion/n_effective"), "real rollouts the update is worth"),
    (
        "calibration",
        ("calibration/tied_group_share", "calibration/within_group_error_calibrated"),
        "tied share / within-group error",
    ),
    (
        "compute",
        ("compute/generation_s", "compute/world_model_s", "compute/execution_s", "compute/total_s"),
        "cumulative compute (charged s)",
    ),
)


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
        series = {k: [(r["step"], r[k]) for r in records if isinstance(r.get(k), (int, float))] for k in keys}
        series = {k: v for k, v in series.items() if v}
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for key, points in series.items():
            ax.plot([s for s, _ in points], [v for _, v in points], marker="." if len(points) < 30 else None, label=key)
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

"""Plots of one run, written to ``RUN_DIR/plots/`` at the end of training (``wmrl plot RUN_DIR``).

A metric ``K`` logged with a standard error ``K_se`` (the evaluation's ``eval/*_se``) is drawn
with error bars of one standard error.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

from wmrl_core.metrics import read_metrics

__all__ = ["plot_run", "panel_series", "panel_figure", "PANELS", "Panel"]


class Panel(NamedTuple):
    """One plot: its file name, the metrics it draws, a short y-label and a title."""

    name: str
    keys: tuple[str, ...]
    ylabel: str
    title: str


PANELS = (
    Panel(
        "rewards",
        ("reward/real_mean", "reward/world_model_mean", "reward/calibrated_mean"),
        "mean reward",
        "rewards of the training batch",
    ),
    Panel("evaluation", ("eval/true_reward", "eval/reward"), "score", "evaluation"),
    Panel(
        "fusion",
        ("fusion/w_world_model", "fusion/rho2", "fusion/lambda"),
        "value",
        "fusion: world-model weight, explained variance, lambda",
    ),
    Panel(
        "effective_samples", ("fusion/n_real", "fusion/n_effective"), "rollouts", "real rollouts the update is worth"
    ),
    Panel(
        "calibration",
        (
            "calibration/within_group_error_raw",
            "calibration/within_group_error_calibrated",
            "calibration/tied_group_share",
        ),
        "error / share",
        "calibration: within-group error (raw vs calibrated), tied groups",
    ),
    Panel(
        "compute",
        ("compute/generation_s", "compute/world_model_s", "compute/execution_s", "compute/total_s"),
        "charged seconds",
        "cumulative compute",
    ),
)
WORLD_MODEL_PANELS = {"fusion", "effective_samples", "calibration"}
"""Panels about the world model's stream: not drawn for a ``mode=real`` run (they would be flat zeros)."""
STYLES: dict[str, dict[str, Any]] = {
    # the weight often equals lambda (the rectified and inverse-variance fusions): drawn wide
    # underneath, lambda thin and dashed on top, so that both stay visible
    "fusion/w_world_model": {"linewidth": 4.0, "alpha": 0.45, "zorder": 2},
    "fusion/lambda": {"linewidth": 1.2, "linestyle": "--", "zorder": 3},
}


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


def plot_run(run_dir: str | Path, *, eval_split: str | None = None) -> list[Path]:
    """One PNG per panel with the metrics the run has; returns the files written.

    :param eval_split: the split the evaluations ran on, for the evaluation's title (default: the
        run's ``summary.json``, else its ``config.yaml``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    records = read_metrics(run_dir)
    settings = run_settings(run_dir)
    if eval_split is not None:
        settings["eval_split"] = eval_split
    out_dir = run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    written = []
    for panel in PANELS:
        if settings.get("mode") == "real" and panel.name in WORLD_MODEL_PANELS:
            continue
        series = panel_series(records, panel.keys)
        if not series:
            continue
        fig = panel_figure(panel, series, settings)
        path = out_dir / f"{panel.name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def panel_figure(panel: Panel, series: Series, settings: dict[str, Any]) -> Any:
    """The matplotlib figure of one panel; the evaluation's title names its split."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for key, (steps, values, se) in series.items():
        style = {"marker": "." if len(steps) < 30 else None, **STYLES.get(key, {})}
        if se is not None:
            ax.errorbar(steps, values, yerr=se, capsize=2, label=f"{key} ± 1 se", **style)
        else:
            ax.plot(steps, values, label=key, **style)
    title = panel.title
    if panel.name == "evaluation" and settings.get("eval_split"):
        title = f"{title} on the `{settings['eval_split']}` split"
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("step")
    ax.set_ylabel(panel.ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    # fixed margins that fit these labels: tight_layout measured them on every figure, about 40% of
    # the time a run spends on its plots (and runs are drawn at the end of every training)
    fig.subplots_adjust(left=0.13, right=0.97, top=0.91, bottom=0.13)
    return fig


def run_settings(run_dir: Path) -> dict[str, Any]:
    """The run's ``mode`` and evaluated split, from its ``summary.json`` (the split evaluated:
    ``heldout`` falls back to ``train`` where a domain has none) or else its ``config.yaml``."""
    import json

    import yaml

    summary_path, config_path = run_dir / "summary.json", run_dir / "config.yaml"
    cfg = yaml.safe_load(config_path.read_text()) or {} if config_path.exists() else {}
    settings = {"mode": cfg.get("mode"), "eval_split": (cfg.get("eval") or {}).get("split")}
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        settings["eval_split"] = summary.get("eval_split") or settings["eval_split"]
    return settings

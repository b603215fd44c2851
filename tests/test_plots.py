"""The plots of one run (``wmrl_core/plots.py``): readable labels, every line visible, the
evaluated split named, and no world-model panels for a run without a world model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wmrl_core.plots import PANELS, panel_figure, plot_run

PANEL = {panel.name: panel for panel in PANELS}


def write_run(run: Path, records: list[dict], *, mode: str = "wmrl", split: str = "heldout") -> Path:
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "config.yaml").write_text(f"mode: {mode}\neval:\n  split: {split}\n")
    return run


RECORDS = [
    {
        "step": s,
        "fusion/w_world_model": 0.0 if s == 0 else 0.5,
        "fusion/lambda": 0.0 if s == 0 else 0.5,
        "fusion/rho2": 0.2,
        "calibration/within_group_error_raw": 0.3,
        "calibration/within_group_error_calibrated": 0.2,
        "calibration/tied_group_share": 0.0,
        "eval/true_reward": 0.1 * s,
        "eval/true_reward_se": 0.01,
    }
    for s in range(4)
]


@pytest.mark.parametrize("panel", [p.name for p in PANELS])
def test_every_label_and_title_lies_inside_the_figure(panel):
    import matplotlib

    matplotlib.use("Agg")
    series = {key: ([0, 1, 2], [0.1, 0.2, 0.3], None) for key in PANEL[panel].keys}
    fig = panel_figure(PANEL[panel], series, {"eval_split": "heldout"})
    fig.canvas.draw()
    box = fig.bbox
    ax = fig.axes[0]
    for text in (ax.yaxis.label, ax.xaxis.label, ax.title):
        extent = text.get_window_extent()
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1, (
            panel,
            text.get_text(),
        )


def test_the_world_model_weight_stays_visible_where_it_equals_lambda():
    import matplotlib

    matplotlib.use("Agg")
    series = {k: ([0, 1], [0.5, 0.5], None) for k in ("fusion/w_world_model", "fusion/lambda")}
    ax = panel_figure(PANEL["fusion"], series, {}).axes[0]
    weight, lam = ax.get_lines()
    assert weight.get_label() == "fusion/w_world_model" and lam.get_label() == "fusion/lambda"
    assert weight.get_linewidth() >= 2 * lam.get_linewidth() and lam.get_linestyle() == "--"
    assert lam.get_zorder() > weight.get_zorder()  # the thin dashed line on top of the wide one


def test_a_real_run_draws_no_world_model_panels_and_the_evaluation_names_its_split(tmp_path):
    real = write_run(tmp_path / "real", RECORDS, mode="real")
    names = {p.stem for p in plot_run(real)}
    assert "evaluation" in names and not names & {"fusion", "calibration", "effective_samples"}
    wmrl = write_run(tmp_path / "wmrl", RECORDS)
    assert {"fusion", "calibration", "evaluation"} <= {p.stem for p in plot_run(wmrl)}


def test_the_evaluation_title_names_the_split_evaluated_not_the_one_asked_for(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    run = write_run(tmp_path / "R", RECORDS, split="heldout")
    (run / "summary.json").write_text(json.dumps({"eval_split": "train"}))  # the domain has no heldout split
    from wmrl_core.plots import panel_series, run_settings

    settings = run_settings(run)
    assert settings == {"mode": "wmrl", "eval_split": "train"}
    fig = panel_figure(PANEL["evaluation"], panel_series(RECORDS, PANEL["evaluation"].keys), settings)
    assert fig.axes[0].get_title() == "evaluation on the `train` split"

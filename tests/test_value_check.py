"""The value-check page is rebuilt from its archive alone, and its prose says what the figures say."""

import copy

import pytest

from experiments import pages
from experiments.synthetic import value_check
from wmrl_core.config import TrainConfig, load_config, to_yaml

SETTINGS = {
    "command": "python -m experiments.synthetic.value_check --out runs/x --seeds 0-1 --costs 1 4 --fractions 0.1",
    "config": "wmrl_core/configs/synthetic/wmrl.yaml",
    "seeds": [0, 1],
    "costs": [1.0, 4.0],
    "fractions": [0.1],
    "wmrl": {
        "world_model.kwargs.quality": "miscalibrated",
        "fusion.method": "mse_weighted",
        "calibration.calibrator": "smoothed",
        "policy.kwargs.generation_cost_s": 0.05,
        "world_model.kwargs.cost_per_call_s": 0.1,
        "world_model.kwargs.cost_per_item_s": 0.001,
        "rollout.batch_tasks": 20,
        "rollout.group_size": 8,
        "grpo.lr": 0.1,
        "eval.every": 2,
        "steps": 120,
    },
    "real_steps": 60,
    "defaults": {"fusion.method": "mse_weighted", "calibration.calibrator": "smoothed"},
    "finished": "2026-12-06",
}
REAL_CURVE = [[0.0, 0.0], [100.0, 0.5], [200.0, 1.0], [300.0, 1.0]]
"""Final (mean of the last two trained evaluations) 1.0, so the target is 0.95, reached at compute 300."""


def _run(cost, arm, seed, curve, total_s, steps, value):
    compute = {"generation_s": 0.0, "world_model_s": 0.0, "execution_s": 0.0, "total_s": total_s}
    return dict(
        cost=cost, arm=arm, seed=seed, curve=curve, compute=compute, records=steps + 1, steps=steps, value=value
    )


def _archive(cells):
    """``cells``: per execution cost, (compute at which wmrl reaches the target, predicted ratio, wmrl's final
    compute). ``real`` spends 300 s over 60 steps (5 s a step); ``wmrl`` has ``n_eff`` 40 (real's 160 rollouts
    a step are 4 times that)."""
    runs = []
    for cost, (reach, predicted, total_s) in cells.items():
        for seed in (0, 1):
            runs.append(
                _run(cost, "real", seed, REAL_CURVE, 300.0, 60, {"value/n_eff": 160.0, "value/ratio_vs_real": 1.0})
            )
            curve = [[0.0, 0.0], [reach, 1.0], [2 * reach, 1.0]]
            value = {"value/n_eff": 40.0, "value/ratio_vs_real": predicted}
            runs.append(_run(cost, "wmrl_f0.1", seed, curve, total_s, 120, value))
    return {"settings": copy.deepcopy(SETTINGS), "runs": runs}


# cost 1: measured 300/30 = 10, cost per step 5 / (50/120) = 12, steps ratio 1.2, predicted 4 (60% below);
# cost 4: measured 300/60 = 5, cost per step 5 / (80/120) = 7.5, steps ratio 1.5, predicted 4.5 (10% below)
BELOW = {1.0: (30.0, 4.0, 50.0), 4.0: (60.0, 4.5, 80.0)}


def test_the_page_computes_its_tables_and_figures():
    page = value_check.markdown_page(_archive(BELOW))
    assert "| 1 | 0.1 | 10.00 ± 0.00 (2/2) | 4.00 ± 0.00 | no |" in page
    assert "| 4 | 0.1 | 5.00 ± 0.00 (2/2) | 4.50 ± 0.00 | yes |" in page
    assert "| 1 | 0.1 | 12.00 | 10.00 | 1.20 | 4.00 |" in page
    assert "| 4 | 0.1 | 7.50 | 5.00 | 1.50 | 4.50 |" in page
    text = " ".join(page.split())  # the prose is wrapped
    assert "**The prediction is within 25% in 1 of 2 cells (cost 4 s, fraction 0.1): it is 10-60% below" in text
    assert "The regime explains it." in text and "learning rate (0.1)" in text
    assert "`real`'s 160 executed rollouts a step (4.0x `wmrl`'s `n_eff`)" in text
    assert "`wmrl` needs 1.2-1.5 times `real`'s steps (not the 4.0" in text
    assert "it is within 25% in 1 of 2 cells, so the prediction is, on this evidence, a lower bound" in text
    assert "`fusion.method=mse_weighted` and `calibration.calibrator=smoothed`, the shipped defaults" in text
    assert "`real` 60 steps, `wmrl` 120, evaluation every 2 steps" in text
    assert f"```\n{SETTINGS['command']}\n```" in page and "mean over the 2 seeds" in text
    assert "Not rebuilt from an archive" not in page and "rectified" not in page


def test_the_prose_follows_the_figures():
    nowhere = " ".join(value_check.markdown_page(_archive({**BELOW, 4.0: (60.0, 2.0, 80.0)})).split())
    assert "**The prediction is within 25% nowhere: it is 60% below the measured ratio in every cell.**" in nowhere
    assert "no cell was found where it is within 25%, so the prediction is, on this evidence, a lower bound" in nowhere
    mixed = " ".join(value_check.markdown_page(_archive({**BELOW, 4.0: (60.0, 6.0, 80.0)})).split())
    assert "below the measured ratio in 1 of 2 cells (by 60%) and above it in 1 (by 20%).**" in mixed
    assert "The regime explains it." not in mixed and "neither a prediction nor a bound on the bandit" in mixed
    assert "over its `n_eff` (4.0) times `real`'s steps" in mixed and "needs 1.2-1.5 times `real`'s steps." in mixed
    noisy = _archive(BELOW)  # steps ratios above real's rollouts over n_eff: progress is not limited by steps
    for run in noisy["runs"]:
        run["value"]["value/n_eff"] = 160.0 if run["arm"] == "real" else 140.0
    assert "The regime explains it." not in value_check.markdown_page(noisy)
    other = _archive(BELOW)
    other["settings"]["wmrl"]["fusion.method"] = "rectified"
    assert "`fusion.method=rectified` and `calibration.calibrator=smoothed`, not the defaults" in " ".join(
        value_check.markdown_page(other).split()
    )


def test_from_archive_rebuilds_the_same_bytes(tmp_path):
    archive = _archive(BELOW)
    path = tmp_path / "a" / "value_check_runs.json.gz"
    value_check.save_archive(archive, path)
    first = path.read_bytes()
    value_check.save_archive(value_check.load_archive(path), path)
    assert path.read_bytes() == first and value_check.load_archive(path) == archive
    assert first[4:8] == bytes(4)  # no timestamp in the gzip header: the bytes do not depend on when it was written
    for folder in ("one", "two"):
        argv = ["--from-archive", "--archive", str(path), "--report", str(tmp_path / folder / "value_check.md")]
        assert value_check.main(argv) == 0
    for name in ("value_check.md", "value_check.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert (tmp_path / "one" / "value_check.md").read_text() == value_check.markdown_page(archive)
    beside = tmp_path / "a" / "value_check.md"  # without --archive: the archive beside the page
    assert value_check.main(["--from-archive", "--report", str(beside)]) == 0
    assert beside.read_bytes() == (tmp_path / "one" / "value_check.md").read_bytes()
    assert value_check.main(["--from-archive", "--report", str(tmp_path / "none" / "value_check.md")]) == 1


def test_the_settings_are_those_the_runs_used(tmp_path):
    runs = tmp_path / "cost1" / "runs"
    for arm, overrides in (("real-seed0", ["mode=real"]), ("wmrl_f0.1-seed0", ["mode=wmrl", "steps=120"])):
        (runs / arm).mkdir(parents=True)
        (runs / arm / "config.yaml").write_text(to_yaml(load_config(value_check.CONFIG, overrides)))
    settings = value_check._settings(tmp_path, [0], [1.0], [0.1], "cmd")
    assert settings["wmrl"]["fusion.method"] == TrainConfig().fusion.method == settings["defaults"]["fusion.method"]
    assert settings["wmrl"]["steps"] == 120 and settings["real_steps"] == 60
    assert settings["wmrl"]["rollout.batch_tasks"] * settings["wmrl"]["rollout.group_size"] == 160


def test_the_page_is_registered_with_its_rebuild_command():
    (page,) = [p for p in pages.PAGES if "value_check.md" in p.files]
    assert page.folder == "synthetic" and page.command == value_check.REBUILD
    assert "synthetic/value_check.md" not in pages.NOT_REBUILT


@pytest.mark.parametrize(
    "values, fmt, unit, expected", [([39.1, 57.4], ".0f", "%", "39-57%"), ([1.31, 1.3], ".1f", "", "1.3")]
)
def test_span(values, fmt, unit, expected):
    assert value_check._span(values, fmt, unit) == expected

"""The main job's page is rebuilt from its archived runs; a run is archived only when finished, never over
another."""

import json

import pytest

from experiments.main_job import page


def _finished_run(folder, gate_opens_at=2):
    folder.mkdir()
    summary = {
        "eval_first": {"step": 0, "eval/reward": 0.4, "eval/reward_se": 0.04},
        "eval_last": {"step": 3, "eval/reward": 0.5, "eval/reward_se": 0.01},
        "world_model_earned": {
            "gate_opened_at": gate_opens_at,
            "steps": 3,
            "mean_weight": 0.1,
            "effective_per_executed": 1.2,
        },
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    rows = [{"step": 0, "eval/reward": 0.4}]
    rows += [
        {"step": s, "fusion/gate_open": float(s >= gate_opens_at), "fusion/w_world_model": 0.1 * s} for s in (1, 2, 3)
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "config.yaml").write_text("mode: wmrl\nlogging:\n  caveat: one seed, a toy\n")
    return folder


def test_the_page_shows_what_each_run_printed_and_its_steps(tmp_path):
    archive = tmp_path / "archive"
    page.add_run(_finished_run(tmp_path / "run"), "1-first", "abc1234", "bash quickstart.sh", "a note.", archive)
    text = page.write_page(archive, tmp_path / "out").read_text()
    assert "## 1-first" in text and "`bash quickstart.sh` at commit abc1234. a note." in text
    assert "eval/reward: 0.4000 ± 0.0400 at step 0 -> 0.5000 ± 0.0100 at step 3" in text
    assert "world model: gate open from step 2 of 3; mean weight 0.100; 1.20 effective rollouts" in text
    assert "what this run shows: one seed, a toy" in text  # the config's caveat, as wmrl train prints it
    assert "| 1 | 0 | 0.100 | n/a |" in text and "| 3 | 1 | 0.300 |" in text
    assert "\n| 0 |" not in text  # the evaluation record is not a training step


def test_an_unfinished_run_or_a_taken_label_is_refused(tmp_path):
    archive = tmp_path / "archive"
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    with pytest.raises(ValueError, match="lacks summary.json, metrics.jsonl, config.yaml: archive a run that finished"):
        page.add_run(unfinished, "x", "abc", "cmd", "", archive)
    run = _finished_run(tmp_path / "run")
    page.add_run(run, "x", "abc", "cmd", "", archive)
    with pytest.raises(ValueError, match="exists: choose another --label"):
        page.add_run(run, "x", "abc", "cmd", "", archive)
    with pytest.raises(ValueError, match="a plain folder name"):
        page.add_run(run, "../outside", "abc", "cmd", "", archive)
    assert sorted(p.name for p in archive.iterdir()) == ["x"]  # nothing half-added
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no archived run in .*empty: add one with --add RUN_DIR"):
        page.write_page(tmp_path / "empty", tmp_path)
    assert page.main(["--archive", str(tmp_path / "empty"), "--out", str(tmp_path)]) == 1


def test_runs_are_listed_by_their_number_then_name(tmp_path):
    archive = tmp_path / "archive"
    for label in ("10-later", "2-earlier", "1-first"):
        page.add_run(_finished_run(tmp_path / label), label, "abc", "cmd", "", archive)
    text = page.write_page(archive, tmp_path / "out").read_text()
    assert text.index("## 1-first") < text.index("## 2-earlier") < text.index("## 10-later")

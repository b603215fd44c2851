"""The world model's cross-validation page is written from its JSON record alone, and a wrong record is
refused by name."""

from __future__ import annotations

import json

import pytest
from wmrl_autoresearch.program import build

SUMMARY = {
    "corpus": "corpus.jsonl.gz",
    "n_executions": 12,
    "folds": 2,
    "models": {
        "outcome_model": {
            "within_task_spearman": 0.5,
            "ci95": 0.1,
            "n_tasks": 3,
            "within_task_spearman_per_fold": 0.4,
            "per_fold_ci95": 0.2,
            "n_task_folds": 5,
        }
    },
    "calibration": {"failure_brier": 0.01, "failure_brier_base_rate": 0.02, "coverage_1sd": 0.7, "coverage_2sd": 0.9},
}


def test_the_page_is_rewritten_from_its_record(tmp_path, capsys):
    record = tmp_path / "cv.json"
    record.write_text(json.dumps(SUMMARY))
    assert build.main(["--from-json", str(record), "--report", str(tmp_path / "page")]) == 0
    page = (tmp_path / "page" / "cv.md").read_text()
    assert page == build.cv_table(SUMMARY) == capsys.readouterr().out
    assert "2-fold cross-validation grouped by program, 12 executions" in page
    assert "| outcome_model | 0.400 ± 0.200 | 5 | 0.500 ± 0.100 | 3 |" in page


def test_a_record_of_something_else_or_no_folder_is_refused(tmp_path, capsys):
    record = tmp_path / "other.json"
    record.write_text(json.dumps({"imagination": {}}))
    with pytest.raises(SystemExit):
        build.main(["--from-json", str(record), "--report", str(tmp_path)])
    assert "not a world_model_cv.json written by --report" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build.main(["--from-json", str(record)])
    assert "--from-json needs --report DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the record fixed the folds: a flag of the run is refused, not ignored
        build.main(["--from-json", str(record), "--report", str(tmp_path), "--folds", "3"])
    assert "--folds would change the run, not the page" in capsys.readouterr().err

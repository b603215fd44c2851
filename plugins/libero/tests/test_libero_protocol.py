"""Evaluation protocol: summary maths on hand-made results, and one small real run."""

import json

import pytest
from wmrl_libero.episode_runner import EpisodeJob, EpisodeResult
from wmrl_libero.protocol import summarize
from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require


def _result(task, init, success, status="ok"):
    return EpisodeResult(EpisodeJob("libero_10", task, init), success, 100, status)


def test_summary_excludes_infrastructure_failures_from_rates():
    results = [
        _result(0, 0, True),
        _result(0, 1, False),
        _result(0, 2, False, "infrastructure_failure"),
        _result(1, 0, True),
        _result(1, 1, True),
    ]
    s = summarize(results, {0: "a", 1: "b"})
    assert s["per_task"]["0"]["successes"] == 1 and s["per_task"]["0"]["episodes"] == 2
    assert s["per_task"]["0"]["infrastructure_failures"] == 1
    assert s["per_task"]["1"]["success_rate"] == 1.0
    assert s["overall"]["success_rate"] == pytest.approx(3 / 4)
    lo, hi = s["overall"]["ci95"]
    assert lo < 0.75 < hi


def test_eval_cli_writes_json_and_markdown(tmp_path):
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_libero.cli import main

    out = tmp_path / "eval"
    rc = main(
        [
            "eval",
            "zero",
            "--tasks",
            "1",
            "--init-states",
            "0-1",
            "--max-steps",
            "5",
            "--workers",
            "0",
            "--video",
            "1:1",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    report = json.loads((out / "result.json").read_text())
    assert report["overall"]["episodes"] == 2 and report["overall"]["successes"] == 0
    assert report["versions"]["mujoco"] == "3.9.0" and report["versions"]["libero"] == "0.1.1"
    assert [e["init_state"] for e in report["episodes"]] == [0, 1]
    md = (out / "result.md").read_text()
    assert "| 1 | put both the cream cheese box and the butter in the basket | 0 | 2 | 0.0% |" in md
    import imageio.v2 as imageio

    frames = imageio.mimread(out / "task1_init1_failure.gif")
    assert len(frames) == 6 and frames[0].shape[:2] == (128, 128)  # reset frame + 5 steps

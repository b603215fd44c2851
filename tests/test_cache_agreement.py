"""``wmrl experiment cache-agreement``: replayed and fresh runs compared evaluation by evaluation."""

import json
from pathlib import Path

from experiments.compute_to_target import cache_agreement as ca


def _run(root: Path, name: str, scores: list[float], execution_s: float) -> None:
    d = root / "runs" / name
    d.mkdir(parents=True)
    with (d / "metrics.jsonl").open("w") as f:
        for step, score in enumerate(scores):
            f.write(json.dumps({"step": 4 * step, "eval/reward": score}) + "\n")
    summary = {"eval_last": {"eval/reward": scores[-1]}, "final": {"compute/execution_s": execution_s}}
    (d / "summary.json").write_text(json.dumps(summary))


def test_rows_pair_fresh_and_replayed_runs_and_show_differences(tmp_path, capsys):
    replayed, fresh = tmp_path / "replayed", tmp_path / "fresh"
    _run(replayed, "real-seed0", [0.3, 0.4], 100.0)
    _run(replayed, "real-seed1", [0.3, 0.5], 90.0)
    _run(fresh, "real-seed0", [0.3, 0.45], 120.0)  # one evaluation differs by 0.05
    _run(fresh, "wmrl-seed0", [0.3], 10.0)  # not replayed: no row
    rows = ca.compare(replayed, fresh)
    assert [(r["arm"], r["seed"]) for r in rows] == [("real", 0)]
    r = rows[0]
    assert r["fresh_final"] == 0.45 and r["replayed_final"] == 0.4 and r["n_seeds"] == 2
    assert abs(r["max_abs_difference"] - 0.05) < 1e-12 and r["same_steps"]
    assert abs(r["replayed_seeds"][0] - 0.45) < 1e-12
    table = ca.markdown(rows)
    assert "| real | 0 | 0.450 | 0.400 |" in table and "120 / 100 (+20%)" in table
    assert ca.main(["--replayed", str(replayed), "--fresh", str(fresh)]) == 0
    assert "| real | 0 |" in capsys.readouterr().out

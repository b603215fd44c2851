"""The LIBERO-Long transfer benchmark, every arm end to end in the real simulator (CI's short
version: one task, 2 steps of 2 groups of 2, 40-step episodes, real simulator workers).

The base policy and the world models are tiny and untrained (random weights, a dynamics
ensemble fitted to random states): this checks the plumbing of each arm (what is simulated,
what is imagined, what is charged, that the policy learns from what it is paid), not success."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from wmrl_libero.runtime import libero_available
from wmrl_libero.testing import build_tiny_transfer_checkpoints

from wmrl_core.testing import require

pytestmark = pytest.mark.slow

COMMAND = [sys.executable, "-m", "wmrl_core.cli", "experiment", "libero-transfer"]
ROOT = Path(__file__).resolve().parents[3]  # wmrl experiment finds the study in the checkout it runs in
TASK = 6  # LIBERO-10 task 6: the smallest object state (56), the fastest scene to build


def _tiny_checkpoints(tmp_path: Path) -> tuple[Path, Path]:
    return build_tiny_transfer_checkpoints(tmp_path, TASK)


def test_every_arm_runs_end_to_end_in_the_simulator(tmp_path):
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    base, wm = _tiny_checkpoints(tmp_path)
    args = [
        *("--quick", "--base", str(base), "--wm", str(wm), "--seeds", "0", "--tasks", str(TASK)),
        *("--train-init", "0", "--heldout-init", "40", "--workers", "1"),
        *("--out", str(tmp_path / "runs"), "--docs", str(tmp_path / "docs"), "--label", "ci"),
    ]
    start = time.perf_counter()
    proc = subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    first_s = time.perf_counter() - start
    report = json.loads((tmp_path / "docs" / "transfer.json").read_text())
    arms = report["arms"]
    assert list(arms) == ["base", "real", "world_model", "wmrl-imagination", "wmrl-progress", "noise_control"]
    for arm in arms.values():  # one rollout from each of one train and one held-out init state
        assert arm["train"]["episodes"] == arm["heldout"]["episodes"] == 1
    simulated = {name: arm["ledger"]["simulated_episodes"] for name, arm in arms.items()}
    # 2 steps x 2 groups x 2: real and progress simulate every group; imagination one anchor group a step
    assert simulated == {
        "base": 0,
        "real": 8,
        "world_model": 0,
        "wmrl-imagination": 4,
        "wmrl-progress": 8,
        "noise_control": 0,
    }
    assert arms["world_model"]["ledger"]["world_model_s"] > 0 and arms["real"]["ledger"]["world_model_s"] == 0
    assert arms["wmrl-progress"]["ledger"]["world_model_s"] > 0

    # imagined rollouts carry log-probs: the world_model arm (no simulator) moved the policy. (With
    # untrained policies and 40-step episodes the sparse success is always 0, so the arms that train
    # on it have no advantage to follow: that they do not move is expected here.)
    base_state = torch.load(base, weights_only=False)["state_dict"]
    trained = torch.load(tmp_path / "runs" / "world_model-seed0" / "checkpoints" / "last.pt", weights_only=False)
    assert any(not torch.equal(v, base_state[k.removeprefix("model.")]) for k, v in trained["policy"].items())
    # the control imagined its episodes (so the policy moved) but trained on noise scores
    control = torch.load(tmp_path / "runs" / "noise_control-seed0" / "checkpoints" / "last.pt", weights_only=False)
    assert control["world_model"]["calls"] == 2  # one batch of predictions per step
    assert any(not torch.equal(v, base_state[k.removeprefix("model.")]) for k, v in control["policy"].items())
    # the progress arm read executed trajectories: its world-model rewards exist
    records = [json.loads(line) for line in (tmp_path / "runs" / "wmrl-progress-seed0" / "metrics.jsonl").open()]
    assert all(r["reward/world_model_mean"] is not None for r in records if r["step"] > 0)
    assert (tmp_path / "docs" / "transfer.png").stat().st_size > 0
    assert (tmp_path / "docs" / "transfer_minus_control.png").stat().st_size > 0
    table = (tmp_path / "docs" / "transfer.md").read_text()
    assert "# LIBERO-Long transfer (CI)" in table  # the label is said in the title
    # the WMRL arms report what the world model was worth on their anchors; the others do not
    assert set(arms["wmrl-imagination"]["anchors"]) == {
        *("anchor_auroc", "anchor_pairs", "overprediction", "lambda_late", "mixed_groups", "anchor_groups")
    }
    # the arms scored by a world model report its score over training (exploitation would raise it)
    assert (
        set(arms["world_model"]["score_trend"]) == {"first_half", "second_half", "per_seed"}
        and arms["real"]["score_trend"] == {}
    )
    assert "## Analysis" in table and "`wmrl-imagination`'s world model on its anchors" in table
    assert arms["real"]["anchors"] == {} and "| anchor AUROC within group |" in table
    assert "| minus control |" in table and arms["real"]["heldout_minus_control"]["per_seed"] != []
    assert arms["real"]["train_minus_control"]["per_seed"] != []
    # one row per arm, as many cells as the header
    header, *rows = [line for line in table.splitlines() if line.startswith("|") and not line.startswith("|---")]
    assert len(rows) == len(arms) and {row.count("|") for row in rows} == {header.count("|")}

    # resumable: a second invocation trains and simulates nothing again
    start = time.perf_counter()
    again = subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "docs" / "transfer.json").read_text())["arms"] == arms
    assert time.perf_counter() - start < first_s

"""Two CPU processes under ``accelerate launch``: every rank must draw the same anchors and hold
the same calibrator and fuser state, with nothing broadcast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_two_ranks_agree(tiny_qwen2, tmp_path):
    script = Path(__file__).with_name("two_ranks.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parent)}
    # `--cpu` makes accelerate's launcher start a single process; `--multi_gpu` starts torchrun's
    # workers, and the script's `use_cpu=True` gives them the gloo backend on the CPU
    cmd = [
        *(sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"),
        *("--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"),
        *(str(script), str(tiny_qwen2), str(tmp_path)),
    ]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as exc:
        written = sorted(p.name for p in tmp_path.glob("rank*.json"))
        tail = exc.stderr or b""  # bytes even with text=True
        tail = (tail.decode(errors="replace") if isinstance(tail, bytes) else tail)[-3000:]
        pytest.fail(f"the two ranks did not exit within 600 s; rank files written: {written}\n{tail}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    a, b = ranks
    assert len(a["steps"]) == len(b["steps"]) == 8
    for sa, sb in zip(a["steps"], b["steps"], strict=True):
        for key in ("step", "anchor_groups", "wm_rewards", "real_rewards", "advantages", "record", "engine_state"):
            assert sa[key] == sb[key], key
    # each rank executed only its own anchor rows: together two groups of 4 a step, none twice; the
    # seed-0 draw puts anchors on both ranks
    assert a["executed_here"] + b["executed_here"] == 8 * 8
    assert a["executed_here"] > 0 and b["executed_here"] > 0
    # the default fusion's gate read every anchor group, identically on both ranks
    assert a["steps"][-1]["record"]["fusion/gate_groups"] == 8 * 2

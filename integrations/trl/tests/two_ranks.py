"""Run by ``accelerate launch --multi_gpu --num_processes 2`` (gloo on the CPU): a few WMRL steps in TRL on two ranks;
each rank writes what it saw (anchors, rewards, advantages, the engine's record and state) so the
test can check that the ranks agree without having communicated any of it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, float) and obj != obj:
        return "nan"
    return obj


def main(model_dir: str, out_dir: str) -> None:
    from wmrl_trl import WMRLGRPOTrainer
    from wmrl_trl.testing import tiny_grpo_config

    from wmrl_core.vowels import vowels_config

    args = tiny_grpo_config(out_dir, max_steps=8, save_strategy="no")
    trainer = WMRLGRPOTrainer.from_config(
        vowels_config(), model=model_dir, args=args, render=lambda t: t.description, keep_history=True
    )
    trainer.train()
    rank = trainer.accelerator.process_index
    steps = [{**s, "engine_state": None} for s in trainer.wmrl_history]
    steps[-1]["engine_state"] = trainer.wmrl_state_dict()
    record = {"rank": rank, "executed_here": trainer.environment.executed, "steps": steps}
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(_plain(record), default=str))
    # tear the gloo process group down before the interpreter exits: left to exit-time destructors,
    # its threads can abort a rank ("terminate called without an active exception") after it finished
    trainer.accelerator.end_training()
    # and skip the interpreter's teardown: freeing the DDP-wrapped model there destroys the gloo
    # group with the GIL held and joins its worker threads, while one of them may still wait for the
    # GIL to release a finished collective's tensors; 3 of 36 exits on a 2-core machine hung forever
    # (seen under gdb with torch 2.13; pytorch/pytorch#56297 and #190489 describe the class of bug)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

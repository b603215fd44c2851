"""Exploratory sizing (not evidence): success of the shipped small VLA sampled at its behaviour-cloning
sigma and at ``k`` times it, on the training init states of some LIBERO-10 tasks, with the CPU each
episode costs. Sizes the positive control of ``PREREGISTRATION_POSITIVE_CONTROL.md``.

    python experiments/libero_grpo/pilot_sigma.py --tasks 4,6 --inits 0-39:4 --scales 1,3 --out runs/libero_pilot_sigma.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from wmrl_libero.environment import LiberoEnvironment
from wmrl_libero.policies.small_vla import SmallVLAPolicy

CHECKPOINT = "plugins/libero/checkpoints/small_vla_dagger_t0-9_h1024.pt"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="4,6")
    ap.add_argument("--inits", default="0-39:4", help="start-stop:stride of training init states")
    ap.add_argument("--scales", default="1,3")
    ap.add_argument("--seed", type=int, default=9100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="runs/libero_pilot_sigma.json")
    args = ap.parse_args()
    tasks_idx = [int(t) for t in args.tasks.split(",")]
    span, stride = args.inits.split(":")
    lo, hi = (int(v) for v in span.split("-"))
    inits = set(range(lo, hi + 1, int(stride)))
    env = LiberoEnvironment(task_indices=tasks_idx, num_workers=args.workers, trajectory_states=0)
    tasks = [t for t in env.tasks("train") if t.data["init_state"] in inits]
    result = {}
    try:
        for scale in (float(s) for s in args.scales.split(",")):
            torch.manual_seed(args.seed)
            policy = SmallVLAPolicy(env, checkpoint=CHECKPOINT, sigma_scale=scale, probe_size=0)
            rollouts = policy.generate(tasks, 1)
            start = time.time()
            outcomes = env.execute(rollouts.tasks, rollouts.solutions)
            wall = time.time() - start
            scores = np.array([o.score for o in outcomes])
            cost = [o.info.get("cost_s", float("nan")) for o in outcomes]
            per_task = {
                str(i): float(np.mean([s for s, t in zip(scores, rollouts.tasks) if t.data["task_index"] == i]))
                for i in tasks_idx
            }
            result[str(scale)] = {
                "episodes": len(scores),
                "success": float(scores.mean()),
                "per_task": per_task,
                "cpu_s_per_episode": float(np.nanmean(cost)),
                "wall_s": wall,
                "sigma": policy._sigma().tolist(),
            }
            print(scale, json.dumps(result[str(scale)]), flush=True)
    finally:
        env.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

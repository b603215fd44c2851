"""Offline choice of the small VLA's behaviour-cloning recipe: held-out demo episodes, no simulator.

Whole episodes from a few training init states (``--val-init``, default 7, 15, 23, 31, 39;
their noisy repeats and DAgger episodes too) are kept out of training; every recipe is fit
on the rest and scored by the mean squared error of its deterministic 4-action chunk
against the expert's labels on the clean demos of the held-out episodes, per task
(:func:`~wmrl_libero.policies.behaviour_cloning.chunk_action_error`), every
``--every`` steps. One JSON line per recipe goes to ``--out`` (a rerun skips recipes
already there), with the training CPU seconds. Recipes are JSON objects: ``name``,
``steps`` and any of ``lr``, ``warmup``, ``final`` (final learning-rate fraction; 1 is a
constant rate), ``wd``, ``noise``, ``chunk``, ``hidden``, ``batch``, ``task9`` (false drops
task 9).

    wmrl experiment libero-bc-recipe --demos demos_{a,b,c,d,e,f}.hdf5 demos_task9.hdf5 \\
        --dagger dagger/data/iter_01.hdf5 dagger_full/data/iter_01.hdf5 --out runs/bc/sweep.jsonl \\
        '{"name":"const","steps":8000}' '{"name":"cos","steps":8000,"warmup":200,"final":0}'
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from wmrl_libero.demos import load_demonstrations
from wmrl_libero.policies.behaviour_cloning import (
    chunk_action_error,
    chunk_samples,
    fit_feature_scaling,
    fit_small_vla,
    split_by_init_state,
)
from wmrl_libero.policies.small_vla import SmallVLA

from wmrl_core.experiments.report import parse_int_ranges


def run_recipe(recipe: dict, demos: list[dict], val_init: list[int], every: int) -> dict:
    chunk = recipe.get("chunk", 4)
    data = [d for d in demos if recipe.get("task9", True) or d["task_index"] != 9]
    train, val = split_by_init_state(data, val_init)
    val = [d for d in val if not d.get("dagger")]  # the expert's own demos only
    tr, va = chunk_samples(train, chunk, 128), chunk_samples(val, chunk, 128)
    task_of = {d["language_instruction"]: d["task_index"] for d in data}
    torch.manual_seed(recipe.get("seed", 0))
    model = SmallVLA(chunk=chunk, object_dim=128, hidden=recipe.get("hidden", 512))
    fit_feature_scaling(model, tr)
    curve, started = [], time.process_time()

    def score(step: int, m: SmallVLA) -> None:
        err = {task_of[k]: v for k, v in chunk_action_error(m, va, horizon=4).items()}
        curve.append(dict(step=step, val_mse=sum(err.values()) / len(err), per_task=dict(sorted(err.items()))))
        curve[-1]["cpu_s"] = round(time.process_time() - started, 1)
        print(recipe["name"], json.dumps({k: v for k, v in curve[-1].items() if k != "per_task"}), flush=True)
        m.train()

    fit_small_vla(
        model,
        tr,
        iterations=recipe["steps"],
        batch_size=recipe.get("batch", 256),
        lr=recipe.get("lr", 1e-3),
        weight_decay=recipe.get("wd", 0.0),
        warmup=recipe.get("warmup", 0),
        final_lr_fraction=recipe.get("final", 1.0),
        obs_noise=recipe.get("noise", 0.0),
        seed=recipe.get("seed", 0),
        callback=score,
        callback_every=every,
        log=lambda *_: None,
    )
    return dict(recipe, train_samples=len(tr), val_samples=len(va), curve=curve)


def main(argv: list[str] | None = None, prog: str = "wmrl experiment libero-bc-recipe") -> int:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("recipes", nargs="+", help="JSON objects, one per recipe")
    parser.add_argument("--demos", nargs="+", required=True, help="expert demos (record-demos HDF5 files)")
    parser.add_argument("--dagger", nargs="*", default=[], help="DAgger data files (trained on, never scored)")
    parser.add_argument(
        "--val-init", default="7,15,23,31,39", help="init states whose episodes are held out (list or ranges)"
    )
    parser.add_argument("--every", type=int, default=2000, help="score the held-out episodes every N steps")
    parser.add_argument("--out", default="runs/bc/sweep.jsonl")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    done = {json.loads(line)["name"] for line in out.read_text().splitlines()} if out.exists() else set()
    demos = [d for f in args.demos for d in load_demonstrations(f)]
    demos += [dict(d, dagger=True) for f in args.dagger for d in load_demonstrations(f)]
    for recipe in map(json.loads, args.recipes):
        if recipe["name"] in done:
            continue
        record = run_recipe(recipe, demos, parse_int_ranges(args.val_init), args.every)
        with open(out, "a") as f:
            f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

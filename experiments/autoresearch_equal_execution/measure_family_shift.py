"""The world model's shift from W to R, before any training (the table of PREREGISTRATION.md).

Fits the shipped outcome model's settings on W's executions of the shipped corpus only, then reports
the within-task Spearman (95 % t-interval over tasks), the mean bias and the per-task level error:
in-sample on W, program-grouped 5-fold CV on W (a seen task, new programs) and on R (never seen).

    python experiments/autoresearch_equal_execution/measure_family_shift.py   # the chosen split
    python experiments/autoresearch_equal_execution/measure_family_shift.py --swap   # the other candidate
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats
from wmrl_autoresearch.program.corpus import load_corpus
from wmrl_autoresearch.program.cross_validation import corpus_arrays, program_folds, within_task_spearman
from wmrl_autoresearch.program.fitting import OUTCOME_SETTINGS, checked_training_rows, training_features
from wmrl_autoresearch.program.outcome_model import OutcomeModel, design_matrix
from wmrl_autoresearch.tasks.families import WORLD_MODEL_FAMILIES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--swap", action="store_true", help="W and R exchanged (the other candidate split)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    features = training_features()
    rows = checked_training_rows(load_corpus(), features)
    a = corpus_arrays(rows, features)
    family = {r["task_id"]: r["family"] for r in rows}
    in_w = np.array([family[t] in WORLD_MODEL_FAMILIES for t in a["task_ids"]]) ^ args.swap

    x = design_matrix(a["features"], a["choices"])

    def fit(mask):
        model = OutcomeModel(**OUTCOME_SETTINGS, seed=args.seed)
        return model.fit(x[mask], a["reward"][mask], failed=a["failed"][mask], task_ids=a["task_ids"][mask])

    def predict(model, mask):
        return model.predict(x[mask], list(a["task_ids"][mask]))

    def report(name, mask, predicted):
        ids, real = a["task_ids"][mask], a["reward"][mask]
        rho = np.array(list(within_task_spearman(ids, predicted, real).values()))
        half = stats.t.ppf(0.975, len(rho) - 1) * rho.std(ddof=1) / np.sqrt(len(rho))
        level = np.mean([abs(predicted[ids == t].mean() - real[ids == t].mean()) for t in np.unique(ids)])
        print(
            f"{name:44} {len(rho):3d} tasks  Spearman {rho.mean():.3f} [{rho.mean() - half:.3f}, {rho.mean() + half:.3f}]"
            f"  bias {np.mean(predicted - real):+.3f}  per-task level error {level:.3f}  ({mask.sum()} executions)"
        )

    started = time.process_time()
    model = fit(in_w)
    print(f"W: {sorted({family[t] for t in a['task_ids'][in_w]})}; fit {time.process_time() - started:.0f} CPU-s")
    report("W in-sample (fitted rows)", in_w, predict(model, in_w))
    report("R out of family (never seen)", ~in_w, predict(model, ~in_w))
    folds = program_folds(a["choices"], 5, args.seed)
    out_of_fold = np.full(len(a["reward"]), np.nan)
    for k in range(5):
        out_of_fold[in_w & (folds == k)] = predict(fit(in_w & (folds != k)), in_w & (folds == k))
    report("W program-grouped 5-fold CV (new programs)", in_w, out_of_fold[in_w])


if __name__ == "__main__":
    main()

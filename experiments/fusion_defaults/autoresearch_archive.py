"""How much of AutoResearch's world-model ranking each calibrator keeps, replayed on the archive.

Every world-model arm-seed of ``experiments/autoresearch_equal_execution/archive`` logged its anchor
pairs (raw world-model score, real reward, step, group). Each calibrator is refitted online exactly as
the engine does (a step's scores calibrated with the map fitted on earlier steps, then the step's pairs
added), and on each step's anchor groups (a uniform sample of the step's groups) three things are read:

* **tied**: the share of groups whose raw scores differ but whose calibrated rewards are all equal
  (GRPO gets no advantage from them);
* **kept**: the within-group Spearman correlation of calibrated with raw scores (1: the ranking kept);
* **agreement**: the within-group Spearman correlation of calibrated scores with the real rewards, beside
  the raw scores' own (what calibration adds or loses of the ranking that matters).

    python -m experiments.fusion_defaults.autoresearch_archive --out docs/results/synthetic/fusion_defaults
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from wmrl_core.calibration import RewardCalibrator

ARCHIVE = Path("experiments/autoresearch_equal_execution/archive")
CALIBRATORS = {"isotonic": {}, "smoothed": {"slope": 0.01}, "ranked": {"slope": 0.5}}


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho; 0 when ``a`` (the calibrated side) is tied, as it then ranks nothing; NaN when ``b`` is."""
    if a.size < 2 or np.ptp(b) == 0:
        return math.nan
    if np.ptp(a) == 0:
        return 0.0
    return float(spearmanr(a, b).statistic)


def replay(pairs: list[dict[str, Any]], calibrator: str) -> dict[str, list[float]]:
    """Per anchor group of every step: tied (0/1), kept, agreement and raw agreement."""
    cal = RewardCalibrator(calibrator=calibrator, **CALIBRATORS[calibrator])
    out: dict[str, list[float]] = {"tied": [], "kept": [], "agreement": [], "raw_agreement": []}
    for record in pairs:
        raw, real = np.asarray(record["world_model"], float), np.asarray(record["real"], float)
        # records before groups were logged hold one anchor group a step (B = 10, anchors 0.1)
        groups = np.asarray(record.get("group", [0] * raw.size)) + record["step"] * 1000
        calibrated = cal.transform(raw, groups) if cal.n_pairs_ else raw.copy()
        for g in np.unique(groups):
            rows = (groups == g) & np.isfinite(raw) & np.isfinite(real)
            if rows.sum() < 2 or np.ptp(raw[rows]) == 0:
                continue
            out["tied"].append(float(np.ptp(calibrated[rows]) <= 1e-12))
            out["kept"].append(_spearman(calibrated[rows], raw[rows]))
            out["agreement"].append(_spearman(calibrated[rows], real[rows]))
            out["raw_agreement"].append(_spearman(raw[rows], real[rows]))
        cal.update(raw, real, groups)
    return out


def replay_archive(archive: Path = ARCHIVE) -> dict[str, dict[str, float]]:
    """Calibrator -> means over every anchor group of every world-model arm-seed (NaN correlations
    of groups with tied real rewards left out)."""
    runs = sorted(p for p in archive.glob("wmrl_*-seed*") if (p / "anchor_pairs.jsonl").is_file())
    result = {}
    for calibrator in CALIBRATORS:
        pooled: dict[str, list[float]] = {"tied": [], "kept": [], "agreement": [], "raw_agreement": []}
        for run in runs:
            pairs = [json.loads(line) for line in (run / "anchor_pairs.jsonl").read_text().splitlines() if line]
            for key, values in replay(pairs, calibrator).items():
                pooled[key] += values
        result[calibrator] = {k: float(np.nanmean(v)) for k, v in pooled.items()}
        result[calibrator]["groups"] = len(pooled["tied"])
        result[calibrator]["runs"] = len(runs)
    return result


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=ARCHIVE)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    result = replay_archive(args.archive)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "autoresearch_calibration.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

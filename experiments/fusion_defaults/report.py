"""The results page of the fusion-defaults study, rebuilt from its runs (``synthetic.py report``)."""

from __future__ import annotations

import json
import math
import platform
from pathlib import Path
from typing import Any

import numpy as np
from autoresearch_archive import replay_archive  # type: ignore[import-not-found]
from synthetic import (  # type: ignore[import-not-found]
    BENIGN_RATIO_FLOOR,
    CALIBRATORS,
    DECOY_TOLERANCE,
    FUSIONS,
    SCALES,
    WORLD_MODELS,
    benign_floor,
    decoy_floor,
    noise_floor,
)

from wmrl_core.experiments.stats import mean_t_interval

COMMANDS = """```
python -m experiments.fusion_defaults.synthetic calibration --runs runs/fusion_defaults
python -m experiments.fusion_defaults.synthetic floors --runs runs/fusion_defaults
python -m experiments.fusion_defaults.synthetic floors-bound --runs runs/fusion_defaults
python -m experiments.fusion_defaults.synthetic decoy-check --runs runs/fusion_defaults   # exploratory
python -m experiments.fusion_defaults.synthetic floors-v2 --runs runs/fusion_defaults
python -m experiments.fusion_defaults.synthetic benign-v2 --runs runs/fusion_defaults
python -m experiments.fusion_defaults.synthetic report --runs runs/fusion_defaults --out docs/results/synthetic/fusion_defaults
python -m experiments.fusion_defaults.synthetic report --from-archive --out docs/results/synthetic/fusion_defaults  # from runs.json.gz
```"""


def _ci(values: list[float], digits: int = 3) -> str:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return "-"
    mean, half = mean_t_interval(values)
    return f"{mean:.{digits}f} ± {half:.{digits}f}" if len(values) > 1 else f"{mean:.{digits}f}"


def _mean(values: list[float]) -> float:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(values)) if values else math.nan


def calibration_choice(results: dict[str, Any]) -> tuple[str, str, list[str]]:
    """The pre-registered decision rule (PREREGISTRATION.md, Part 1): the chosen (calibrator, scale) and
    one line per candidate."""
    lines, eligible = [], []
    order = {c: i for i, c in enumerate(CALIBRATORS)} | {s: i for i, s in enumerate(SCALES)}
    for calibrator in CALIBRATORS:
        for scale in SCALES:
            key = f"mse_weighted-{calibrator}-{scale}"
            noise = [r["mean_weight"] for r in results.get(f"noise-{key}", {}).values()]
            tied = _mean([r["tied_group_share"] for r in results.get(f"benign-{key}", {}).values()])
            benign = _mean([r["final"] for r in results.get(f"benign-{key}", {}).values()])
            decoy = _mean([r["final"] for r in results.get(f"decoy-{key}", {}).values()])
            ok = bool(noise) and max(noise) <= 0.05 and tied < 0.05
            score = (benign + decoy) / 2
            lines.append(
                f"| `{calibrator}` | `{scale}` | {max(noise) if noise else math.nan:.3f} | {tied:.1%} | "
                f"{benign:.4f} | {decoy:.4f} | {score:.4f} | {'yes' if ok else 'no'} |"
            )
            if ok and math.isfinite(score):
                eligible.append((score, calibrator, scale))
    if not eligible:
        return "isotonic", "own", lines
    best = max(s for s, _, _ in eligible)
    near = sorted((order[c], order[s], c, s) for score, c, s in eligible if score >= best - 0.002)
    return near[0][2], near[0][3], lines


def calibration_section(results: dict[str, Any], archive: dict[str, Any]) -> list[str]:
    out = [
        "## Part 1: which calibration (seeds 100-105)",
        "",
        "Final true reward (mean of the last two evaluations; 6 seeds, 95% t), the share of non-anchor groups whose "
        "calibrated rewards are all tied (no advantage at all), and the world model's mean weight.",
        "",
        "| world model | fusion | calibrator | advantage scale | final true reward | tied groups | mean weight |",
        "|---|---|---|---|---|---|---|",
    ]
    for wm in WORLD_MODELS:
        for fusion in FUSIONS:
            for calibrator in CALIBRATORS:
                for scale in SCALES:
                    runs = results.get(f"{wm}-{fusion}-{calibrator}-{scale}", {}).values()
                    final = _ci([r["final"] for r in runs]) if wm != "noise" else "(not evaluated)"
                    out.append(
                        f"| {wm} | `{fusion}` | `{calibrator}` | `{scale}` | {final} | "
                        f"{_mean([r['tied_group_share'] for r in runs]):.1%} | "
                        f"{_ci([r['mean_weight'] for r in runs])} |"
                    )
    calibrator, scale, lines = calibration_choice(results)
    out += [
        "",
        "**The pre-registered rule** (among `mse_weighted`'s six: noise weight ≤ 0.05 on every seed and benign ties "
        "below 5%, then the best mean of benign and decoy final reward, ties within 0.002 to the simpler):",
        "",
        "| calibrator | scale | noise: worst run's mean weight | benign tied groups | benign final | decoy final "
        "| mean | eligible |",
        "|---|---|---|---|---|---|---|---|",
        *lines,
        "",
        f"**Chosen: `calibration.calibrator={calibrator}`, `calibration.advantage_scale={scale}`.**",
        "",
        "**AutoResearch, replayed** (`autoresearch_archive.py`: each calibrator refitted step by step on the anchor "
        f"pairs logged by the {archive['isotonic']['runs']} world-model arm-seeds of the equal-execution archive, "
        f"{archive['isotonic']['groups']} anchor groups of 4). *Tied*: groups whose raw scores differ and whose "
        "calibrated rewards are all equal; *kept*: within-group Spearman of calibrated with raw scores (a tied group "
        "counts 0); *agreement*: within-group Spearman with the real rewards (raw scores: "
        f"{archive['isotonic']['raw_agreement']:.3f}).",
        "",
        "| calibrator | tied groups | ranking kept | agreement with real |",
        "|---|---|---|---|",
    ]
    for name, row in archive.items():
        out.append(f"| `{name}` | {row['tied']:.1%} | {row['kept']:.3f} | {row['agreement']:.3f} |")
    out += [
        "",
        "A user's domain, added afterwards and not pre-registered: [the calibrators on the README's digit "
        "plugin](user_domain.md).",
    ]
    return out


def _seed_range(by_seed: dict[int, Any]) -> str:
    seeds = sorted(by_seed)
    return f"{seeds[0]}-{seeds[-1]}" if seeds else "none"


def decoy_table(decoy: dict[str, Any]) -> list[str]:
    """Per seed: `real`'s final, the default's and their difference."""
    rows = decoy["per_seed"]
    return [
        "| seed | " + " | ".join(str(s) for s in rows) + " |",
        "|---|" + "---|" * len(rows),
        "| `real` | " + " | ".join(f"{r['real']:.3f}" for r in rows.values()) + " |",
        "| default | " + " | ".join(f"{r['default']:.3f}" for r in rows.values()) + " |",
        "| difference | " + " | ".join(f"{r['default'] - r['real']:+.3f}" for r in rows.values()) + " |",
    ]


def extra_decoy(results: dict[str, Any]) -> dict[str, Any]:
    """Part 4's registered extra decoy seeds (arms ``decoy_extra-*``) read as a decoy floor."""
    return decoy_floor({f"decoy-{arm}": results.get(f"decoy_extra-{arm}", {}) for arm in ("real", "default")})


def floors_section(
    results: dict[str, Any], title: str = "## Part 2: the floors of the default (fresh seeds)"
) -> list[str]:
    noise, decoy, benign = noise_floor(results), decoy_floor(results), benign_floor(results)
    out = [
        title,
        "",
        f"**1. Pure-noise world model** (seeds {_seed_range(results.get('noise-f0.05', {}))}, 30 steps): weight > 0.1 "
        "on at most 5% of steps and no run's mean weight above 0.05.",
        "",
        "| anchors a step | runs | steps | steps > 0.1 | max weight | worst run's mean | runs whose gate opened | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, s in noise.items():
        out.append(
            f"| {label} | {s['runs']} | {s['steps']} | {s['share_above']:.1%} | {s['max_weight']:.3f} | "
            f"{s['worst_run_mean']:.3f} ({s['worst_run']}) | {s['gate_opened']} | {'yes' if s['met'] else '**no**'} |"
        )
    out += [
        "",
        f"**2. Confident decoy** (seeds {_seed_range(results.get('decoy-real', {}))}): the default (120 steps) ends at least `real`'s final (60 steps) "
        f"minus {DECOY_TOLERANCE} on every seed: **{'met' if decoy['met'] else 'not met'}**.",
        "",
        *decoy_table(decoy),
        "",
        f"**3. Benign miscalibrated world model** (seeds {_seed_range(results.get('benign-real', {}))}, paired): compute to 95% of the seed's `real` "
        f"final, default / `inverse_variance`; met if the interval's upper bound is ≤ {BENIGN_RATIO_FLOOR}: "
        f"**{'met' if benign['met'] else 'not met'}** (mean {benign['mean']:.3f} ± {benign['half_width']:.3f}, "
        f"upper bound {benign['upper']:.3f}).",
        "",
        "| seed | target | `inverse_variance`, s | default, s | ratio |",
        "|---|---|---|---|---|",
    ]
    for seed, r in benign["per_seed"].items():
        out.append(
            f"| {seed} | {r['target']:.3f} | {r['inverse_variance_s'] or 'never'} | {r['default_s'] or 'never'} | "
            f"{r['ratio']:.3f} |"
        )
    return out


def plot(floor_results: dict[str, Any], path: Path) -> None:
    """True reward against charged compute on the decoy and benign floors, mean ± 95% t over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for ax, group in zip(axes, ("benign", "decoy")):
        for arm in (a for a in floor_results if a.startswith(f"{group}-")):
            curves = [r["curve"] for r in floor_results[arm].values()]
            n = min(len(c) for c in curves)
            x = np.mean([[p[0] for p in c[:n]] for c in curves], axis=0)
            ys = np.array([[p[1] for p in c[:n]] for c in curves])
            half = np.array([mean_t_interval(list(col))[1] for col in ys.T])
            ax.plot(x, ys.mean(axis=0), label=arm.removeprefix(f"{group}-"))
            ax.fill_between(x, ys.mean(axis=0) - half, ys.mean(axis=0) + half, alpha=0.2)
        ax.set_xscale("log")
        ax.set_xlabel("charged compute, s (log)")
        ax.set_ylabel("true reward (held-out sampling)")
        ax.set_title(f"{group} world model, {len(curves)} seeds, 95% t band")
        ax.legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def floor_lines(noise: dict[str, Any], decoy: dict[str, Any], benign: dict[str, Any]) -> list[str]:
    """One line per registered floor: the noise world model's at each anchor rate, the decoy's, the benign's."""
    lines = [
        f"- Noise world model, {label} a step: {'met' if row['met'] else '**not met**'} (steps above 0.1: "
        f"{row['share_above']:.1%}; worst run's mean weight {row['worst_run_mean']:.3f}; gates opened "
        f"{row['gate_opened']} of {row['runs']})."
        for label, row in noise.items()
    ]
    return lines + [
        f"- Confident decoy reaches `real`'s final on every seed: {'met' if decoy['met'] else '**not met**'}.",
        f"- Benign world model, compute to target / `inverse_variance`: {benign['mean']:.3f} ± "
        f"{benign['half_width']:.3f}, upper bound {benign['upper']:.3f}: {'met' if benign['met'] else '**not met**'}.",
    ]


def verdicts(calibration: dict[str, Any], floor_results: dict[str, Any]) -> list[str]:
    """The pre-registered readings first, one line each."""
    calibrator, scale, _ = calibration_choice(calibration)
    noise, decoy, benign = noise_floor(floor_results), decoy_floor(floor_results), benign_floor(floor_results)
    lines = ["## Verdicts (pre-registered)", "", f"- Calibration default: `{calibrator}`, advantage scale `{scale}`."]
    lines += floor_lines(noise, decoy, benign)
    if not all(row["met"] for row in noise.values()):
        lines += [
            "",
            "**Why a noise floor can fail.** The gate bounds the share of runs that ever give a useless world "
            "model weight (5% a run), not the weight after a false opening: once open, the weight is "
            "`min(w_IV, w_MSE)`, and on the run that opened by chance the same chance correlation makes "
            "`w_IV` large (19 world-model groups for each anchor group). With 20 runs a floor of *no* run's "
            "mean above 0.05 then fails whenever one or two gates open early, which a 5% level allows. A "
            "candidate fix tried after these results on development seeds 0-19 and 0-5 (the weight read only "
            "from anchor groups after the opening, and ρ̂² minus its expectation under independence) still "
            "left one of 20 runs at 0.074 and slowed the benign world model (ratio 1.06, upper bound 1.20): "
            "not adopted. The levers left are a smaller level (slower opening everywhere), more anchor "
            "groups a step, which meets the floor here (2 groups: no gate opened), and the weight's ρ² read at "
            "a lower confidence bound, registered and tested as Part 3 below.",
        ]
    return lines


def part_verdicts(results: dict[str, Any], heading: str, adopted: str, kept: str) -> list[str]:
    """A later part's readings (Parts 3 and 4) and what its pre-registered rule decides: ``adopted`` if
    every floor is met, else ``kept``."""
    if not results:
        return []
    noise, decoy, benign = noise_floor(results), decoy_floor(results), benign_floor(results)
    met = all(row["met"] for row in noise.values()) and decoy["met"] and benign["met"]
    lines = ["", f"**{heading}** (fresh seeds):", ""]
    lines += floor_lines(noise, decoy, benign)
    extra = extra_decoy(results)
    if extra["seeds"]:
        fooled = [s for s, r in extra["per_seed"].items() if r["default"] < r["real"] - DECOY_TOLERANCE]
        lines.append(
            f"- Registered beside the floor, not deciding: the decoy criterion on {extra['seeds']} more seeds: "
            f"{'met on every one' if extra['met'] else 'fails on ' + ', '.join(map(str, fooled))}."
        )
    lines.append("")
    if not any(row["gate_opened"] for row in noise.values()):
        lines += [
            "No gate opened on this part's noise runs, so its noise rows do not exercise the bound (only a "
            "false opening does; the development note of the pre-registration replays Part 2's two).",
            "",
        ]
    lines.append("By the rule registered before these seeds: " + (adopted if met else kept))
    return lines


def decoy_check_section(check: dict[str, Any], bound: dict[str, Any]) -> list[str]:
    """The exploratory check that followed Part 3: the shipped default on Part 3's decoy seeds."""
    if not check:
        return []
    shipped, bounded = decoy_floor(check), decoy_floor(bound)
    seeds = list(shipped["per_seed"])
    return [
        "## Exploratory, after Part 3: the shipped default on Part 3's decoy seeds",
        "",
        "Not pre-registered; run after Part 3's decoy floor failed, to see whether the bound or the default "
        "itself fails there (`synthetic.py decoy-check`). Final true reward, seeds "
        f"{_seed_range(check.get('decoy-real', {}))}; the shipped default reaches `real`'s final minus "
        f"{DECOY_TOLERANCE} on every seed: **{'yes' if shipped['met'] else 'no'}**.",
        "",
        "| seed | " + " | ".join(str(s) for s in seeds) + " |",
        "|---|" + "---|" * len(seeds),
        "| `real` | " + " | ".join(f"{shipped['per_seed'][s]['real']:.3f}" for s in seeds) + " |",
        "| default (point estimate) | " + " | ".join(f"{shipped['per_seed'][s]['default']:.3f}" for s in seeds) + " |",
        "| default, `rho2_quantile=0.05` | "
        + " | ".join(f"{bounded['per_seed'][s]['default']:.3f}" if s in bounded["per_seed"] else "-" for s in seeds)
        + " |",
    ]


def v2_section(v2: dict[str, Any]) -> list[str]:
    """Part 4's floors, and its registered extra decoy seeds."""
    extra = extra_decoy(v2)
    return [
        *floors_section(
            v2,
            "## Part 4: the floors with a steadier bias estimate (window 60, horizon 20) and the ρ² bound (fresh seeds)",
        ),
        "",
        f"**Registered beside the floor, not deciding:** the decoy criterion on seeds "
        f"{_seed_range(extra['per_seed'])}: **{'met' if extra['met'] else 'not met'}**.",
        "",
        *decoy_table(extra),
    ]


def benign_v2_section(benign_v2: dict[str, Any], v2: dict[str, Any]) -> list[str]:
    """Part 5: Part 4's benign floor on thirty fresh seeds, its rule, and the forty seeds together."""
    floor = benign_floor(benign_v2)
    both = benign_floor({arm: {**v2.get(arm, {}), **benign_v2.get(arm, {})} for arm in benign_v2})
    return [
        "## Part 5: Part 4's benign floor with thirty seeds",
        "",
        f"**Part 5**, Part 4's benign floor on seeds {_seed_range(floor['per_seed'])}, paired: compute to 95% of the "
        f"seed's `real` final, default with Part 4's settings / `inverse_variance`: mean {floor['mean']:.3f} ± "
        f"{floor['half_width']:.3f}, upper bound {floor['upper']:.3f}: **{'met' if floor['met'] else 'not met'}**. "
        f"Parts 4 and 5 together ({len(both['per_seed'])} seeds, not deciding): {both['mean']:.3f} ± "
        f"{both['half_width']:.3f}, upper bound {both['upper']:.3f}.",
        "",
        "By the rule registered before these seeds: "
        + (
            "the upper bound is at most 1.10, so Part 4's three settings are `mse_weighted`'s defaults from now on."
            if floor["met"]
            else "the upper bound is above 1.10, so the defaults stay as they were."
        ),
        "",
        "| seed | target | `inverse_variance`, s | default, s | ratio |",
        "|---|---|---|---|---|",
        *(
            f"| {seed} | {r['target']:.3f} | {r['inverse_variance_s'] or 'never'} | {r['default_s'] or 'never'} | "
            f"{r['ratio']:.3f} |"
            for seed, r in floor["per_seed"].items()
        ),
    ]


LIMITS = [
    "- The synthetic bandit is tabular with a declared cost; the AutoResearch test of the same defaults is a "
    "separate pre-registered run (`docs/results/autoresearch/fusion_defaults/`).",
    "- The default's settings (gate level, tilts, bias horizon) were chosen on synthetic seeds 0-5; the floors "
    "use fresh seeds, the calibration choice seeds 100-105.",
    "- The calibration choice rests on two synthetic world models and a replay; on the synthetic bandit the "
    "step function (`isotonic`) ended highest under `mse_weighted` although it ties 17% of groups; the rule "
    "written beforehand excluded it for those ties, and on AutoResearch it erases the ranking of 42% of "
    "anchor groups.",
    "- The decoy floor holds on Part 2's ten seeds and fails on one of Part 3's ten (seed 2103, under either "
    "setting of the weight: the gate opened at step 1 and the default ended 0.02 below `real`): ten seeds do "
    "not bound how often a confident decoy fools the default, only that it can. Part 4's steadier bias "
    "estimate held on all twenty of its decoy seeds (and the twenty development seeds); its benign cost "
    "was read twice, over ten seeds (failed) and thirty (met), and the forty together put it within a few "
    "percent of `inverse_variance`, not shown faster. The adopted defaults were chosen over five parts on this "
    "one bandit; the AutoResearch addition is their test on another domain.",
    "- Final rewards are at 60 steps (part 1) and 120 steps (the decoy and benign floors); nothing here "
    "measures a world model that drifts during a run.",
]
"""The page's "What this does not show" bullets."""


def _floor_summary(prefix: str, results: dict[str, Any]) -> dict[str, Any]:
    """The three floors' readings under ``{prefix}noise_floor`` and so on."""
    return {
        f"{prefix}noise_floor": noise_floor(results),
        f"{prefix}decoy_floor": decoy_floor(results),
        f"{prefix}benign_floor": benign_floor(results),
    }


def write_report(
    calibration: dict[str, Any],
    floor_results: dict[str, Any],
    out: Path,
    bound: dict[str, Any] | None = None,
    decoy_check: dict[str, Any] | None = None,
    v2: dict[str, Any] | None = None,
    benign_v2: dict[str, Any] | None = None,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    archive = replay_archive()
    text = [
        "# The engine's defaults on the synthetic bandit: calibration and the default fusion's floors",
        "",
        "[Pre-registration](../../../../experiments/fusion_defaults/PREREGISTRATION.md), "
        f"committed before any of these runs. Machine: {platform.machine()}, 2 cores, CPU only; charged compute is "
        "declared per call, so it does not depend on the machine's load. Rebuilt from the runs by:",
        "",
        COMMANDS,
        "",
        *verdicts(calibration, floor_results),
        *part_verdicts(
            bound or {},
            "Part 3, `fusion.kwargs.rho2_quantile=0.05`",
            "all four floors met, so `rho2_quantile=0.05` is `mse_weighted`'s default from now on.",
            "a floor failed, so the default keeps the point estimate.",
        ),
        *part_verdicts(
            v2 or {},
            "Part 4, `fusion.kwargs.window=60`, `bias_horizon=20`, `rho2_quantile=0.05`",
            "all four floors met, so these three settings are `mse_weighted`'s defaults from now on.",
            "a floor failed, so the defaults stay as they were.",
        ),
        *(["", *benign_v2_section(benign_v2, v2 or {})[2:5]] if benign_v2 else []),
        "",
        *calibration_section(calibration, archive),
        "",
        *floors_section(floor_results),
        "",
        *(
            floors_section(
                bound, "## Part 3: the floors with the weight's ρ² at its bootstrap lower bound (fresh seeds)"
            )
            + [""]
            if bound
            else []
        ),
        *(decoy_check_section(decoy_check, bound or {}) + [""] if decoy_check else []),
        *(v2_section(v2) + [""] if v2 else []),
        *(benign_v2_section(benign_v2, v2 or {}) + [""] if benign_v2 else []),
        "![true reward against charged compute](floors.png)",
        "",
        "## What this does not show",
        "",
        *LIMITS,
    ]
    (out / "README.md").write_text("\n".join(text) + "\n")
    summary = {
        "calibration_choice": dict(zip(("calibrator", "advantage_scale"), calibration_choice(calibration)[:2])),
        "archive_replay": archive,
        **_floor_summary("", floor_results),
        **(_floor_summary("bound_", bound) if bound else {}),
        **({"benign_v2_floor": benign_floor(benign_v2)} if benign_v2 else {}),
        **({**_floor_summary("v2_", v2), "v2_decoy_extra": extra_decoy(v2)} if v2 else {}),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    if floor_results:
        plot(floor_results, out / "floors.png")
    print((out / "README.md").read_text())

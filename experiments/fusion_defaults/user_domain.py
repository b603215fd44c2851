"""The calibrators on a user's domain: the README's digit plugin, run as printed (its code block becomes
a package), under the default fusion with each calibrator. Not pre-registered: added after the
synthetic calibration choice, as the issue asks for a user domain beside the synthetic ones.

    python -m experiments.fusion_defaults.user_domain --runs runs/fusion_defaults_user \\
        --out docs/results/synthetic/fusion_defaults
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from wmrl_core.config import load_config
from wmrl_core.experiments.report import refuse_run_flags
from wmrl_core.experiments.stats import mean_t_interval
from wmrl_core.metrics import read_metrics
from wmrl_core.plugins import get_plugin_manager

ROOT = Path(__file__).resolve().parents[2]
SEEDS = list(range(200, 206))
CALIBRATORS = {"isotonic": [], "smoothed": [], "ranked": ["calibration.slope=0.5"]}
DOMAIN = ["environment.name=digit", "policy.name=digit-softmax", "world_model.name=digit-nearby"]


def readme_plugin() -> object:
    """The README's plugin module, imported from its code block."""
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme.split("## Writing a domain plugin", 1)[1], re.DOTALL)
    if code is None:
        raise SystemExit("README.md lost its plugin code block")
    package = Path(tempfile.mkdtemp()) / "my_domain"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(code.group(1))
    sys.path.insert(0, str(package.parent))
    return importlib.import_module("my_domain.plugin")


def run(runs: Path) -> dict[str, dict[int, dict[str, float]]]:
    from wmrl_core.trainer import train

    pm = get_plugin_manager(extra_plugins=[readme_plugin()])
    out: dict[str, dict[int, dict[str, float]]] = {}
    for seed in SEEDS:
        for name, extra in CALIBRATORS.items():
            run_dir = runs / f"{name}-seed{seed}"
            overrides = [
                *DOMAIN,
                *extra,
                f"calibration.calibrator={name}",
                f"seed={seed}",
                f"run_dir={run_dir}",
                "logging.progress=false",
                "logging.tensorboard=false",
                "checkpoint.every=0",
            ]
            if not (run_dir / "summary.json").is_file():
                train(
                    load_config(ROOT / "configs/synthetic/wmrl.yaml", overrides, plugin_manager=pm), plugin_manager=pm
                )
            records = read_metrics(run_dir)
            evals = [r["eval/reward"] for r in records if r.get("eval/reward") is not None]
            training = [r for r in records if r.get("fusion/w_world_model") is not None and r["step"] > 0]
            tied = [
                r["calibration/tied_group_share"] for r in training if r.get("calibration/tied_group_share") is not None
            ]
            out.setdefault(name, {})[seed] = {
                "final": float(np.mean(evals[-2:])),
                "tied": float(np.nanmean(tied)) if tied else math.nan,
                "weight": float(np.mean([r["fusion/w_world_model"] for r in training])),
            }
    return out


def markdown(results: dict[str, dict[int, dict[str, float]]]) -> str:
    def ci(values: list[float]) -> str:
        mean, half = mean_t_interval(values)
        return f"{mean:.3f} ± {half:.3f}"

    lines = [
        "# The calibrators on a user's domain (the README's digit plugin)",
        "",
        "Not pre-registered (added after the calibration choice). The README's plugin as printed: a softmax per task "
        "over 10 digits, a world model that scores a guess by its distance to the answer, real reward 1 for the exact "
        "digit; `configs/synthetic/wmrl.yaml` with the README's component names, the default fusion, seeds 200-205, "
        "60 steps. Command: `python -m experiments.fusion_defaults.user_domain --runs runs/fusion_defaults_user "
        "--out docs/results/synthetic/fusion_defaults`.",
        "",
        "| calibrator | final evaluated reward (6 seeds, 95% t) | tied groups | world model's mean weight |",
        "|---|---|---|---|",
    ]
    for name, by_seed in results.items():
        rows = list(by_seed.values())
        lines.append(
            f"| `{name}` | {ci([r['final'] for r in rows])} | {np.nanmean([r['tied'] for r in rows]):.1%} | "
            f"{ci([r['weight'] for r in rows])} |"
        )
    lines += ["", "Every seed (final evaluated reward):", "", "| calibrator | " + " | ".join(map(str, SEEDS)) + " |"]
    lines.append("|---|" + "---|" * len(SEEDS))
    for name, by_seed in results.items():
        lines.append(f"| `{name}` | " + " | ".join(f"{by_seed[s]['final']:.3f}" for s in SEEDS) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/fusion_defaults_user"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--from-json", type=Path, help="run nothing: rebuild the page from the user_domain.json a run wrote"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        refuse_run_flags(parser, args, keep=("from_json", "out"))
        stored = json.loads(args.from_json.read_text())
        results = {name: {int(seed): row for seed, row in by_seed.items()} for name, by_seed in stored.items()}
    else:
        results = run(args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "user_domain.md").write_text(markdown(results))
    (args.out / "user_domain.json").write_text(json.dumps(results, indent=1) + "\n")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

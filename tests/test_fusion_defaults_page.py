"""The fusion-defaults results page is what its archive rebuilds (experiments/fusion_defaults)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs/results/synthetic/fusion_defaults"


@pytest.mark.slow  # replays the AutoResearch archive's anchor pairs, about 7 s
def test_the_page_is_rebuilt_unchanged_from_its_archive(tmp_path):
    shutil.copy(PAGE / "runs.json.gz", tmp_path / "runs.json.gz")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.fusion_defaults.synthetic",
            "report",
            "--from-archive",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    assert (tmp_path / "README.md").read_text() == (PAGE / "README.md").read_text()


def test_part_4_changes_only_the_default_arms_and_runs_its_extra_decoy_seeds():
    from experiments.fusion_defaults.synthetic import V2, V2_DECOY_EXTRA, v2_plan

    plan = {group: (arms, seeds) for group, arms, seeds in v2_plan()}
    assert plan["decoy_extra"] == (plan["decoy"][0], V2_DECOY_EXTRA)
    for arms, _ in plan.values():
        for arm, overrides in arms.items():
            changed = arm.startswith("noise") or arm.endswith("-default")
            assert all(o in overrides for o in V2) == changed, arm
    seeds = [s for _, (_, group_seeds) in plan.items() for s in group_seeds]
    assert min(seeds) >= 1200 and len(set(seeds)) == len(seeds)  # past every earlier part's seeds, none twice

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

"""The LIBERO-Long transfer pages are what their committed archives rebuild, byte for byte
(``experiments/libero_transfer/archive``: the arm-seeds' files and the command that built the page;
nothing trained, simulated or configured)."""

import shutil
from pathlib import Path

import pytest

from experiments.libero_transfer import resolving, transfer

ROOT = Path(__file__).resolve().parents[3]
ARCHIVE = ROOT / "experiments/libero_transfer/archive"


@pytest.mark.slow  # reads 18 and 42 arm-seeds' metrics and draws the figures, a few seconds each
@pytest.mark.parametrize(
    "main, archive, page",
    [
        (transfer.main, "full", "docs/results/libero/transfer_full"),
        (resolving.main, "resolving", "docs/results/libero/transfer_resolving/transfer_resolving"),
    ],
)
def test_the_page_is_rebuilt_unchanged_from_its_archive(tmp_path, monkeypatch, capsys, main, archive, page):
    monkeypatch.chdir(ROOT)  # the recorded command's paths are the repository's
    shutil.copytree(ARCHIVE / archive, tmp_path / "archive")  # the archive alone: no run folder
    assert main(["--report-only", "--archive", str(tmp_path / "archive"), "--docs", str(tmp_path / "page")]) == 0
    name = Path(page).name
    for suffix in (".md", ".json"):
        rebuilt, committed = tmp_path / "page" / f"{name}{suffix}", ROOT / f"{page}{suffix}"
        assert rebuilt.read_bytes() == committed.read_bytes(), f"{committed} is not what its archive rebuilds"
    assert sorted(p.name for p in (tmp_path / "archive").rglob("*")) == sorted(
        p.name for p in (ARCHIVE / archive).rglob("*")
    ), "the rebuild wrote into the archive"

"""The AutoResearch studies' committed results pages, rebuilt into a temporary folder from what is
committed (an archive of arm-seeds, or the runs' record beside the page) by each study's page
builder: byte for byte what the repository holds. The equal-execution page, rebuilt from its archive,
is checked with every other page by ``tests/test_results_pages.py``."""

import shutil
from pathlib import Path

import pytest

from experiments.autoresearch_heldout_gain import page as heldout_gain_page
from experiments.autoresearch_lambda_estimates import page as lambda_estimates_page
from experiments.autoresearch_noise_control import page as noise_control_page

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs" / "results" / "autoresearch"


def _same(built: Path, committed: Path, names: list[str]) -> None:
    for name in names:
        assert (built / name).read_bytes() == (committed / name).read_bytes(), name


@pytest.mark.parametrize("page", [RESULTS, RESULTS / "heldout_gain_outcome_wm"], ids=["default", "outcome_wm"])
def test_heldout_gain_pages_are_rendered_from_their_records(page, tmp_path):
    assert heldout_gain_page.main(["--record", str(page / "heldout_gain.json"), "--out", str(tmp_path)]) == 0
    _same(tmp_path, page, ["heldout_gain_table.md", "heldout_gain.png"])


def test_noise_control_page_gets_its_table_and_plot_from_every_runs_record(tmp_path):
    committed = (RESULTS / "noise_control.md").read_text()
    header = next(line for line in committed.split("\n") if line.startswith("| lr | entropy_coef |"))
    emptied = noise_control_page.replace_table(committed, f"{header}\n|---|---|---|---|---|---|---|---|")
    assert emptied != committed  # the rows are gone: the builder must write them again
    (tmp_path / "noise_control.md").write_text(emptied)
    assert noise_control_page.main(["--record", str(RESULTS / "noise_control.json"), "--out", str(tmp_path)]) == 0
    _same(tmp_path, RESULTS, ["noise_control.md", "noise_control_entropy.png"])


def test_a_page_without_the_table_is_named():
    with pytest.raises(ValueError, match="no table that starts with '| lr |"):
        noise_control_page.replace_table("# a page\n\nno table\n", "| lr | x |\n|---|---|")


def test_lambda_estimates_page_is_rendered_from_its_record(tmp_path):
    committed = RESULTS / "lambda_estimates"
    shutil.copy2(committed / "lambda_estimates.json", tmp_path / "lambda_estimates.json")
    assert lambda_estimates_page.main(["--out", str(tmp_path)]) == 0
    _same(tmp_path, committed, ["lambda_estimates.md"])

"""Every results page is either rebuilt from what the repository holds by ``python -m experiments.pages``
or listed with the reason it cannot be; the rebuilt ones are byte for byte the committed ones."""

import pytest

from experiments import pages


def test_every_results_page_is_rebuilt_or_says_why_not():
    unlisted = sorted(pages.results_pages() - pages.listed_pages())
    assert not unlisted, f"add these pages to experiments/pages.py (PAGES or NOT_REBUILT): {unlisted}"
    assert all(why.strip() for why in pages.NOT_REBUILT.values())


@pytest.mark.slow  # every builder: the archives of 108 arm-seeds read, endpoints bootstrapped, figures drawn (~1 min)
def test_one_command_rebuilds_every_page_unchanged(capsys):
    assert pages.main(["--check"]) == 0, capsys.readouterr().err
    assert f"{len(pages.PAGES)} of {len(pages.PAGES)} pages rebuilt unchanged" in capsys.readouterr().out


def test_no_page_says_its_runs_were_not_kept():
    """Every page with figures is rebuilt; the note that once marked pages without a record is gone."""
    marked = [
        name for name in pages.results_pages() if "Not rebuilt from an archive" in (pages.RESULTS / name).read_text()
    ]
    assert not marked, f"rebuild these from a record or retire them: {marked}"

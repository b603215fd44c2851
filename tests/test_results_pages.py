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


def test_every_page_whose_runs_were_not_kept_says_so_under_its_title():
    silent = [name for name in pages.UNARCHIVED if pages.UNARCHIVED_NOTE not in (pages.RESULTS / name).read_text()]
    assert not silent, f"add experiments.pages.UNARCHIVED_NOTE under the title of {silent}"

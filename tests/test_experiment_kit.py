"""The experiment kit's report module and the discovery of uninstalled studies."""

import argparse
import subprocess
import sys
import textwrap

import pytest

from wmrl_core.errors import WMRLError
from wmrl_core.experiments import report
from wmrl_core.experiments.studies import find_studies, register_studies
from wmrl_core.plugins import build_registry, get_plugin_manager


def test_parse_int_ranges_reads_lists_and_ranges_and_names_what_is_wrong():
    assert report.parse_int_ranges("0-4,7") == [0, 1, 2, 3, 4, 7]
    assert report.parse_int_ranges(" 3 , ,5") == [3, 5]
    with pytest.raises(ValueError, match="'x' is not an integer"):
        report.parse_int_ranges("1,x")
    with pytest.raises(ValueError, match="runs backwards; write it low-high \\('2-5'\\)"):
        report.parse_int_ranges("5-2")


def test_common_flags_take_seeds_as_a_list_never_a_count():
    parser = report.add_common_flags(argparse.ArgumentParser(), seeds="0-2", runs="runs/x")
    args = parser.parse_args([])
    assert (args.seeds, args.runs, args.archive, args.out, args.quick) == ([0, 1, 2], "runs/x", None, None, False)
    assert parser.parse_args(["--seeds", "5,9", "--quick"]).seeds == [5, 9]
    with pytest.raises(SystemExit):
        parser.parse_args(["--seeds", "a"])
    with pytest.raises(
        argparse.ArgumentTypeError, match="--seeds 3 is ambiguous: write 0-2 for 3 seeds from 0, or 3-3"
    ):
        report.seed_list("3")  # once a count in some studies: refused rather than silently read as seed 3
    assert report.seed_list("3-3") == [3] and report.format_int_ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    required = report.add_common_flags(argparse.ArgumentParser(), runs="r")
    with pytest.raises(SystemExit):
        required.parse_args([])  # no default seeds: --seeds is required


def test_markdown_table_escapes_pipes_and_checks_its_shape():
    text = report.markdown_table(["arm", "score"], [["a|b", 0.5], ["c", None]])
    assert text.splitlines() == ["| arm | score |", "|:---|---:|", "| a\\|b | 0.5 |", "| c |  |"]
    with pytest.raises(ValueError, match="rows \\[0\\] do not have 2 cells"):
        report.markdown_table(["arm", "score"], [["only one"]])
    with pytest.raises(ValueError, match="align needs one of l, r, c per column"):
        report.markdown_table(["a", "b"], [], align="lx")


def test_interval_text_is_the_mean_with_its_t_interval():
    # mean 0.5, sd 0.1, n 3: half-width t_{0.975,2} * 0.1 / sqrt(3) = 4.3027 * 0.057735 = 0.2484
    assert report.interval_text([0.4, 0.5, 0.6]) == "0.500 [0.252, 0.748]"
    assert report.interval_text([0.02, None], signed=True) == "+0.020"
    assert report.interval_text([None, float("nan")]) == "n/a"


def test_per_seed_table_shows_every_seed_and_the_mean():
    text = report.per_seed_table({"real": {0: 0.4, 1: 0.6}, "wmrl": {0: 0.5}}, digits=2)
    lines = text.splitlines()
    assert lines[0] == "| seed | real | wmrl |"
    assert lines[2:4] == ["| 0 | 0.40 | 0.50 |", "| 1 | 0.60 | n/a |"]
    assert lines[4].startswith("| mean [95% t] | 0.50 [") and lines[4].endswith("| 0.50 |")


def _study(root, name, body):
    folder = root / "experiments" / name
    folder.mkdir(parents=True)
    (folder / "study.py").write_text(textwrap.dedent(body))
    return folder


def test_studies_of_a_checkout_register_their_experiments_through_the_hook(tmp_path):
    folder = _study(
        tmp_path,
        "kit_demo_study",
        """
        from wmrl_core import hookimpl

        def main(argv, prog=None):
            print(prog, argv)
            return 3

        @hookimpl
        def wmrl_register_experiments(table):
            table.add("kit-demo", "experiments.kit_demo_study.study:main", description="a demo study")
        """,
    )
    assert find_studies(tmp_path) == [folder / "study.py"]
    pm = get_plugin_manager()
    assert register_studies(pm, tmp_path) == ["experiments.kit_demo_study.study"]
    spec = build_registry(pm).experiments.get("kit-demo")
    assert spec.load()(["--x"], prog="p") == 3

    # the command line finds it from the checkout's folder, and only there
    run = [sys.executable, "-m", "wmrl_core.cli", "experiment"]
    listed = subprocess.run([*run, "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert "kit-demo" in listed.stdout and "a demo study" in listed.stdout
    called = subprocess.run([*run, "kit-demo", "--x"], cwd=tmp_path, capture_output=True, text=True)
    assert called.returncode == 3 and "wmrl experiment kit-demo ['--x']" in called.stdout
    elsewhere = subprocess.run([*run, "--help"], cwd=tmp_path / "experiments", capture_output=True, text=True)
    assert "kit-demo" not in elsewhere.stdout


def test_a_study_that_does_not_import_is_named(tmp_path):
    _study(tmp_path, "kit_broken_study", "import a_module_that_is_not_there\n")
    with pytest.raises(WMRLError, match="kit_broken_study/study.py does not import .*ModuleNotFoundError"):
        register_studies(get_plugin_manager(), tmp_path)


def test_a_page_is_written_from_its_record_or_the_record_is_named(tmp_path):
    (tmp_path / "record.json").write_text('{"score": 0.5}')
    text = report.page_from_record(
        tmp_path / "record.json", tmp_path / "out" / "page.md", lambda r: f"{r['score']}\n", "x"
    )
    assert text == (tmp_path / "out" / "page.md").read_text() == "0.5\n"
    (tmp_path / "other.json").write_text('{"other": 1}')
    with pytest.raises(ValueError, match=r"other.json: not a score record \(KeyError"):
        report.page_from_record(tmp_path / "other.json", tmp_path / "p.md", lambda r: r["score"], "a score record")
    assert not (tmp_path / "p.md").exists()


def test_a_rebuild_from_a_record_refuses_the_flags_of_a_run(capsys):
    parser = argparse.ArgumentParser(prog="study")
    parser.add_argument("--from-json")
    parser.add_argument("--out")
    parser.add_argument("--shuffles", type=int, default=10)
    report.refuse_run_flags(parser, parser.parse_args(["--from-json", "r.json", "--out", "d"]), ("from_json", "out"))
    args = parser.parse_args(["--from-json", "r.json", "--out", "d", "--shuffles", "3"])
    with pytest.raises(SystemExit) as exit_:
        report.refuse_run_flags(parser, args, ("from_json", "out"))
    assert exit_.value.code == 2
    assert "--shuffles would change the run, not the page" in capsys.readouterr().err


def test_the_noise_weight_page_refuses_a_record_of_other_runs(tmp_path, capsys):
    import json

    from experiments.synthetic import noise_weight

    record = tmp_path / "w.json"
    record.write_text(json.dumps({"0.1": {"seed0": [0.0] * 3, "seed1": [0.0] * 3}}))
    flags = ["--from-json", str(record), "--fractions", "0.1", "--steps", "3"]
    assert noise_weight.main([*flags, "--seeds", "0-1"]) == 0
    with pytest.raises(SystemExit):
        noise_weight.main([*flags, "--seeds", "0-2"])
    assert "are not the ones --seeds, --steps and --fractions describe" in capsys.readouterr().err

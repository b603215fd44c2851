"""Index lists of the ``wmrl-libero`` commands, parsed in one module that the CLI and the
world-model sub-commands share (so neither imports the other)."""

import subprocess
import sys

import pytest
from wmrl_libero.int_ranges import parse_int_ranges


def test_integers_and_inclusive_ranges_in_the_order_written():
    assert parse_int_ranges("0-4,7") == [0, 1, 2, 3, 4, 7]
    assert parse_int_ranges("40-49") == list(range(40, 50))
    assert parse_int_ranges("3, 1,,2-2") == [3, 1, 2]
    assert parse_int_ranges("") == []


@pytest.mark.parametrize(
    ("text", "message"), [("0-x", "not an integer"), ("a", "not an integer"), ("9-3", "backwards")]
)
def test_malformed_lists_name_the_part(text, message):
    with pytest.raises(ValueError, match=message):
        parse_int_ranges(text)


def test_the_world_model_commands_do_not_import_the_cli_and_bad_lists_are_usage_errors():
    code = "import sys, wmrl_libero.world_models.commands; print('wmrl_libero.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr[-2000:]
    cli = [sys.executable, "-m", "wmrl_libero.cli"]
    bad = subprocess.run(
        [*cli, "train-wm", "d", "--out", "o", "--heldout-init-states", "9-3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "--heldout-init-states '9-3': the range '9-3' runs backwards" in bad.stderr

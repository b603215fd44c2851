"""Bad input to the ``wmrl`` command line, in this process (``wmrl_core.cli.main``): each mistake ends
with exit status 2 and a message that names the problem and the fix, never a traceback, before anything
trains."""

from __future__ import annotations

import pytest

from wmrl_core import cli


def wmrl(capsys, *args: str) -> tuple[int, str]:
    """``wmrl ARGS``: (exit status, stderr)."""
    capsys.readouterr()
    try:
        rc = cli.main(list(args))
    except SystemExit as exc:  # argparse's own errors
        rc = int(exc.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err


@pytest.mark.parametrize(
    "text, says",
    [
        ("5\n", "the top level must be a mapping of keys (mode: ..., steps: ...), got the value `5`"),
        ("just a string\n", "the top level must be a mapping of keys (mode: ..., steps: ...), got the value `just"),
        ("- a\n- b\n", "the top level must be a mapping of keys (mode: ..., steps: ...), got a list"),
        (b"\xff\xfe\x00", "not UTF-8 text"),
    ],
)
def test_a_config_file_that_is_not_a_mapping(capsys, tmp_path, text, says):
    path = tmp_path / "bad.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    rc, err = wmrl(capsys, "train", str(path), f"run_dir={tmp_path / 'run'}")
    assert rc == 2 and says in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "override, says",
    [
        ("rollout=5", "`rollout` is a section, not a value (got 5): set its keys, e.g. rollout.batch_tasks=..."),
        ("world_model=5", "`world_model` is a section, not a value (got 5)"),
        ("resume_allow_changes=seed", "`resume_allow_changes` is a list (got 'seed'): write resume_allow_changes=[seed]"),
        ("resume_allow_changes=[grpo.lrr]", "resume_allow_changes names `grpo.lrr`, which is not a setting of this config. Did you mean `grpo.lr`?"),
    ],
)  # fmt: skip
def test_a_value_of_the_wrong_shape_names_its_key(capsys, synthetic_config, tmp_path, override, says):
    rc, err = wmrl(capsys, "train", str(synthetic_config), override, f"run_dir={tmp_path / 'run'}")
    assert rc == 2 and says in err


def test_paths_of_the_wrong_kind(capsys, synthetic_config, tmp_path):
    rc, err = wmrl(capsys, "train", str(tmp_path))
    assert rc == 2 and f"config file {tmp_path} is a directory; pass a YAML file in it" in err
    (tmp_path / "a_file").write_text("")
    rc, err = wmrl(capsys, "train", str(synthetic_config), f"run_dir={tmp_path / 'a_file'}")
    assert rc == 2 and "is a file; name a directory for the run" in err
    rc, err = wmrl(capsys, "train", str(synthetic_config), f"environment.cache={tmp_path}", f"run_dir={tmp_path / 'r'}")
    assert rc == 2 and f"environment.cache={tmp_path} is a directory; name a .jsonl file" in err


def test_plot_refuses_a_run_with_nothing_to_draw_or_a_corrupt_record(capsys, tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    rc, err = wmrl(capsys, "plot", str(tmp_path))
    assert rc == 2 and "holds no metric a plot draws" in err
    (tmp_path / "metrics.jsonl").write_text('{not json\n{"step": 1}\n')
    rc, err = wmrl(capsys, "plot", str(tmp_path))
    assert rc == 2 and "line 1: not a JSON record" in err and "the file is corrupt" in err

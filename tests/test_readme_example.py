"""The README's plugin example, run as printed: its code block becomes a package and ``wmrl train``
trains it with the README's command line; and the README's claim about ``Rollouts`` (a group's rows
need not be contiguous) holds for the engine between rewards and loss."""

from __future__ import annotations

import importlib
import json
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

from wmrl_core import cli
from wmrl_core.plugins import get_plugin_manager

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _plugin_code() -> str:
    section = README.split("## Writing a domain plugin", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "README.md: the plugin section lost its python block"
    return match.group(1)


def _train_command() -> list[str]:
    match = re.search(r"^wmrl train (.*environment\.name=digit.*)$", README, re.MULTILINE)
    assert match, "README.md: the plugin section lost its `wmrl train ...` command"
    return shlex.split(match.group(1))


@pytest.fixture
def my_domain(tmp_path, monkeypatch):
    package = tmp_path / "pkg" / "my_domain"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(_plugin_code())
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    module = importlib.import_module("my_domain.plugin")
    monkeypatch.setattr("wmrl_core.trainer.get_plugin_manager", lambda: get_plugin_manager(extra_plugins=[module]))
    monkeypatch.chdir(ROOT)  # the command names a config relative to the repository root
    yield module
    for name in ("my_domain.plugin", "my_domain"):
        sys.modules.pop(name, None)


@pytest.mark.slow  # 60 steps of the README's command, about 15 s
def test_the_readme_plugin_trains_as_printed_and_learns(my_domain, tmp_path, capsys):
    argv = ["train", *_train_command(), f"run_dir={tmp_path / 'run'}", "logging.progress=false"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r["eval/reward"] for r in rows if r.get("eval/reward") is not None]
    assert len(evals) >= 2 and evals[-1] > evals[0] + 0.2, evals  # a 1-in-10 guess at the start
    assert summary


def test_the_readme_plugin_passes_check_environment(my_domain):
    from wmrl_core.builtin_rewards import ScoreReward
    from wmrl_core.checkers import check_environment

    env = my_domain.DigitEnv()
    outcomes = check_environment(env, policy=my_domain.DigitPolicy(env=env), reward=ScoreReward(env=env), n_solutions=4)
    assert outcomes is not None and len(outcomes) == 4 and all(o.status == "ok" for o in outcomes)


def _fused_rows(method: str, rows: np.ndarray | None):
    """``fuse_step`` of ``method`` on the fusion tests' batch, with its rows in the order ``rows``."""
    from test_fusion_interface import _batch, _fitted

    from wmrl_core.fusion import fuse_step

    calibrator, fuser, settings = _fitted(method, "token_mean")
    group_ids, _, mask, real, wm, anchors, solutions = _batch(7)
    rows = np.arange(group_ids.size) if rows is None else rows
    return fuse_step(
        world_model_rewards=wm[rows],
        real_rewards=real[rows],
        group_ids=group_ids[rows],
        anchor_groups=anchors,
        token_counts=mask.sum(-1).numpy()[rows],
        calibrator=calibrator,
        fuser=fuser,
        settings=settings,
        step=3,
        solutions=[solutions[i] for i in rows],
    )


@pytest.mark.slow  # fits every fuser twice, about 10 s on a shared CPU
def test_a_groups_rows_need_not_be_contiguous(monkeypatch):
    """What the README says of ``Rollouts.group_ids``: permuting the rows of a step permutes the
    effective advantages and leaves the fuser's estimates unchanged, for every fusion method that
    works from rewards alone (one that needs per-group policy gradients gets them from the trainer,
    which gathers them per group id)."""
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    from wmrl_core.fusion import registered_fusers
    from wmrl_core.fusion.gradients import MissingGradientsError

    perm = np.random.default_rng(0).permutation(32)  # the batch's 8 groups of 4, interleaved
    checked = []
    for method in registered_fusers().names():
        try:
            ordered = _fused_rows(method, None)
        except MissingGradientsError:
            continue
        shuffled = _fused_rows(method, perm)
        np.testing.assert_allclose(shuffled.advantages, ordered.advantages[perm], err_msg=method)
        for key in ("fusion/lambda", "fusion/w_world_model", "fusion/n_effective"):
            a, b = ordered.record.get(key), shuffled.record.get(key)
            assert (a is None and b is None) or np.isclose(a, b, equal_nan=True), (method, key, a, b)
        checked.append(method)
    assert {"rectified", "inverse_variance", "pooled"} <= set(checked), checked

"""The within-group ranking experiment: its pure parts by hand, and 2 tiny simulated groups."""

import json
import math

import numpy as np
import pytest
from wmrl_libero.runtime import libero_available

from experiments.libero_group_ranking.group_ranking import (
    GroupKey,
    bootstrap_group_interval,
    group_plan,
    load_groups,
    main,
    mixed_groups,
    prefix_states,
    prefix_steps,
    progress_scores,
    rollout_seed,
    simulation_saved,
)
from wmrl_core.testing import require


def test_group_plan_interleaves_fit_and_eval_groups():
    plan = group_plan([0, 4], fit_init=[0, 1, 2, 3], eval_init=[30, 31], fit_per_eval=2)
    assert [k.name for k in plan[:6]] == [
        "t0_i0_fit",
        "t0_i1_fit",
        "t0_i30_eval",
        "t4_i0_fit",
        "t4_i1_fit",
        "t4_i30_eval",
    ]
    assert len(plan) == 12 and plan[-1] == GroupKey(4, 31, "eval")


def test_group_plan_refuses_the_transfer_heldout_split_and_overlap():
    with pytest.raises(ValueError, match="40-49"):
        group_plan([0], fit_init=[0, 1], eval_init=[39, 40])
    with pytest.raises(ValueError, match="both fitting and held-out"):
        group_plan([0], fit_init=[0, 1], eval_init=[1])


def test_rollout_seed_is_distinct_per_rollout():
    assert rollout_seed(0, 4, 31, 7) == ((0 * 100 + 4) * 100 + 31) * 1000 + 7 == 431007
    assert len({rollout_seed(1, t, s, r) for t in range(3) for s in range(3) for r in range(3)}) == 27


def test_prefix_and_simulation_saved_by_hand():
    # H = 520: f = 0.25 simulates ceil(130) = 130 steps; an episode of 100 steps costs 100
    assert prefix_steps(520, 0.25) == 130
    assert prefix_steps(100, 0.25) == 100
    assert prefix_steps(520, 0.5) == 260
    # lengths 520 and 100: full 620 steps, prefix 130 + 100 = 230 -> saved 1 - 230/620
    assert simulation_saved([520, 100], 0.25) == pytest.approx(1 - 230 / 620)
    assert simulation_saved([520, 100], 1.0) == 0.0
    with pytest.raises(ValueError, match="fraction"):
        prefix_steps(10, 0.0)
    states = np.arange(11)[:, None]  # reset state + 10 steps
    assert prefix_states(states, 3).ravel().tolist() == [0, 1, 2, 3]


def test_mixed_groups_counts():
    groups = ["a", "a", "b", "b", "c", "c"]
    labels = [True, False, True, True, False, False]
    assert mixed_groups(groups, labels) == {"mixed": 1, "all_success": 1, "all_failure": 1}


def test_bootstrap_interval_over_groups_by_hand():
    # group a: success 0.9 vs failure 0.1 -> 1 of 1 pair; group b: success 0.2 vs failure 0.8 -> 0 of 1
    groups = ["a", "a", "b", "b", "c", "c"]
    labels = [True, False, True, False, True, True]  # c has one class: no pair
    scores = [0.9, 0.1, 0.2, 0.8, 0.5, 0.5]
    lo, hi = bootstrap_group_interval(groups, labels, scores, n_boot=500, seed=1)
    # every resample of {a, b} has AUROC in {0, 1/2, 1}: the interval spans [0, 1]
    assert lo == 0.0 and hi == 1.0
    same = bootstrap_group_interval(["a", "a"], [True, False], [0.9, 0.1], n_boot=50)
    assert same == (1.0, 1.0)
    assert all(math.isnan(x) for x in bootstrap_group_interval(["a"], [True], [0.3]))


def test_two_tiny_simulated_groups_collect_resume_and_score(tmp_path, capsys):
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    out = tmp_path / "groups"
    args = ["collect", "--out", str(out), "--tasks", "0", "--fit-init", "0", "--eval-init", "1"]
    args += ["--fit-per-eval", "1", "--group-size", "2", "--max-steps", "12", "--workers", "1"]
    assert main(args) == 0
    groups = load_groups(out)
    assert sorted(g.key.name for g in groups) == ["t0_i0_fit", "t0_i1_eval"]
    for g in groups:
        assert (
            len(g.success) == 2 and all(len(s) == 13 for s in g.states) and all(a.shape == (12, 7) for a in g.actions)
        )
        # two rollouts of a group differ only in their noise
        assert not np.allclose(g.actions[0], g.actions[1])
        assert np.allclose(g.states[0][0], g.states[1][0])
    capsys.readouterr()
    assert main(args) == 0  # resumes: nothing left to simulate
    assert "2 of 2 groups on disk; 0 to simulate" in capsys.readouterr().out
    scores = progress_scores(
        "plugins/libero/checkpoints/libero_wm_t0-9.pt", [g for g in groups if g.key.role == "eval"]
    )
    assert scores.shape == (2,) and np.all(np.isfinite(scores))
    # analyse end to end: refit (tiny), score every scorer on the held-out group; 12 steps never
    # succeed, so mark rollout 0 of each group a success (the scorer needs both outcomes)
    for path in out.glob("*.npz"):
        z = dict(np.load(path))
        z["success"] = np.asarray([True, False])
        np.savez_compressed(path, **z)
    main(
        ["analyse", "--out", str(out), "--dynamics-iterations", "3", "--scorer-iterations", "3"]
        + ["--rollout-chunks", "1", "--fractions", "0.01"]
    )
    result = json.loads((out / "group_ranking.json").read_text())
    assert result["fit_init_states"] == [0] and result["eval_init_states"] == [1]
    assert result["eval_episodes"] == 2 and len(result["rows"]) == 4 + 3
    # f = 0.01 of a 12-step limit simulates 1 step of each 12: saved 11/12
    assert result["rows"][-1]["saved"] == pytest.approx(11 / 12)


def test_table_markdown_one_row_per_scorer():
    from experiments.libero_group_ranking.group_ranking import table_markdown

    row = dict(scorer="progress", auroc=0.8125, ci95=[0.6, 0.95], mixed_groups=3, pairs=16, saved=0.25)
    lines = table_markdown({"rows": [row]}).splitlines()
    assert len(lines) == 3 and lines[2] == "| progress | 0.812 | [0.60, 0.95] | 3 | 16 | 0.25 |"


def test_the_pages_table_is_the_committed_analysis():
    """The raw groups are not committed (36 MB), so the page cannot be rebuilt from them; its table
    must at least be what ``analyse`` made of them (``group_ranking.json``)."""
    from pathlib import Path

    from experiments.libero_group_ranking.group_ranking import table_markdown

    results = Path(__file__).resolve().parents[3] / "docs/results/libero"
    table = table_markdown(json.loads((results / "group_ranking.json").read_text()))
    assert table in (results / "group_ranking.md").read_text()

"""LIBERO world models on synthetic tensors: shapes, disagreement, horizon, progress, metrics."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from wmrl_libero.world_models.checkpoint import (
    WorldModelBundle,
    load_bundle,
    save_bundle,
)
from wmrl_libero.world_models.dynamics import (
    DynamicsEnsemble,
    chunk_transitions,
    ensemble_disagreement,
    fit_dynamics,
)
from wmrl_libero.world_models.features import (
    Episode,
    load_episodes,
    split_by_init_state,
    split_state,
    state_vector,
)
from wmrl_libero.world_models.imagination import ImaginationWorldModel, imagine
from wmrl_libero.world_models.progress import TrajectoryProgressWorldModel
from wmrl_libero.world_models.quality import (
    auroc,
    auroc_interval,
    brier_score,
    expected_calibration_error,
    horizon_errors,
    per_task,
    within_group_spearman,
    within_task_auroc,
    write_page,
    write_report,
)
from wmrl_libero.world_models.scorer import (
    fit_scorer,
    potential_progress,
    subsample_indices,
)

from wmrl_core.contracts import ScoresExecutions
from wmrl_core.types import Outcome, Task

OBJ = 8
D = 16 + OBJ


def _episodes(n=12, T=40, seed=0):
    """Linear toy physics: s_{t+1} = s_t + 0.05 * A a_t; success when the first coordinate ends high."""
    rng = np.random.default_rng(seed)
    mix = rng.standard_normal((7, D)) * 0.5
    out = []
    for i in range(n):
        s = np.zeros((T + 1, D), dtype=np.float32)
        s[0] = rng.uniform(-0.5, 0.5, D)
        a = rng.uniform(-1, 1, (T, 7)).astype(np.float32)
        a[:, 0] = 1.0 if i % 2 == 0 else -1.0
        for t in range(T):
            s[t + 1] = s[t] + 0.05 * a[t] @ mix
        out.append(Episode(task_index=i % 2, init_state=i, success=i % 2 == 0, states=s, actions=a, object_len=6))
    return out


@pytest.fixture(scope="module")
def trained():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only add overhead
    torch.manual_seed(0)
    eps = _episodes()
    dyn = fit_dynamics(eps, chunk=2, members=4, hidden=32, iterations=200, batch_size=64, log=lambda m: None)
    scorer = fit_scorer(eps, hidden=32, iterations=200, batch_size=64, log=lambda m: None)
    bundle = WorldModelBundle(
        dyn,
        scorer,
        OBJ,
        initial_states={(e.task_index, e.init_state): e.states[0] for e in eps},
        object_len={0: 6, 1: 6},
        meta={"train_success_rate": 0.5},
    )
    yield eps, bundle
    torch.set_num_threads(threads)


def test_state_vector_pads_and_splits():
    s = state_vector(np.ones(16), np.arange(5), OBJ)
    assert s.shape == (D,) and s[16 + 4] == 4 and s[-1] == 0
    obs = split_state(s, 5)
    assert obs["proprio"].shape == (16,) and obs["object_state"].tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="object_dim"):
        state_vector(np.ones(16), np.ones(OBJ + 1), OBJ)


def test_split_by_init_state_keeps_heldout_apart():
    train, held = split_by_init_state(_episodes(), range(8, 12))
    assert {e.init_state for e in held} == {8, 9, 10, 11} and all(e.init_state < 8 for e in train)


def test_chunk_transitions_shapes():
    s, a, n, k = chunk_transitions(_episodes(n=2, T=10), chunk=4)
    assert s.shape == (2 * 7, D) and a.shape == (14, 4, 7) and n.shape == s.shape and k.shape == (14,)


def test_ensemble_shapes_and_disagreement_zero_when_members_agree():
    model = DynamicsEnsemble(D, 2, chunk=3, members=5, hidden=16)
    deltas = model(torch.zeros(4, D), torch.zeros(4, 3, 7), torch.zeros(4, dtype=torch.long))
    assert deltas.shape == (5, 4, D)
    nxt, spread = model.step(torch.zeros(4, D), torch.zeros(4, 3, 7), torch.zeros(4, dtype=torch.long))
    assert nxt.shape == (4, D) and spread.shape == (4,) and (spread > 0).all()
    assert torch.allclose(ensemble_disagreement(torch.ones(3, 2, D)), torch.zeros(2))


def test_dynamics_learns_and_disagreement_grows_off_distribution(trained):
    eps, bundle = trained
    dyn = bundle.dynamics
    s, a, n, k = (torch.as_tensor(x) for x in chunk_transitions(eps, dyn.chunk))
    pred, spread_in = dyn.step(s, a, k)
    assert ((pred - n) ** 2).mean() < 0.5 * ((s - n) ** 2).mean()  # beats "nothing moves"
    far = s + 20 * dyn.state_std  # states far outside the training data
    _, spread_out = dyn.step(far, a, k)
    assert spread_out.mean() > 3 * spread_in.mean()
    assert torch.isfinite(dyn.train_disagreement_q99)


def test_imagination_horizon_and_disagreement_cut(trained):
    eps, bundle = trained
    starts = np.stack([e.states[0] for e in eps[:3]])
    actions = [e.actions for e in eps[:3]]
    ep = imagine(bundle, [0, 1, 0], starts, actions, horizon=10, max_disagreement=1e9, success_threshold=2.0)
    assert ep.steps.tolist() == [10, 10, 10] and not ep.cut.any()
    assert ep.states.shape == (3, 6, D) and ep.disagreement.shape == (3, 5)
    cut = imagine(bundle, [0, 1, 0], starts, actions, horizon=10, max_disagreement=0.0, success_threshold=2.0)
    assert cut.cut.all() and cut.steps.tolist() == [0, 0, 0]
    np.testing.assert_allclose(cut.states[:, -1], starts, atol=1e-6)  # frozen at the last trusted state


def test_imagination_ranks_toy_successes_above_failures(trained, tmp_path):
    eps, bundle = trained
    path = save_bundle(bundle, tmp_path / "wm.pt")
    wm = ImaginationWorldModel(checkpoint=str(path), horizon=40, max_disagreement=1e9)
    tasks = [
        Task(id=f"t/{e.task_index}/{e.init_state}", data={"task_index": e.task_index, "init_state": e.init_state})
        for e in eps
    ]
    outs = wm.predict(tasks, [e.actions for e in eps])
    assert all(o.status == "ok" and 0 <= o.score <= 1 for o in outs)
    assert auroc([e.success for e in eps], [o.score for o in outs]) > 0.8
    with pytest.raises(KeyError, match="initial state"):
        wm.predict([Task(id="t/0/99", data={"task_index": 0, "init_state": 99})], [eps[0].actions])


def test_small_vla_solutions_are_batched_and_predict_records_the_imagined_episode(trained, tmp_path):
    from wmrl_libero.policies.small_vla import SmallVLAPolicy

    eps, bundle = trained
    wm = ImaginationWorldModel(
        checkpoint=str(save_bundle(bundle, tmp_path / "wm.pt")), horizon=12, max_disagreement=1e9
    )
    torch.manual_seed(0)
    policy = SmallVLAPolicy(max_steps=12, object_dim=OBJ, hidden=16)
    tasks = [Task(id=f"t/0/{i}", description="put it", data={"task_index": 0, "init_state": i}) for i in (0, 2, 4)]
    rollouts = policy.generate(tasks, 1)
    batched = wm.imagine(tasks, rollouts.solutions)
    assert all(len(c.actions) == 0 for c in rollouts.solutions)  # imagination did not record into them

    class OneByOne:  # the generic path: act() on a deep copy, one episode at a time
        def __init__(self, c):
            self.c = copy.deepcopy(c)

        def act(self, obs, info):
            return self.c.act(obs, info)

    generic = wm.imagine(tasks, [OneByOne(c) for c in rollouts.solutions])
    np.testing.assert_allclose(batched.states, generic.states, atol=1e-4)

    # predict() records the imagined episode, so a rollout scored only in imagination has a gradient
    policy.log_probs(rollouts)  # as the trainer checks it, before any episode ran: it must change nothing
    assert rollouts.mask.sum() == 0
    outs = wm.predict(tasks, rollouts.solutions)
    assert [len(c.actions) for c in rollouts.solutions] == [o.info["imagined_steps"] for o in outs] == [12] * 3
    assert rollouts.mask.sum() == 3 * 12  # the imagined steps
    log_probs = policy.log_probs(rollouts)
    assert torch.isfinite(log_probs).all() and rollouts.mask.sum() == 3 * 12
    log_probs.sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())


def test_potential_progress_is_not_the_peak():
    spike = np.array([0.1, 0.1, 0.1, 0.95, 0.1, 0.1, 0.1, 0.1])
    assert potential_progress(spike, 3) == pytest.approx(0.0)
    assert spike.max() == 0.95
    rising = np.linspace(0, 1, 8)
    assert potential_progress(rising, 3) == pytest.approx(rising[-3:].mean() - rising[:3].mean())
    assert potential_progress(rising[::-1], 3) < 0
    assert subsample_indices(100, 8).tolist() == [0, 14, 28, 42, 57, 71, 85, 99]
    assert subsample_indices(3, 8).tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        potential_progress(np.array([]), 3)


def test_trajectory_world_model_reads_executed_trajectories(trained, tmp_path):
    eps, bundle = trained
    wm = TrajectoryProgressWorldModel(checkpoint=str(save_bundle(bundle, tmp_path / "wm.pt")))
    assert isinstance(wm, ScoresExecutions)  # the core's contract: every group executed, scored from its outcome
    tasks = [Task(id="t/0/0", data={"task_index": 0, "init_state": 0})] * 2
    traj = {"proprio": eps[0].states[:, :16], "object_state": eps[0].states[:, 16:22]}
    outs = wm.predict_from_outcomes(tasks, [None, None], [Outcome(score=1.0, info={"trajectory": traj}), Outcome()])
    assert outs[0].status == "ok" and len(outs[0].info["progress"]) == 8
    assert outs[1].status == "no_prediction" and outs[1].score is None
    assert wm.predict(tasks[:1], [object()])[0].status == "no_prediction"


def test_checkpoint_round_trip(trained, tmp_path):
    _, bundle = trained
    loaded = load_bundle(save_bundle(bundle, tmp_path / "wm.pt"))
    assert loaded.initial_states.keys() == bundle.initial_states.keys() and loaded.object_len == {0: 6, 1: 6}
    x = torch.zeros(2, D)
    assert torch.allclose(
        loaded.scorer(x, torch.zeros(2, dtype=torch.long))[0], bundle.scorer(x, torch.zeros(2, dtype=torch.long))[0]
    )
    with pytest.raises(FileNotFoundError, match="train-wm"):
        load_bundle(tmp_path / "missing.pt")


def test_scorer_needs_both_classes():
    eps = [e for e in _episodes() if not e.success]
    for e in eps:
        e.states = e.states[:1]
    with pytest.raises(ValueError, match="failed"):
        fit_scorer(eps, iterations=1, log=lambda m: None)


def test_quality_metrics():
    assert auroc([1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1]) == 1.0
    assert auroc([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9]) == 0.0
    assert np.isnan(auroc([1, 1], [0.1, 0.2]))
    assert expected_calibration_error([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]) == pytest.approx(0.0)
    assert expected_calibration_error([1, 1], [0.0, 0.0]) == pytest.approx(1.0)
    assert brier_score([1, 0], [1.0, 0.0]) == 0.0
    rho, n = within_group_spearman(
        [(0, 1)] * 3 + [(0, 2)] * 3 + [(0, 3)] * 2, [1, 0, 0, 1, 0, 1, 1, 1], [0.9, 0.1, 0.2, 0.3, 0.05, 0.4, 0.4, 0.6]
    )
    assert n == 2 and rho == pytest.approx(0.8660254)  # group (0, 3) is all successes: skipped


def test_auroc_interval_brackets_the_auroc_and_narrows_with_more_episodes():
    rng = np.random.default_rng(0)
    y = rng.random(400) < 0.5
    p = y + rng.normal(0, 1.0, 400)  # informative but noisy: AUROC about 0.76
    lo, hi = auroc_interval(y, p)
    assert lo < auroc(y, p) < hi and hi - lo < 0.15
    lo_small, hi_small = auroc_interval(y[:20], p[:20])
    assert hi_small - lo_small > hi - lo
    assert all(np.isnan(auroc_interval([1, 1, 1], [0.1, 0.2, 0.3])))


def test_per_task_splits_the_metrics_by_task():
    rows = per_task(
        [0, 0, 0, 0, 1, 1],
        [1, 0, 1, 0, 1, 1],
        [(0, 40), (0, 40), (0, 41), (0, 41), (1, 40), (1, 40)],
        {"m": [0.9, 0.1, 0.8, 0.2, 0.5, 0.6]},
    )
    assert [(r["task"], r["episodes"], r["successes"]) for r in rows] == [(0, 4, 2), (1, 2, 2)]
    assert rows[0]["m"]["auroc"] == 1.0 and rows[0]["m"]["spearman_within_group"] == (pytest.approx(1.0), 2)
    assert np.isnan(rows[1]["m"]["auroc"])  # task 1: successes only


def test_load_episodes_reads_the_executed_actions_not_the_labels(tmp_path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "d.hdf5", "w") as f:
        for i, executed in enumerate([True, False]):
            g = f.create_group(f"data/demo_{i}")
            g.attrs.update(task_index=3, init_state=i, success=True)
            g["obs/proprio"] = np.zeros((5, 16))
            g["obs/object_state"] = np.zeros((5, 4))
            g["actions"] = np.zeros((5, 7))  # the expert's labels
            if executed:
                g["executed_actions"] = np.ones((5, 7))  # what ran (labels + noise)
    eps = load_episodes([tmp_path / "d.hdf5"], object_dim=8)
    assert eps[0].actions.mean() == 1.0 and eps[1].actions.mean() == 0.0


def test_horizon_errors_measure_drift():
    eps = _episodes(n=2, T=8)
    imagined = np.stack([e.states[::2] for e in eps])  # perfect at chunk boundaries (chunk 2)
    imagined[:, 2:, 0] += 0.1
    rows = horizon_errors(imagined, eps, 2, np.ones(D), [2, 4], np.zeros((2, 4)))
    assert rows[0]["eef_error_m"] == 0 and rows[1]["eef_error_m"] == pytest.approx(0.1)


def test_plugin_registers_world_models():
    import wmrl_libero.plugin

    from wmrl_core.plugins import build_registry, get_plugin_manager

    registry = build_registry(get_plugin_manager(entry_points=False, extra_plugins=[wmrl_libero.plugin]))
    assert "libero-imagination" in registry.world_models and "libero-progress" in registry.world_models


def test_chunk_windows_and_rollout_training():
    from wmrl_libero.world_models.dynamics import chunk_windows

    eps = _episodes(n=2, T=12)
    s0, a, tgt, k = chunk_windows(eps, chunk=2, length=3)
    assert s0.shape == (2 * 4, D) and a.shape == (8, 3, 2, 7) and tgt.shape == (8, 3, D)
    np.testing.assert_allclose(tgt[1, 2], eps[0].states[2 + 6])  # window starting at t=2, third chunk
    np.testing.assert_allclose(a[1, 2], eps[0].actions[6:8])
    torch.manual_seed(0)
    dyn = fit_dynamics(
        eps, chunk=2, members=2, hidden=16, iterations=20, batch_size=8, rollout_chunks=3, log=lambda m: None
    )
    assert dyn.member_step(torch.zeros(2, 4, D), torch.zeros(4, 2, 7), torch.zeros(4, dtype=torch.long)).shape == (
        2,
        4,
        D,
    )


def test_within_task_auroc_compares_only_episodes_of_one_task():
    # task a ranks its success above its failure, task b too, but b's scores sit higher overall:
    # pooled, b's failure (0.8) outranks a's success (0.3), within each task the ranking is perfect
    tasks, y = ["a", "a", "b", "b", "c"], [True, False, True, False, True]
    scores = [0.3, 0.1, 0.9, 0.8, 0.5]
    assert within_task_auroc(tasks, y, scores) == (1.0, 2)
    assert within_task_auroc(tasks, y, [0.1, 0.3, 0.9, 0.9, 0.5]) == (0.25, 2)  # a wrong, b tied
    value, pairs = within_task_auroc(["a", "b"], [True, False], [0.5, 0.5])
    assert np.isnan(value) and pairs == 0


RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results" / "libero"


@pytest.mark.parametrize("name", ["world_models", "world_models_t0-9"])
def test_a_report_page_is_rebuilt_from_its_record_alone(name, tmp_path):
    record = json.loads((RESULTS / f"{name}.json").read_text())
    command = record.pop("command")
    page = write_report(record, tmp_path / "report", command, name=name)
    assert json.loads((tmp_path / "report" / f"{name}.json").read_text())["command"] == command
    rebuilt = write_page(tmp_path / "report" / f"{name}.json", tmp_path / "page")
    assert rebuilt.read_text() == page.read_text() == (RESULTS / f"{name}.md").read_text()
    # the within-task column only where the report measured it (the four-task report did not)
    assert ("AUROC within task" in page.read_text()) == ("auroc_within_task" in record["imagination"])


def test_a_record_without_its_command_is_refused_by_name(tmp_path):
    (tmp_path / "other.json").write_text(json.dumps({"imagination": {}}))
    with pytest.raises(
        ValueError, match="other.json: not a report written by wmrl-libero wm-report.*names no 'command'"
    ):
        write_page(tmp_path / "other.json", tmp_path)
    (tmp_path / "partial.json").write_text(json.dumps({"command": "wmrl-libero wm-report x", "imagination": {}}))
    with pytest.raises(ValueError, match="partial.json: not a report written by wmrl-libero wm-report"):
        write_page(tmp_path / "partial.json", tmp_path)

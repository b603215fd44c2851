"""The behaviour-cloning recipe: learning-rate schedule, episode split, held-out action error,
observation noise (pure functions, no simulator)."""

import numpy as np
import pytest
import torch
from wmrl_libero.policies.behaviour_cloning import (
    chunk_action_error,
    chunk_samples,
    cosine_learning_rate,
    fit_feature_scaling,
    fit_small_vla,
    split_by_init_state,
    without_heldout_init_states,
)
from wmrl_libero.policies.small_vla import SmallVLA


def test_cosine_learning_rate_warms_up_then_decays_to_the_final_fraction():
    assert cosine_learning_rate(0, 100, 1.0, warmup=10) == pytest.approx(0.1)
    assert cosine_learning_rate(9, 100, 1.0, warmup=10) == pytest.approx(1.0)
    assert cosine_learning_rate(10, 100, 1.0, warmup=10) == pytest.approx(1.0)
    assert cosine_learning_rate(55, 100, 1.0, warmup=10) == pytest.approx(0.5)  # half way: cos(pi/2) = 0
    assert cosine_learning_rate(100, 100, 1.0, warmup=10, final_fraction=0.1) == pytest.approx(0.1)
    lrs = [cosine_learning_rate(s, 100, 2.0, warmup=10) for s in range(10, 100)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    assert [cosine_learning_rate(s, 50, 3e-4, final_fraction=1.0) for s in (0, 25, 49)] == pytest.approx([3e-4] * 3)


def test_split_by_init_state_keeps_whole_episodes_and_repeats_together():
    demos = [{"init_state": s, "id": i} for i, s in enumerate([0, 1, 2, 1, 7, 7])]
    train, val = split_by_init_state(demos, [1, 7])
    assert [d["id"] for d in train] == [0, 2]
    assert [d["id"] for d in val] == [1, 3, 4, 5]


def test_demonstrations_from_held_out_init_states_never_reach_training():
    # demos_task9 of an earlier session covered init states 0-49; 40-49 are the evaluation's
    demos = [{"init_state": s, "id": i} for i, s in enumerate([0, 39, 40, 49, 50, 45])]
    kept, dropped = without_heldout_init_states(iter(demos), range(40, 50))
    assert [d["id"] for d in kept] == [0, 1, 4]
    assert dropped == 3
    assert without_heldout_init_states([], range(40, 50)) == ([], 0)


def _demos(rng, n=2, T=6):
    return [
        {
            "language_instruction": text,
            "proprio": rng.normal(size=(T, 16)),
            "object_state": rng.normal(size=(T, 3)),
            "actions": rng.uniform(-0.5, 0.5, (T, 7)),
        }
        for text in ("open it", "close it")
        for _ in range(n)
    ]


def test_chunk_action_error_is_the_per_task_mse_of_the_mean_chunk():
    torch.manual_seed(0)
    samples = chunk_samples(_demos(np.random.default_rng(0)), chunk=3, object_dim=4)
    model = SmallVLA(chunk=3, object_dim=4, hidden=8)
    mean = model.state_distribution(samples.state, samples.instructions, samples.which).mean.detach()
    err = chunk_action_error(model, samples, batch_size=5)  # batches that split the tasks
    for k, text in enumerate(samples.instructions):
        rows = samples.which == k
        assert err[text] == pytest.approx(float(((mean[rows] - samples.targets[rows]) ** 2).mean()), rel=1e-5)
    first = chunk_action_error(model, samples, horizon=1)
    rows = samples.which == 0
    expected = float(((mean[rows, :1] - samples.targets[rows, :1]) ** 2).mean())
    assert first[samples.instructions[0]] == pytest.approx(expected, rel=1e-5)


def test_observation_noise_spares_constant_features_and_training_lowers_the_error():
    torch.manual_seed(0)
    samples = chunk_samples(_demos(np.random.default_rng(1), n=4), chunk=2, object_dim=8)  # 5 zero-padded dims
    model = SmallVLA(chunk=2, object_dim=8, hidden=16)
    fit_feature_scaling(model, samples)
    assert torch.all(model.feat_std[-5:] == 1e-3)
    before = chunk_action_error(model, samples)
    seen = []
    original = model.state_distribution

    def spy(state, *args):
        seen.append(state.clone())
        return original(state, *args)

    model.state_distribution = spy
    fit_small_vla(model, samples, iterations=60, batch_size=8, lr=1e-2, obs_noise=0.5, log=lambda *_: None)
    assert all(torch.all(s[:, -5:] == 0) for s in seen)  # padding stays exactly zero
    assert not any(torch.equal(s, samples.state[: len(s)]) for s in seen)
    after = chunk_action_error(model, samples)
    assert all(after[t] < before[t] for t in before)


def test_fit_calls_back_every_n_steps_and_after_the_last_in_eval_mode():
    torch.manual_seed(0)
    samples = chunk_samples(_demos(np.random.default_rng(2)), chunk=2, object_dim=4)
    model = SmallVLA(chunk=2, object_dim=4, hidden=8)
    calls = []
    fit_small_vla(
        model,
        samples,
        iterations=7,
        batch_size=4,
        callback=lambda step, m: calls.append((step, m.training)),
        callback_every=3,
        log=lambda *_: None,
    )
    assert calls == [(3, False), (6, False), (7, False)]

"""WMRLGRPOTrainer end to end on a CPU: a tiny Qwen2 built here, the vowels domain registered as a
plugin, a miscalibrated world model; advantages checked against WMRL's engine, resume checked exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow


def _trainer(model_dir, out_dir, *, max_steps=3, save_steps=100, **wmrl_overrides):
    from wmrl_trl import WMRLGRPOTrainer
    from wmrl_trl.testing import tiny_grpo_config

    from wmrl_core.vowels import vowels_config

    args = tiny_grpo_config(str(out_dir), max_steps=max_steps, save_steps=save_steps, save_strategy="steps")
    trainer = WMRLGRPOTrainer.from_config(
        vowels_config(**wmrl_overrides),
        model=str(model_dir),
        args=args,
        render=lambda t: t.description,
        keep_history=True,
    )
    return trainer, trainer.environment


def test_trains_on_fused_advantages_and_executes_only_anchors(tiny_qwen2, tmp_path):
    from wmrl_core.calibration import RewardCalibrator
    from wmrl_core.fusion import FusionSettings, build_fuser, fuse_step

    trainer, env = _trainer(tiny_qwen2, tmp_path / "run", max_steps=3)
    trainer.train()
    seen = trainer.wmrl_history
    assert [s["step"] for s in seen] == [1, 2, 3]
    # 2 groups of 4 a step at anchors.fraction 0.5: one group executed per step, the other only predicted
    assert [sum(s["anchor_groups"]) for s in seen] == [1, 1, 1]
    assert env.executed == 3 * 4
    for s in seen:
        real = np.asarray(s["real_rewards"], dtype=float)
        anchor_rows = np.repeat(np.asarray(s["anchor_groups"]), 4)
        assert np.isfinite(real[anchor_rows]).any() and np.isnan(real[~anchor_rows]).all()
    assert any(np.abs(s["advantages"]).max() > 0 for s in seen)
    pairs = sum(
        int(np.sum(np.isfinite(np.asarray(s["wm_rewards"], float)) & np.isfinite(np.asarray(s["real_rewards"], float))))
        for s in seen
    )
    assert seen[-1]["record"]["calibration/n_pairs"] == pairs > 0  # every anchor pair with both rewards is kept
    for key in ("fusion/w_real", "fusion/w_world_model", "fusion/n_effective"):
        assert np.isfinite(seen[-1]["record"][key]), key
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"wmrl/fusion/w_world_model", "wmrl/time/execution_s"} <= logged

    # WMRL's own engine, replayed on the same rewards from a fresh state, gives the same advantages
    from wmrl_core.vowels import vowels_config

    cfg = vowels_config()
    calibrator, fuser = RewardCalibrator(), build_fuser(cfg.fusion.method, cfg.fusion)
    settings = FusionSettings(aggregation="sequence_mean", scale_advantages=True)
    for s in seen:
        result = fuse_step(
            world_model_rewards=np.asarray(s["wm_rewards"], dtype=float),
            real_rewards=np.asarray(s["real_rewards"], dtype=float),
            group_ids=np.arange(8) // 4,
            anchor_groups=np.asarray(s["anchor_groups"]),
            token_counts=np.asarray(s["token_counts"], dtype=float),
            calibrator=calibrator,
            fuser=fuser,
            settings=settings,
            step=s["step"],
        )
        calibrator, fuser = result.calibrator, result.fuser
        np.testing.assert_allclose(result.advantages, s["advantages"], rtol=0, atol=1e-12)


def test_resume_is_exact(tiny_qwen2, tmp_path):
    straight, _ = _trainer(tiny_qwen2, tmp_path / "straight", max_steps=4, save_steps=2)
    straight.train()
    first, _ = _trainer(tiny_qwen2, tmp_path / "split", max_steps=4, save_steps=2)
    first.train()  # writes checkpoint-2 and checkpoint-4
    resumed, _ = _trainer(tiny_qwen2, tmp_path / "split", max_steps=4, save_steps=2)
    resumed.train(resume_from_checkpoint=str(tmp_path / "split" / "checkpoint-2"))
    assert resumed.wmrl_step == straight.wmrl_step == 4
    for (name, a), (_, b) in zip(straight.model.named_parameters(), resumed.model.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    assert resumed.last_wmrl["advantages"] == straight.last_wmrl["advantages"]


def test_refuses_what_it_cannot_honour(tmp_path):
    from wmrl_trl.testing import tiny_grpo_config
    from wmrl_trl.trainer import check_trl_args

    from wmrl_core.errors import ConfigError

    args = tiny_grpo_config(str(tmp_path), num_iterations=2, loss_type="dr_grpo", beta=0.04)
    with pytest.raises(ConfigError) as err:
        check_trl_args(args)
    message = str(err.value)
    assert "beta=0.04" in message and "num_iterations=2" in message and "set beta=0.0" in message
    assert "loss_type='dr_grpo'" in message and "'grpo'" in message


def test_term_advantages_rebuild_the_exact_multi_term_loss_at_any_ratio():
    """sign(c_k) * token_mean(clip(r, a_k)) summed over terms, with a_k = |c_k| (Z_all/Z_k) 1[R_k] A_k
    (what the trainer hands TRL per term), is WMRL's multi-term loss, clipping active included."""
    from wmrl_core.fusion import LossTerm, effective_advantages, multi_term_loss
    from wmrl_core.grpo import aggregate, clipped_surrogate

    g = torch.Generator().manual_seed(0)
    n, t = 8, 5
    mask = (torch.rand(n, t, generator=g) > 0.3).float()
    mask[:, 0] = 1
    log_probs = torch.randn(n, t, generator=g).requires_grad_(True)
    old = log_probs.detach() + 0.5 * torch.randn(n, t, generator=g)  # ratios far from 1: clipping active
    anchors = np.arange(n) < 4
    terms = [
        LossTerm(1.0, np.random.default_rng(1).normal(size=n), anchors),
        LossTerm(0.6, np.random.default_rng(2).normal(size=n), np.ones(n, dtype=bool)),
        LossTerm(-0.6, np.random.default_rng(2).normal(size=n), anchors),
    ]
    exact = multi_term_loss(terms, log_probs, old, mask, clip_eps=0.2, aggregation="token_mean")
    counts = mask.sum(-1).numpy()
    rebuilt = sum(
        float(np.sign(term.coef))
        * aggregate(
            clipped_surrogate(
                log_probs,
                old,
                torch.as_tensor(np.sign(term.coef) * effective_advantages([term], counts, "token_mean")[0]),
                0.2,
            ),
            mask,
            "token_mean",
        )
        for term in terms
    )
    assert torch.allclose(exact, rebuilt, atol=1e-6)
    (g_exact,) = torch.autograd.grad(exact, log_probs)
    (g_rebuilt,) = torch.autograd.grad(rebuilt, log_probs)
    assert torch.allclose(g_exact, g_rebuilt, atol=1e-6)


def test_off_policy_passes_use_one_trl_loss_per_term(tiny_qwen2, tmp_path):
    from wmrl_trl import WMRLGRPOTrainer
    from wmrl_trl.testing import tiny_grpo_config

    from wmrl_core.grpo import aggregate, clipped_surrogate
    from wmrl_core.vowels import vowels_config

    args = tiny_grpo_config(str(tmp_path), max_steps=4, num_iterations=2, loss_type="dapo", epsilon_high=0.2)
    trainer = WMRLGRPOTrainer.from_config(
        vowels_config(), model=str(tiny_qwen2), args=args, render=lambda t: t.description
    )
    assert trainer.wmrl_multi_term
    checked = []
    original = trainer._compute_loss

    def spy(model, inputs):
        loss = original(model, inputs)
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        with torch.no_grad():
            logps, _, _ = trainer._get_per_token_logps_and_entropies(
                model, ids, attention, inputs["completion_ids"].size(1)
            )
            old = inputs["old_per_token_logps"]
            mask = inputs["completion_mask"].float()
            expected = sum(
                inputs["wmrl_term_signs"][0, k]
                * aggregate(clipped_surrogate(logps, old, inputs["wmrl_term_advantages"][:, k], 0.2), mask)
                for k in range(inputs["wmrl_term_advantages"].shape[1])
            )
        checked.append((float(loss.detach()), float(expected), float((logps - old).abs().max())))
        return loss

    trainer._compute_loss = spy
    trainer.train()
    assert len(checked) == 4 and trainer.wmrl_step == 2  # two generation batches, two passes each
    for loss, expected, _ in checked:
        assert abs(loss - expected) < 1e-5
    assert max(gap for *_, gap in checked) > 0  # later passes are off-policy indeed

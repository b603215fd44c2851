"""The fusion interface: the table of methods, the engine ``fuse_step``, effective advantages.

The central check: on-policy (probability ratio 1) the GRPO loss with the effective advantages
has the same gradient as the exact multi-term fused loss, for every method and aggregation,
KL included; off-policy (ratio != 1, clipping active) it does not, which is why the exact loss
stays available.
"""

import dataclasses
import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from wmrl_core.calibration import RewardCalibrator
from wmrl_core.config import FusionConfig, load_config
from wmrl_core.errors import ConfigError
from wmrl_core.fusion import (
    Fuser,
    FusionSettings,
    LossTerm,
    PolicyGradients,
    build_fuser,
    effective_advantage_loss,
    effective_advantages,
    fuse_step,
    multi_term_loss,
    registered_fusers,
)
from wmrl_core.plugins import get_plugin_manager
from wmrl_core.step import update_step

ROOT = Path(__file__).resolve().parents[1]
AGGREGATIONS = ("token_mean", "sequence_mean")
FUSERS = registered_fusers()
METHODS = FUSERS.names()
SMALL_WINDOWS = {"lambda_window": 2, "min_pairs": 2, "lambda_level": None}  # weights > 0 within the few steps below
COMPONENTS = ["environment.name=synthetic-bandit", "policy.name=tabular-softmax", "mode=real"]


def test_effective_advantages_hand_computed_for_the_rectified_plan():
    """Rows 0-1 anchors (2 and 1 tokens), rows 2-3 not (1 and 4 tokens); lambda = 0.5.
    token_mean: Z_all = 8, Z_A = 3; A~_i = lam A^C_i + 1[anchor] (8/3)(A^R_i - lam A^C_i).
    sequence_mean: Z_all = 4, Z_A = 2."""
    a_r = np.array([1.0, -1.0, 0.0, 0.0])
    a_c = np.array([2.0, -2.0, 1.0, -1.0])
    anchors = np.array([True, True, False, False])
    every = np.ones(4, dtype=bool)
    terms = [LossTerm(1.0, a_r, anchors), LossTerm(0.5, a_c, every), LossTerm(-0.5, a_c, anchors)]
    counts = np.array([2, 1, 1, 4])
    adv, w = effective_advantages(terms, counts, "token_mean")
    np.testing.assert_allclose(adv, [1.0 + 8 / 3 * (1 - 1), -1.0 + 8 / 3 * (-1 + 1), 0.5, -0.5])
    np.testing.assert_allclose(w, [8 / 3 + 0.5 - 0.5 * 8 / 3] * 2 + [0.5, 0.5])
    adv, w = effective_advantages(terms, counts, "sequence_mean")
    np.testing.assert_allclose(adv, [1.0 + 2 * (1 - 1), -1.0 + 2 * (-1 + 1), 0.5, -0.5])
    np.testing.assert_allclose(w, [2 + 0.5 - 1.0] * 2 + [0.5, 0.5])
    # a convex combination: a positive scale per stream, w_S Z_all / Z_S
    adv, w = effective_advantages([LossTerm(0.25, a_r, anchors), LossTerm(0.75, a_c, ~anchors)], counts, "token_mean")
    np.testing.assert_allclose(adv, [0.25 * 8 / 3, -0.25 * 8 / 3, 0.75 * 8 / 5, -0.75 * 8 / 5])
    np.testing.assert_allclose(w, [0.25 * 8 / 3] * 2 + [0.75 * 8 / 5] * 2)


def test_a_term_over_no_tokens_contributes_nothing():
    adv, w = effective_advantages([LossTerm(1.0, np.ones(2), np.array([True, False]))], np.array([0, 3]), "token_mean")
    assert adv.tolist() == [0.0, 0.0] and w.tolist() == [0.0, 0.0]


class TokenPolicy(torch.nn.Module):
    """Per-position softmax over 3 tokens, float64, rollouts of different lengths."""

    def __init__(self, seed: int):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.theta = torch.nn.Parameter(torch.randn(4, 3, generator=gen, dtype=torch.float64))

    def log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(self.theta, -1)  # (T, V)
        return logp.gather(1, tokens.T).T  # (N, T)


def _batch(seed: int):
    """8 groups of 4 rollouts, lengths 1-4, two anchor groups; rewards with some NaN."""
    rng = np.random.default_rng(seed)
    n_groups, g = 8, 4
    group_ids = np.repeat(np.arange(n_groups), g)
    n = group_ids.size
    tokens = torch.as_tensor(rng.integers(0, 3, (n, 4)))
    lengths = rng.integers(1, 5, n)
    mask = torch.as_tensor(np.arange(4)[None, :] < lengths[:, None], dtype=torch.float64)
    real = rng.normal(size=n)
    wm = real + rng.normal(scale=0.5, size=n)
    anchor_groups = np.zeros(n_groups, dtype=bool)
    anchor_groups[[1, 5]] = True
    real = np.where(anchor_groups[group_ids], real, np.nan)
    wm[3] = np.nan  # a world-model fault: dropped, never 0
    solutions = [int(t) for t in tokens[:, 0]]
    return group_ids, tokens, mask, real, wm, anchor_groups, solutions


def _group_gradient(tokens: torch.Tensor, mask: torch.Tensor, aggregation: str) -> PolicyGradients:
    """Per-group gradients of the sampling policy, for the fusers that weigh by them."""
    return PolicyGradients(TokenPolicy(0), tokens, mask, aggregation)


def _section(method: str) -> FusionConfig:
    """``method``'s ``fusion`` section with those of :data:`SMALL_WINDOWS` that are its settings."""
    known = {f.name for f in dataclasses.fields(FUSERS.get(method).settings_class())}
    return FusionConfig(method=method, kwargs={k: v for k, v in SMALL_WINDOWS.items() if k in known})


def _fitted(method: str, aggregation: str):
    """A calibrator and fuser of ``method`` after three earlier steps (so lambda and rho^2 are not 0)."""
    calibrator, fuser = RewardCalibrator(), build_fuser(method, _section(method))
    settings = FusionSettings(aggregation=aggregation)
    for s in range(3):
        group_ids, tokens, mask, real, wm, anchors, solutions = _batch(100 + s)
        anchors = np.ones_like(anchors)  # every group real: many pairs
        real = np.where(np.isnan(real), wm - 0.1, real)
        out = fuse_step(
            world_model_rewards=wm,
            real_rewards=real,
            group_ids=group_ids,
            anchor_groups=anchors,
            token_counts=mask.sum(-1).numpy(),
            calibrator=calibrator,
            fuser=fuser,
            settings=settings,
            step=s,
            solutions=solutions,
            group_gradient=_group_gradient(tokens, mask, aggregation),
        )
        calibrator, fuser = out.calibrator, out.fuser
    return calibrator, fuser, settings


def _gradients(method: str, aggregation: str, shift: float):
    calibrator, fuser, settings = _fitted(method, aggregation)
    group_ids, tokens, mask, real, wm, anchors, solutions = _batch(7)
    fused = fuse_step(
        world_model_rewards=wm,
        real_rewards=real,
        group_ids=group_ids,
        anchor_groups=anchors,
        token_counts=mask.sum(-1).numpy(),
        calibrator=calibrator,
        fuser=fuser,
        settings=settings,
        step=3,
        solutions=solutions,
        group_gradient=_group_gradient(tokens, mask, aggregation),
    )
    sampler, learner, reference = TokenPolicy(0), TokenPolicy(0), TokenPolicy(1)
    with torch.no_grad():
        learner.theta.add_(shift * torch.randn(4, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64))
        old, ref = sampler.log_probs(tokens), reference.log_probs(tokens)
    kwargs = dict(clip_eps=0.2, kl_coef=0.1, ref_log_probs=ref, aggregation=aggregation)
    exact = multi_term_loss(fused.terms, learner.log_probs(tokens), old, mask, **kwargs)
    (g_exact,) = torch.autograd.grad(exact, learner.theta)
    adv = torch.as_tensor(fused.advantages, dtype=torch.float64)
    weights = torch.as_tensor(fused.row_weights, dtype=torch.float64)
    effective = effective_advantage_loss(learner.log_probs(tokens), old, adv, weights, mask, **kwargs)
    (g_eff,) = torch.autograd.grad(effective, learner.theta)
    return fused, g_exact, g_eff


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("method", METHODS)
def test_on_policy_the_effective_advantage_loss_has_the_fused_loss_gradient(method, aggregation):
    fused, g_exact, g_eff = _gradients(method, aggregation, shift=0.0)
    if method not in ("pooled", "anchors_only"):  # the world model gets weight: not a single-stream check
        assert fused.record["fusion/w_world_model"] > 0.05
    assert g_exact.abs().max() > 1e-3
    torch.testing.assert_close(g_eff, g_exact, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_off_policy_only_mixed_sign_plans_need_the_exact_loss(method):
    """Ratios far from 1 (parameters moved by 0.5 sd), clipping active. A positive scale per
    row commutes with clipping, min(rho cA, clip(rho) cA) = c min(rho A, clip(rho) A) for c > 0,
    so convex combinations stay exact; rectified's rows mix A^R and -lambda A^C, whose clipping
    the single loss cannot reproduce."""
    fused, g_exact, g_eff = _gradients(method, "token_mean", shift=0.5)
    relative = float((g_eff - g_exact).norm() / g_exact.norm())
    print(f"{method}: off-policy relative gradient difference {relative:.3g}")
    if any(term.coef < 0 for term in fused.terms):
        assert relative > 1e-3
    else:
        assert relative < 1e-12


@pytest.mark.parametrize("method", METHODS)
def test_every_method_is_a_fuser_that_checkpoints_itself(method):
    """A fuser rebuilt from its state_dict plans the next step exactly as the original does."""
    calibrator, fuser, settings = _fitted(method, "token_mean")
    assert isinstance(fuser, Fuser)
    restored = build_fuser(method, _section(method))
    restored.load_state_dict(fuser.state_dict())
    group_ids, tokens, mask, real, wm, anchors, solutions = _batch(9)
    common = dict(
        group_gradient=_group_gradient(tokens, mask, "token_mean"),
        world_model_rewards=wm,
        real_rewards=real,
        group_ids=group_ids,
        anchor_groups=anchors,
        token_counts=mask.sum(-1).numpy(),
        calibrator=calibrator,
        settings=settings,
        step=4,
        solutions=solutions,
    )
    a, b = fuse_step(fuser=fuser, **common), fuse_step(fuser=restored, **common)
    np.testing.assert_array_equal(a.advantages, b.advantages)
    assert a.record == pytest.approx(b.record, nan_ok=True)
    spec = FUSERS.get(method)
    if spec.plugin == "wmrl_core.fusion.plugin":  # WMRL's own: one module each in wmrl_core/fusion/
        module = str(spec.entry_point).partition(":")[0]
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file()


def test_fuse_step_leaves_its_inputs_alone():
    calibrator, fuser, settings = _fitted("rectified", "token_mean")
    before = (calibrator.state_dict(), fuser.state_dict())
    group_ids, _, mask, real, wm, anchors, solutions = _batch(11)
    out = fuse_step(
        world_model_rewards=wm,
        real_rewards=real,
        group_ids=group_ids,
        anchor_groups=anchors,
        token_counts=mask.sum(-1).numpy(),
        calibrator=calibrator,
        fuser=fuser,
        settings=settings,
        step=5,
    )
    assert (calibrator.state_dict(), fuser.state_dict()) == before
    assert out.calibrator.n_pairs_ == calibrator.n_pairs_ + int(np.isfinite(real).sum())
    assert out.fuser.state_dict() != before[1]  # the new state holds this step's anchor groups


def test_update_step_is_short_and_names_no_method():
    source = inspect.getsource(update_step)
    assert len(source.splitlines()) <= 60
    for name in METHODS:
        assert name not in source, name


def test_the_method_docs_and_the_cli_list_every_method():
    docs = (ROOT / "docs/method.md").read_text()
    from wmrl_core.cli import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()  # type: ignore[union-attr]
    for name in registered_fusers(get_plugin_manager(entry_points=False)).names():  # WMRL's own
        assert f"| `{name}` |" in docs, f"docs/method.md's table of fusion methods lacks `{name}`"
        assert name in help_text, name


def test_an_unknown_method_is_refused_with_the_table_and_a_suggestion():
    with pytest.raises(ConfigError, match=re.escape("did you mean inverse_variance?")) as err:
        load_config(None, [*COMPONENTS, "fusion.method=inverse_varaince"])
    for name in METHODS:
        assert name in str(err.value)


def test_old_section_names_are_read_with_a_warning_naming_the_new_one():
    with pytest.warns(FutureWarning) as caught:
        cfg = load_config(None, [*COMPONENTS, "denoise.method=inverse_variance", "debias.calibrator=smoothed"])
    messages = sorted(str(w.message) for w in caught)
    assert "`debias` is now called `calibration`" in messages[0] and "`denoise` is now called `fusion`" in messages[1]
    assert cfg.fusion.method == "inverse_variance" and cfg.calibration.calibrator == "smoothed"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_config(None, [*COMPONENTS, "fusion.method=pooled"])
    assert cfg.fusion.method == "pooled"
    # a key under both names: the new name wins
    with pytest.warns(FutureWarning):
        cfg = load_config(None, [*COMPONENTS, "denoise.method=pooled", "fusion.method=rectified"])
    assert cfg.fusion.method == "rectified" and cfg.fusion.kwargs["lambda_window"] == 20


def test_update_step_with_effective_advantages_moves_the_policy_as_the_exact_loss_does():
    from tests.test_step import TwoArmPolicy, config, rollouts
    from wmrl_core.step import ScoredStep, TrainState

    thetas = []
    for loss in ("exact", "effective"):
        cfg, policy = config("wmrl", method="rectified", loss=loss, lambda_level=None), TwoArmPolicy()
        state = TrainState.create(cfg, policy)
        state.fuser.update(
            np.array([1.0, -1.0, 0.5, -0.5]), np.array([2.0, -2.0, 1.0, -1.0]), groups=np.array([0, 0, 1, 1])
        )
        scored = ScoredStep(
            rollouts(),
            anchor_groups=np.array([True, False]),
            wm_rewards=np.array([0.8, 0.2, 0.1, 0.7]),
            real_rewards=np.array([1.0, 0.0, np.nan, np.nan]),
        )
        record = update_step(policy, cfg, state, scored, step=1).record
        assert record["fusion/lambda"] > 0
        thetas.append(policy.theta.detach().clone())
    torch.testing.assert_close(thetas[0], thetas[1], rtol=1e-6, atol=1e-7)


def test_an_unknown_fusion_loss_is_refused():
    with pytest.raises(ConfigError, match="fusion.loss"):
        load_config(None, [*COMPONENTS, "fusion.loss=approximate"])

"""Shrinkage fusion and per-group gradients: the formulas by hand, the estimator's behaviour on
a world model that agrees with the anchors, one that is confidently wrong, and one independent of them."""

import numpy as np
import pytest
import torch

from wmrl_core.fusion import FusionInputs, PolicyGradients, RectifiedFuser, ShrinkageFuser
from wmrl_core.fusion.gradients import MissingGradientsError, count_sketch
from wmrl_core.fusion.rectified import gradient_slope_terms
from wmrl_core.fusion.shrinkage import (
    WindowMoments,
    shrinkage_alpha,
    shrinkage_mse,
    squared_mean_norm,
    trace_covariance,
    window_moments,
)
from wmrl_core.grpo import group_advantages


def test_trace_covariance_hand_computed():
    """p = (1, -0.5, 0.5), q = (0, 0.1, 0.9), s = (4, 1, 2), k = 2, u = 18:
    anchors [1*0*4 + (1*0.1 + -0.5*0)*1 + -0.5*0.1*2]/2 = (0.1 - 0.1)/2 = 0; others 0.5*0.9*2/18 = 0.05."""
    p, q = np.array([1.0, -0.5, 0.5]), np.array([0.0, 0.1, 0.9])
    assert trace_covariance(p, q, 4.0, 1.0, 2.0, k=2, u=18) == pytest.approx(0.05)
    assert trace_covariance(p, p, 4.0, 1.0, 2.0, k=2, u=18) == pytest.approx((4 - 1 + 0.5) / 2 + 0.5 / 18)
    assert trace_covariance(p, q, 4.0, 1.0, 2.0, k=2, u=0) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="anchor groups"):
        trace_covariance(p, q, 4.0, 1.0, 2.0, k=0, u=1)


def test_shrinkage_alpha_hand_computed_and_minimises_the_mse():
    """Rectified at lambda = 0 (p = (1, 0, 0)) toward calibrated (t = (0, .1, .9)), k = 2, u = 18,
    s = (4, 1, 2), |b|^2 = 0.5. d = (-1, .1, .9): Var D = [4 - .2 + .02]/2 + .81*2/18 = 1.91 + .09 = 2.0,
    Cov(P, D) = [-4 + .1]/2 = -1.95, E D = 1.0 b: alpha* = 1.95 / (0.5 + 2.0) = 0.78."""
    m = WindowMoments(s_rr=4.0, s_rc=1.0, s_cc=2.0, bias2=0.5, groups=10)
    p, t = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.1, 0.9])
    alpha = shrinkage_alpha(p, t, m, k=2, u=18)
    assert alpha == pytest.approx(0.78)
    grid = np.linspace(0, 1, 101)
    assert grid[np.argmin([shrinkage_mse(a, p, t, m, 2, 18) for a in grid])] == pytest.approx(0.78)
    assert shrinkage_mse(0.0, p, t, m, 2, 18) == pytest.approx(2.0)  # anchors alone: s_RR / k
    # a large bias sends alpha to 0, no bias and a noisy P to 1 (clipped)
    assert shrinkage_alpha(p, t, WindowMoments(4.0, 1.0, 2.0, 1e6, 10), 2, 18) < 1e-5
    assert shrinkage_alpha(p, t, WindowMoments(40.0, 1.0, 0.1, 0.0, 10), 2, 18) == 1.0
    assert shrinkage_alpha(p, p, m, 2, 18) == 0.0  # the two updates agree: nothing to shrink toward


def test_window_moments_hand_computed():
    """Three groups in 2-D. h^R = (1,0), (0,1), (2,1); h^C = (1,1), (1,1), (1,1).
    Centred h^R: (0,-2/3), (-1,1/3), (1,1/3): s_RR = (4/9 + 1 + 1/9 + 1 + 1/9)/2 = (8/3)/2 = 4/3;
    h^C is constant: s_CC = s_RC = 0. d = h^C - h^R = (0,1), (1,0), (-1,0): sum (0,1), |sum|^2 = 1,
    sum |d|^2 = 3: (1 - 3)/(3*2) < 0, floored at 0."""
    h_r = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    h_c = np.ones((3, 2))
    m = window_moments(h_r, h_c)
    assert (m.s_rr, m.s_rc, m.s_cc, m.bias2, m.groups) == pytest.approx((4 / 3, 0.0, 0.0, 0.0, 3))
    # a common offset of (3, 0) between the streams is the bias: |b|^2 = 9 exactly
    m = window_moments(h_r, h_r + [3.0, 0.0])
    assert m.bias2 == pytest.approx(9.0) and m.s_rc == pytest.approx(m.s_rr)
    with pytest.raises(ValueError, match="at least 2"):
        window_moments(h_r[:1], h_c[:1])


def test_bias_estimate_is_unbiased_over_draws():
    rng = np.random.default_rng(0)
    b = np.array([0.3, -0.4])  # |b|^2 = 0.25
    draws = [squared_mean_norm(b + rng.normal(size=(4, 2))) for _ in range(20000)]
    assert float(np.mean(draws)) == pytest.approx(0.25, abs=0.03)  # sd of the mean about 0.007
    assert min(draws) < 0  # unfloored; window_moments floors it


def test_gradient_slope_terms_hand_computed():
    """h^R = (1,0), (3,0); h^C = (0,1), (2,1): centred (-1,0),(1,0) and (-1,0),(1,0): r = (1, 1), c = (1, 1)."""
    r, c = gradient_slope_terms(np.array([[1.0, 0.0], [3.0, 0.0]]), np.array([[0.0, 1.0], [2.0, 1.0]]))
    assert r.tolist() == [1.0, 1.0] and c.tolist() == [1.0, 1.0]


def test_count_sketch_keeps_inner_products_in_expectation_and_is_fixed_by_its_seed():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=500), rng.normal(size=500)
    y = 0.6 * x + 0.8 * y
    pieces_x, pieces_y = [torch.tensor(x[:300]), torch.tensor(x[300:])], [torch.tensor(y[:300]), torch.tensor(y[300:])]
    estimates = [count_sketch(pieces_x, 64, seed) @ count_sketch(pieces_y, 64, seed) for seed in range(300)]
    assert np.mean(estimates) == pytest.approx(x @ y, rel=0.05)
    np.testing.assert_array_equal(count_sketch(pieces_x, 64, 7), count_sketch(pieces_x, 64, 7))
    with pytest.raises(ValueError, match="dimension"):
        count_sketch(pieces_x, 0)


class Softmax(torch.nn.Module):
    """One categorical choice over 3 arms; its score vector is e_y - pi."""

    def __init__(self):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.tensor([0.2, -0.1, 0.5], dtype=torch.float64))

    def log_probs(self, arms: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.theta, -1)[arms].unsqueeze(-1)


def test_policy_gradients_are_the_analytic_group_gradients():
    """h(A) = -mean_i A_i (e_{y_i} - pi) over the rows (sequence_mean, one token per row)."""
    policy, arms = Softmax(), torch.tensor([0, 2, 2, 1])
    pi = torch.softmax(policy.theta.detach(), -1).numpy()
    adv, rows = np.array([1.0, -1.0, 0.5, 2.0]), np.array([True, True, True, False])
    gradients = PolicyGradients(policy, arms, torch.ones(4, 1, dtype=torch.float64), "sequence_mean")
    expected = -np.mean([a * (np.eye(3)[y] - pi) for a, y in zip(adv[:3], [0, 2, 2], strict=True)], axis=0)
    np.testing.assert_allclose(gradients(adv, rows), expected, atol=1e-12)
    sketched = PolicyGradients(policy, arms, torch.ones(4, 1, dtype=torch.float64), "sequence_mean", sketch_dim=2)
    assert sketched(adv, rows).shape == (2,)


def _step(real, calibrated_rewards, anchors, group_ids, gradient, share):
    advantages = group_advantages(np.where(anchors[group_ids], real, calibrated_rewards), group_ids)
    return FusionInputs(
        advantages=advantages,
        calibrated_advantages=group_advantages(calibrated_rewards, group_ids),
        is_anchor=anchors[group_ids],
        group_ids=group_ids,
        anchor_share=share,
        n_real=int(anchors[group_ids].sum()),
        n_world_model=int((~anchors[group_ids]).sum()),
        pairs=(np.zeros(0), np.zeros(0), np.zeros(0)),
        calibrated=True,
        solutions=None,
        group_gradient=gradient,
    )


def _alphas(world_model: str, steps: int = 30, seed: int = 0):
    """A bandit of 5 arms per group (each group its own task, rollouts its arms in a random order);
    rewards are arm values; the world model ranks them as told."""
    rng = np.random.default_rng(seed)
    fuser = ShrinkageFuser(rectified=RectifiedFuser(window=20, level=0.999), toward="calibrated", window=20)
    n_groups, g, arms = 10, 5, 5
    alphas = []
    for _ in range(steps):
        group_ids = np.repeat(np.arange(n_groups), g)
        values = rng.normal(size=(n_groups, arms))
        picks = np.stack([rng.permutation(arms) for _ in range(n_groups)])
        real = np.take_along_axis(values, picks, 1).ravel()
        if world_model == "agrees":
            calibrated = real + 0.1 * rng.normal(size=real.size)
        elif world_model == "decoy":  # ranks well but with one arm, the first, confidently on top
            calibrated = real + 5.0 * (picks.ravel() == 0)
        else:
            calibrated = rng.normal(size=real.size)
        anchors = np.zeros(n_groups, dtype=bool)
        anchors[rng.choice(n_groups, 3, replace=False)] = True
        tokens = torch.as_tensor(picks.ravel() + arms * group_ids)  # arm y of group j: its own coordinate
        policy = _Table(n_groups * arms)
        gradient = PolicyGradients(policy, tokens, torch.ones(tokens.numel(), 1, dtype=torch.float64), "sequence_mean")
        step = _step(real, calibrated, anchors, group_ids, gradient, anchors.mean())
        alphas.append(fuser.plan(step).extra["fusion/alpha"])
        fuser.fit(step)
    return alphas


class _Table(torch.nn.Module):
    """A logit per (task, arm): score vectors of distinct tasks are orthogonal, as in the bandit."""

    def __init__(self, n: int):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.zeros(n, dtype=torch.float64))

    def log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.theta[tokens].unsqueeze(-1) - torch.logsumexp(self.theta, 0)


def test_alpha_follows_what_the_anchors_show():
    agrees, decoy, independent = (np.mean(_alphas(w)[10:]) for w in ("agrees", "decoy", "independent"))
    print(f"alpha late: agrees {agrees:.2f}, decoy {decoy:.2f}, independent {independent:.2f}")
    assert agrees > 0.8
    assert independent == 0.0  # the test of the world model never passes
    assert decoy < agrees - 0.3


def test_shrinkage_refuses_a_trainer_without_gradients_and_roundtrips():
    group_ids = np.repeat(np.arange(4), 3)
    anchors = np.array([True, True, False, False])
    real = np.arange(12, dtype=float) % 3
    step = _step(real, real.copy(), anchors, group_ids, None, 0.5)
    fuser = ShrinkageFuser(rectified=RectifiedFuser(), toward="inverse_variance")
    fuser.plan(step)  # planning needs no gradients
    with pytest.raises(MissingGradientsError, match="fusion.method=rectified"):
        fuser.fit(step)
    with pytest.raises(ValueError, match="toward"):
        ShrinkageFuser(rectified=RectifiedFuser(), toward="mean")
    tokens = torch.as_tensor(np.arange(12) % 3 + 3 * group_ids)
    gradient = PolicyGradients(_Table(12), tokens, torch.ones(12, 1, dtype=torch.float64), "sequence_mean")
    fitted = ShrinkageFuser(rectified=RectifiedFuser(), toward="inverse_variance")
    fitted.fit(_step(real, real.copy(), anchors, group_ids, gradient, 0.5))
    restored = ShrinkageFuser(rectified=RectifiedFuser(), toward="inverse_variance")
    restored.load_state_dict(fitted.state_dict())
    assert len(restored._gradients) == 2
    np.testing.assert_array_equal(restored._gradients[0][0], fitted._gradients[0][0])


def test_trainers_without_gradients_refuse_gradient_fusers_when_built():
    from wmrl_core.config import FusionConfig
    from wmrl_core.errors import ConfigError
    from wmrl_core.fusion import build_fuser
    from wmrl_core.fusion.gradients import refuse_gradient_fusers

    with pytest.raises(ConfigError, match="fusion.method=rectified"):
        refuse_gradient_fusers(build_fuser("shrinkage", FusionConfig()), "TRL")
    with pytest.raises(ConfigError, match="lambda_moments=solution"):
        refuse_gradient_fusers(
            build_fuser("rectified", FusionConfig(method="rectified", kwargs={"lambda_moments": "gradient"})), "TRL"
        )
    refuse_gradient_fusers(build_fuser("rectified", FusionConfig()), "TRL")  # advantage moments: fine

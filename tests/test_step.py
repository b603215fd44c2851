"""One trainer step as a unit: a hand-written two-logit policy, fixed rewards, no environment.

With logits ``theta = (0.2, 0)`` and rollouts sampled at ``p = 0.5`` per arm, the ratios are
``rho_0 = 2 sigmoid(0.2)`` and ``rho_1 = 2 (1 - sigmoid(0.2))`` (inside the 0.2 clip), so a
group rewarding arm 0 over arm 1 (advantages +1, -1) has token-mean GRPO loss
``(-rho_0 + rho_1) / 2 = -tanh(0.1)``; a group with the opposite order has ``+tanh(0.1)``.
"""

import dataclasses
import math

import numpy as np
import pytest
import torch

from wmrl_core.checkpoint import LEGACY_KEYS, current_keys
from wmrl_core.config import FusionConfig, TrainConfig
from wmrl_core.step import ScoredStep, TrainState, update_step
from wmrl_core.types import Rollouts, Task

T = math.tanh(0.1)
EPS_FACTOR = 0.5 / (0.5 + 1e-6)  # group_advantages divides by (std + 1e-6); rewards {1, 0} have std 0.5


class TwoArmPolicy(torch.nn.Module):
    """Softmax over two arms; a rollout's solution is the arm it pulled (one token)."""

    def __init__(self):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.tensor([0.2, 0.0]))

    def log_probs(self, rollouts: Rollouts) -> torch.Tensor:
        return torch.log_softmax(self.theta, -1)[torch.as_tensor(rollouts.solutions)].unsqueeze(-1)


def rollouts() -> Rollouts:
    """Two groups of two: each group pulled arm 0 then arm 1, both sampled at probability 0.5."""
    return Rollouts(
        tasks=[Task("a"), Task("a"), Task("b"), Task("b")],
        solutions=[0, 1, 0, 1],
        group_ids=np.array([0, 0, 1, 1]),
        old_log_probs=torch.full((4, 1), math.log(0.5)),
        mask=torch.ones(4, 1),
    )


def config(mode: str, **fusion) -> TrainConfig:
    """``mode`` with ``fusion``: the section's own fields, and the method's settings (``fusion.kwargs``)."""
    cfg = TrainConfig(mode=mode)
    own = {f.name for f in dataclasses.fields(FusionConfig)}
    for key, value in fusion.items():
        if key in own:
            setattr(cfg.fusion, key, value)
        else:
            cfg.fusion.kwargs[key] = value
    return cfg


def test_rectified_step_hand_computed():
    """wmrl + rectified: group 0 is an anchor (real 1, 0), group 1 is scored by the world model
    in the opposite order (0.1, 0.7). The window already holds a step whose anchor advantages
    were real (1, -1) and calibrated (2, -2): lambda = (1*2 + 1*2) / (2^2 + 2^2) = 0.5.
    L = L(anchors; real) + 0.5 [L(all; cal) - L(anchors; cal)] = -T + 0.5 (0 - (-T)) = -T/2."""
    cfg, policy = config("wmrl", method="rectified"), TwoArmPolicy()
    state = TrainState.create(cfg, policy)
    state.fuser.update(np.array([1.0, -1.0]), np.array([2.0, -2.0]))
    scored = ScoredStep(
        rollouts(),
        anchor_groups=np.array([True, False]),
        wm_rewards=np.array([0.8, 0.2, 0.1, 0.7]),
        real_rewards=np.array([1.0, 0.0, np.nan, np.nan]),
    )

    update = update_step(policy, cfg, state, scored, step=1)

    r = update.record
    assert r["fusion/lambda"] == pytest.approx(0.5)
    assert (r["fusion/w_real"], r["fusion/w_world_model"]) == (1.0, pytest.approx(0.5))
    assert (r["fusion/n_real"], r["fusion/n_world_model"]) == (2, 2)
    assert r["loss"] == pytest.approx(-T / 2 * EPS_FACTOR, rel=1e-4)
    assert r["reward/train_mean"] == pytest.approx((1.0 + 0.0 + 0.1 + 0.7) / 4)
    assert r["reward/calibrated_mean"] == pytest.approx(0.45)  # no anchor pairs before this step: raw
    assert r["calibration/n_pairs"] == 2 and r["anchors/groups"] == 1
    # this step's anchors joined the calibration and the lambda window only after being used
    assert update.anchor_pairs == {
        "step": 1,
        "group": [0, 0],
        "world_model": [0.8, 0.2],
        "calibrated": [0.8, 0.2],
        "real": [1.0, 0.0],
    }
    assert state.fuser.slope()[0] == pytest.approx((4 + 2) / (8 + 2), rel=1e-4)
    # the new group's null variance is 2 * 2 / 1 = 4 (the two single-rollout units have none), so
    # Var_0 = 4 / 10^2 and the slope 0.6 is 3.0 null standard errors from 0, short of z_0.999 = 3.09
    assert state.fuser.null_variance() == pytest.approx(0.04, rel=1e-4)
    assert state.fuser.lam() == 0.0
    # the net gradient favours arm 0 (real rewards say so); Adam's first step moves each logit by ~lr
    theta = policy.theta.detach()
    assert theta[0] == pytest.approx(0.2 + cfg.grpo.lr, rel=1e-3)
    assert theta[1] == pytest.approx(-cfg.grpo.lr, rel=1e-3)


def test_world_model_step_pools_streams_and_leaves_calibration_alone():
    """world_model mode: no anchors, raw predictions (0.8, 0.2) and (0.7, 0.1) both favour arm 0,
    so w_real = 0, w_wm = 4/4 and L = -T; nothing enters the calibrator."""
    cfg, policy = config("world_model"), TwoArmPolicy()
    state = TrainState.create(cfg, policy)
    scored = ScoredStep(
        rollouts(),
        anchor_groups=np.array([False, False]),
        wm_rewards=np.array([0.8, 0.2, 0.7, 0.1]),
        real_rewards=np.full(4, np.nan),
    )

    update = update_step(policy, cfg, state, scored, step=3)

    r = update.record
    assert (r["fusion/w_real"], r["fusion/w_world_model"]) == (0.0, 1.0)
    assert math.isnan(r["fusion/lambda"]) and math.isnan(r["reward/calibrated_mean"])
    assert r["loss"] == pytest.approx(-T * 0.3 / (0.3 + 1e-6), rel=1e-4)
    assert update.anchor_pairs is None and state.calibrator.n_pairs_ == 0
    assert policy.theta.detach()[0] > 0.2 and policy.theta.detach()[1] < 0.0


def test_opposite_rewards_move_the_policy_the_other_way():
    """Same step with the anchor group's real rewards reversed: the policy moves towards arm 1."""
    cfg, policy = config("wmrl", method="inverse_variance"), TwoArmPolicy()
    state = TrainState.create(cfg, policy)
    scored = ScoredStep(
        rollouts(),
        anchor_groups=np.array([True, False]),
        wm_rewards=np.array([0.8, 0.2, 0.1, 0.7]),
        real_rewards=np.array([0.0, 1.0, np.nan, np.nan]),
    )

    r = update_step(policy, cfg, state, scored, step=1).record

    # 2 anchor pairs < fusion.kwargs.min_pairs = 4: rho^2 is taken as 0, so only the anchors count
    assert (r["fusion/rho2"], r["fusion/w_real"]) == (0.0, pytest.approx(1.0))
    assert r["loss"] == pytest.approx(T * EPS_FACTOR, rel=1e-4)
    assert policy.theta.detach()[0] < 0.2 and policy.theta.detach()[1] > 0.0


def test_ratio_diagnostics_hand_computed():
    """Ratios r = 1.2 and 0.8 at the sampled tokens (the third is masked out):
    KL = mean((r - 1) - log r) = ((0.2 - log 1.2) + (-0.2 - log 0.8)) / 2; both are 0.2 from 1."""
    from wmrl_core.step import ratio_diagnostics

    old = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    new = torch.log(torch.tensor([[0.6, 0.4, 0.01]]))
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    kl = ((0.2 - math.log(1.2)) + (-0.2 - math.log(0.8))) / 2
    assert ratio_diagnostics(new, old, mask, clip_eps=0.15) == {
        "policy/approx_kl": pytest.approx(kl),
        "policy/clip_fraction": 1.0,
    }
    assert ratio_diagnostics(new, old, mask, clip_eps=0.25)["policy/clip_fraction"] == 0.0
    nothing = ratio_diagnostics(new, old, torch.zeros(1, 3), clip_eps=0.2)
    assert all(math.isnan(v) for v in nothing.values())


def test_anchor_group_record_counts_groups_without_real_advantage():
    """Groups 0 and 2 are anchors: group 0 has rewards (1, 0, 1), group 2 (0, 0, NaN), all equal
    among the finite ones; group 1 (world model only) is not counted."""
    from wmrl_core.step import anchor_group_record

    real = np.array([1.0, 0.0, 1.0, np.nan, np.nan, np.nan, 0.0, 0.0, np.nan])
    groups = np.repeat([0, 1, 2], 3)
    record = anchor_group_record(real, groups, np.array([True, False, True]))
    assert record == {"rollout/real_reward_sum_per_group": [2.0, 0.0], "rollout/all_equal_group_share": 0.5}
    none = anchor_group_record(real, groups, np.zeros(3, bool))
    assert none["rollout/real_reward_sum_per_group"] == [] and math.isnan(none["rollout/all_equal_group_share"])


class ReportingTwoArmPolicy(TwoArmPolicy):
    """Reports its own diagnostics after the update, from what the engine passes it."""

    def update_metrics(self, rollouts: Rollouts, old_log_probs: torch.Tensor, new_log_probs: torch.Tensor):
        self.seen = (old_log_probs.clone(), new_log_probs.clone())
        return {"p0": float(torch.softmax(self.theta, -1)[0]), "sigma/0": 1}


@pytest.mark.parametrize("policy_class", [TwoArmPolicy, ReportingTwoArmPolicy])
def test_the_step_record_measures_the_update_on_its_own_tokens(policy_class):
    """After the update: the ratios of the updated policy (theta near (0.2, 0), so near 1.1 and 0.9) to the
    sampling one (p = 0.5 per arm) on the four tokens give policy/approx_kl and policy/clip_fraction; real-mode groups (1, 0) and (1, 1) give
    one all-equal group; a policy with update_metrics adds its own keys as policy/<name>, from the
    post-update log-probs; one without adds none (and trains exactly as before)."""
    cfg, policy = config("real"), policy_class()
    state = TrainState.create(cfg, policy)
    scored = ScoredStep(
        rollouts(),
        anchor_groups=np.array([True, True]),
        wm_rewards=np.full(4, np.nan),
        real_rewards=np.array([1.0, 0.0, 1.0, 1.0]),
    )

    r = update_step(policy, cfg, state, scored, step=1).record

    p = torch.softmax(policy.theta.detach().double(), -1)
    ratios = torch.stack([p[0], p[1], p[0], p[1]]) / 0.5
    kl = float(((ratios - 1) - ratios.log()).mean())
    assert r["policy/approx_kl"] == pytest.approx(kl, rel=1e-6) and 0 < kl < 0.01
    assert r["policy/clip_fraction"] == 0.0  # ratios near 1.1 and 0.9: inside the 0.2 clip
    assert r["rollout/real_reward_sum_per_group"] == [1.0, 2.0] and r["rollout/all_equal_group_share"] == 0.5
    own = {k for k in r if k.startswith("policy/")} - {"policy/approx_kl", "policy/clip_fraction", "policy/entropy"}
    if policy_class is TwoArmPolicy:
        assert own == set()
    else:
        assert r["policy/p0"] == pytest.approx(float(p[0])) and r["policy/sigma/0"] == 1.0
        old, new = policy.seen
        assert torch.equal(old, scored.rollouts.old_log_probs)
        assert torch.allclose(new.double(), torch.log(torch.stack([p[0], p[1], p[0], p[1]])).unsqueeze(-1))
    assert policy.theta.detach()[0] > 0.2  # group 0 favours arm 0; group 1 has no advantage

    cfg.logging.update_diagnostics = False  # no extra log_probs call: only the groups' record
    calls = []
    log_probs = policy.log_probs
    policy.log_probs = lambda rollouts: calls.append(1) or log_probs(rollouts)
    quiet = update_step(policy, cfg, TrainState.create(cfg, policy), scored, step=2).record
    assert len(calls) == cfg.grpo.epochs and "policy/approx_kl" not in quiet and "policy/p0" not in quiet
    assert quiet["rollout/all_equal_group_share"] == 0.5


def test_a_checkpoint_that_names_the_calibrator_debiaser_still_loads():
    """Checkpoints written before the calibration rename hold the calibrator under ``debiaser``."""
    cfg = config("wmrl", method="rectified")
    state = TrainState.create(cfg, TwoArmPolicy())
    state.calibrator.update(np.array([0.1, 0.9, 0.4, 0.6]), np.array([0.0, 1.0, 0.0, 1.0]), np.array([0, 0, 1, 1]))
    state.fuser.update(np.array([1.0, -1.0]), np.array([2.0, -2.0]))
    old = {("debiaser" if key == "calibrator" else key): value for key, value in state.state_dict().items()}
    assert "calibrator" not in old

    restored = TrainState.create(cfg, TwoArmPolicy())
    restored.load_state_dict(old)
    assert restored.calibrator.state_dict() == state.calibrator.state_dict()
    assert restored.calibrator.n_pairs_ == 4
    assert restored.fuser.state_dict() == state.fuser.state_dict()


def test_current_keys_reads_each_old_entry_under_its_new_name_unless_that_is_there():
    assert LEGACY_KEYS == {"rectified": "fuser", "debiaser": "calibrator"}
    assert current_keys({"rectified": 1, "debiaser": 2, "step": 3}) == {"fuser": 1, "calibrator": 2, "step": 3}
    assert current_keys({"debiaser": 2, "calibrator": 4}) == {"debiaser": 2, "calibrator": 4}


class TwoRatePolicy(TwoArmPolicy):
    """The two-arm policy with its logit split into two parameters, each with its own Adam rate."""

    def __init__(self, groups=None):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.tensor([0.2]))
        self.other = torch.nn.Parameter(torch.tensor([0.0]))
        self.groups = groups

    def log_probs(self, rollouts: Rollouts) -> torch.Tensor:
        logits = torch.cat([self.theta, self.other])
        return torch.log_softmax(logits, -1)[torch.as_tensor(rollouts.solutions)].unsqueeze(-1)

    def optimizer_param_groups(self, lr):
        if self.groups is not None:
            return self.groups(self)
        return [{"params": [self.theta], "lr": lr}, {"params": [self.other], "lr": 10 * lr}]


def test_a_policys_own_parameter_groups_set_each_parameters_rate():
    """Adam's first step moves every parameter by its learning rate (the sign of its gradient):
    the parameter in the 10x group moves 10x as far."""
    cfg, policy = config("real"), TwoRatePolicy()
    state = TrainState.create(cfg, policy)
    assert [g["lr"] for g in state.optimizer.param_groups] == [cfg.grpo.lr, 10 * cfg.grpo.lr]
    real = np.array([1.0, 0.0, 1.0, 0.0])
    scored = ScoredStep(
        rollouts(), anchor_groups=np.array([True, True]), wm_rewards=np.full(4, np.nan), real_rewards=real
    )

    update_step(policy, cfg, state, scored, step=1)

    assert float(policy.theta) - 0.2 == pytest.approx(cfg.grpo.lr, rel=1e-3)
    assert 0.0 - float(policy.other) == pytest.approx(10 * cfg.grpo.lr, rel=1e-3)


@pytest.mark.parametrize(
    "groups",
    [lambda p: [{"params": [p.theta]}], lambda p: [{"params": [p.theta, p.other]}, {"params": [p.other]}]],
    ids=["a parameter missing", "a parameter twice"],
)
def test_parameter_groups_that_miss_or_repeat_a_parameter_are_refused(groups):
    from wmrl_core.errors import ComponentError

    with pytest.raises(ComponentError, match="exactly once"):
        TrainState.create(config("real"), TwoRatePolicy(groups))


def test_two_minibatches_take_two_optimizer_steps_where_one_batch_cancels():
    """Group 0 rewards arm 0 and group 1 arm 1: in one batch their gradients cancel and the policy stays
    put; dealt into two minibatches, each group takes its own optimizer step and the policy moves."""
    scored = ScoredStep(
        rollouts(),
        anchor_groups=np.array([True, True]),
        wm_rewards=np.full(4, np.nan),
        real_rewards=np.array([1.0, 0.0, 0.0, 1.0]),
    )
    moved = {}
    for minibatches in (1, 2):
        cfg, policy = config("real"), TwoArmPolicy()
        cfg.grpo.minibatches, cfg.logging.update_diagnostics = minibatches, False
        calls = []
        log_probs = policy.log_probs
        policy.log_probs = lambda rollouts, log_probs=log_probs, calls=calls: calls.append(1) or log_probs(rollouts)
        state = TrainState.create(cfg, policy)
        update_step(policy, cfg, state, scored, step=1)
        assert len(calls) == cfg.grpo.epochs * minibatches
        assert state.optimizer.state[policy.theta]["step"] == minibatches
        moved[minibatches] = float((policy.theta.detach() - torch.tensor([0.2, 0.0])).abs().max())
    assert moved[1] == 0.0 and moved[2] > 1e-4


def test_dropping_uninformative_groups_normalizes_over_the_informative_ones_and_skips_an_empty_step():
    """Group 1 scored alike (advantages 0): kept, it halves the sequence-mean loss of group 0; dropped,
    the loss is group 0's alone (``-tanh(0.1)``, the module docstring). A step whose groups all scored
    alike takes no optimizer step at all (Adam's momentum would move the policy on a zero gradient)."""
    informative = np.array([1.0, 0.0, 1.0, 1.0])  # group 0 prefers arm 0; group 1 all succeeded
    losses = {}
    for drop in (False, True):
        cfg, policy = config("real"), TwoArmPolicy()
        cfg.grpo.drop_uninformative_groups, cfg.grpo.loss_aggregation = drop, "sequence_mean"
        cfg.logging.update_diagnostics = False
        scored = ScoredStep(rollouts(), np.array([True, True]), np.full(4, np.nan), informative)
        record = update_step(policy, cfg, TrainState.create(cfg, policy), scored, step=1).record
        losses[drop] = record["loss"]
        assert record["grpo/informative_group_share"] == 0.5
    assert losses[True] == pytest.approx(-T * EPS_FACTOR, rel=1e-5)
    assert losses[False] == pytest.approx(losses[True] / 2, rel=1e-5)

    cfg, policy = config("real"), TwoArmPolicy()
    cfg.grpo.drop_uninformative_groups, cfg.logging.update_diagnostics = True, False
    state = TrainState.create(cfg, policy)
    alike = ScoredStep(rollouts(), np.array([True, True]), np.full(4, np.nan), np.zeros(4))
    record = update_step(policy, cfg, state, alike, step=1).record
    assert math.isnan(record["loss"]) and record["grpo/informative_group_share"] == 0.0
    assert policy.theta.grad is None and not state.optimizer.state  # no backward, no optimizer step

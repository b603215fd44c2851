"""Issue 52: the first update of every invocation was lost. The trainer checks ``log_probs`` before the
episodes run, and the small VLA's ``log_probs`` cleared the mask after each recorded episode's end,
which before execution is the whole mask: step 1 had loss 0 and grad norm 0, and again after each
resume. Here a tiny WMRL run in the real simulator (one task, 2 groups of 2, 8-step episodes; the
progress world model reads every executed trajectory, one anchor group, the streams pooled and the
world model's scores used raw, so that its group gives advantages at every step) trains one step, then resumes for a second: both
steps update, and the step record carries the update's diagnostics."""

import math

import pytest
from wmrl_libero.runtime import libero_available
from wmrl_libero.testing import build_tiny_transfer_checkpoints

from wmrl_core.testing import require

pytestmark = pytest.mark.slow

TASK = 6  # LIBERO-10 task 6: the smallest object state, the fastest scene to build


def _train(tmp_path, base, wm, steps: int, resume: bool) -> None:
    import wmrl_libero.plugin

    from wmrl_core.config import load_config
    from wmrl_core.plugins import get_plugin_manager
    from wmrl_core.trainer import train

    cfg = load_config(
        None,
        [
            "mode=wmrl",
            f"steps={steps}",
            f"resume={str(resume).lower()}",
            f"run_dir={tmp_path / 'run'}",
            "environment.name=libero-10",
            f"environment.kwargs={{task_indices: [{TASK}], num_workers: 0, max_episode_steps: 8}}",
            "policy.name=libero-small-vla",
            f"policy.kwargs={{checkpoint: {base}, max_steps: 8, probe_size: 8}}",
            "world_model.name=libero-progress",
            f"world_model.kwargs={{checkpoint: {wm}}}",
            "reward.name=score",
            "rollout.batch_tasks=2",
            "rollout.group_size=2",
            "anchors.fraction=0.5",
            "anchors.min_groups=1",
            "fusion.enabled=false",
            "calibration.enabled=false",
            "eval.every=0",
            "checkpoint.every=1",
            "logging.progress=false",
        ],
    )
    train(cfg, plugin_manager=get_plugin_manager(entry_points=False, extra_plugins=[wmrl_libero.plugin]))


def test_step_one_of_every_invocation_updates_and_is_instrumented(tmp_path):
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_core.metrics import read_metrics

    base, wm = build_tiny_transfer_checkpoints(tmp_path, TASK)
    _train(tmp_path, base, wm, steps=1, resume=False)
    _train(tmp_path, base, wm, steps=2, resume=True)  # step 2 is the first of a new invocation

    records = {r["step"]: r for r in read_metrics(tmp_path / "run") if r["step"] > 0}
    assert sorted(records) == [1, 2]
    for r in records.values():
        assert r["grad_norm"] > 0, r  # 0.0 before the fix, at both steps
        assert r["policy/approx_kl"] > 0 and 0 <= r["policy/clip_fraction"] <= 1
        assert r["policy/action_shift"] > 0 and r["policy/action_shift_from_start"] > 0
        assert r["policy/sigma_mean"] == pytest.approx(sum(r[f"policy/sigma/{d}"] for d in range(7)) / 7)
        # every rollout ran its 8 steps (no success that soon): the sampling policy's entropy summed over
        # them, sum_d 0.5 log(2 pi e sigma_d^2) per step (sigma here is after the update: close)
        per_step = sum(0.5 * math.log(2 * math.pi * math.e * r[f"policy/sigma/{d}"] ** 2) for d in range(7))
        assert r["policy/entropy"] == pytest.approx(8 * per_step, rel=1e-2)
        # the anchor group failed every episode (untrained policy, 8 steps): all equal, no real advantage
        assert r["rollout/real_reward_sum_per_group"] == [0.0] and r["rollout/all_equal_group_share"] == 1.0

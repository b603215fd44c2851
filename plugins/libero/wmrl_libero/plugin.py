"""The WMRL plugin module of wmrl-libero (entry point ``wmrl: libero``)."""

from __future__ import annotations

from wmrl_core import hookimpl
from wmrl_libero.suites import SUITE_NAMES

_ENV_NAMES = {
    "libero_10": ("libero-10", "LIBERO-10 (LIBERO-Long): 10 long-horizon tasks, 50 init states each, 520 steps"),
    "libero_spatial": ("libero-spatial", "LIBERO-Spatial: 10 tasks, 220 steps"),
    "libero_object": ("libero-object", "LIBERO-Object: 10 tasks, 280 steps"),
    "libero_goal": ("libero-goal", "LIBERO-Goal: 10 tasks, 300 steps"),
    "libero_90": ("libero-90", "LIBERO-90: 90 tasks, 400 steps"),
}


@hookimpl
def wmrl_register_environments(table):
    for suite in SUITE_NAMES:
        name, description = _ENV_NAMES[suite]
        table.add(name, "wmrl_libero.environment:LiberoEnvironment", description=description, suite=suite)


@hookimpl
def wmrl_register_policies(table):
    table.add(
        "libero-small-vla",
        "wmrl_libero.policies.small_vla:SmallVLAPolicy",
        description="small embedded VLA (torch, CPU): proprio/object-state or image + instruction -> Gaussian action chunks",
    )
    table.add(
        "libero-hf-vla",
        "wmrl_libero.policies.hf_vla:HFVLAPolicy",
        description="Hugging Face causal LM with OpenVLA-style action tokens (checkpoint=MODEL_DIR; ignores images)",
    )


@hookimpl
def wmrl_register_world_models(table):
    table.add(
        "libero-imagination",
        "wmrl_libero.world_models.imagination:ImaginationWorldModel",
        description="dynamics ensemble over physics state + success scorer: the solution's controller acts "
        "in imagination, batched (checkpoint=train-wm .pt)",
    )
    table.add(
        "libero-progress",
        "wmrl_libero.world_models.progress:TrajectoryProgressWorldModel",
        description="progress of an executed trajectory, last-3 minus first-3 of 8 states "
        "(predict_from_outcomes: reads executed rollouts; checkpoint=train-wm .pt)",
    )
    table.add(
        "libero-partial-progress",
        "wmrl_libero.world_models.partial_progress:PartialProgressWorldModel",
        description="progress of the first `fraction` of each executed rollout: anchors simulated in full, "
        "the others only that far (execute_for_scoring; checkpoint=train-wm .pt, trajectory_states > limit)",
    )


@hookimpl
def wmrl_register_gpu_checks(table):
    table.add(
        "libero_egl",
        "wmrl_libero.experiments.gpu_checks:check_libero_egl",
        description="a LIBERO camera render through EGL (MUJOCO_GL=egl; frames/s)",
    )

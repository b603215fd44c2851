"""The LIBERO plugin's GPU check (registered through ``wmrl_register_gpu_checks``; ``python
benchmarks/gpu_check.py``) on a machine with an NVIDIA GPU: ``libero_egl``, a LIBERO camera render
through EGL (``MUJOCO_GL=egl``; frames/s)."""

from __future__ import annotations

import os
import time
from typing import Any


def check_libero_egl(ctx: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    os.environ["MUJOCO_GL"] = "egl"
    from wmrl_libero.gym_env import LiberoGymEnv

    env = LiberoGymEnv("libero_10", 0, image_size=128)
    try:
        obs, _ = env.reset(seed=0, options={"init_state": 0})
        steps = 20
        start = time.perf_counter()
        for _ in range(steps):
            obs, *_ = env.step(np.zeros(7, dtype=np.float32))
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    image = obs["agentview_image"]
    if image.shape != (128, 128, 3) or image.std() < 1.0:
        raise AssertionError(f"the camera image is blank or misshapen: shape {image.shape}, std {image.std():.2f}")
    return {
        "image": list(image.shape),
        "pixel_std": round(float(image.std()), 1),
        "frames_per_s": round(steps / elapsed, 1),
        "mujoco_gl": os.environ["MUJOCO_GL"],
    }

"""Record rollouts with successes AND failures for training and checking world models.

A world model that only ever saw demonstrations cannot tell success from failure, so this
records the scripted expert with per-episode *perturbations* that make it fail sometimes:
Gaussian action noise of a drawn scale, a burst of random actions at a random time (a
knocked object, a dropped grasp), and an early episode end (ran out of time). The
perturbation of each episode is a pure function of ``(task, init_state, rollout)``, so a
recording is reproducible and resumable: episodes already in the file are skipped.

Layout: LIBERO's HDF5 (see :mod:`wmrl_libero.demos`), one ``data/demo_<n>`` per episode,
with the executed (perturbed) actions in ``actions``, and the attributes ``task_index``,
``init_state``, ``rollout``, ``success``, ``noise_scale``, ``burst_start``, ``step_limit``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Perturbation", "perturbation_for", "record_perturbed_rollouts", "recorded_keys"]

NOISE_SCALES = (0.0, 0.1, 0.25, 0.4)
BURST_STEPS = 25


@dataclass(frozen=True)
class Perturbation:
    """How one recorded expert episode is disturbed.

    :param noise_scale: std of Gaussian noise added to every expert action (then clipped).
    :param burst_start: first step of a burst of ``BURST_STEPS`` uniform random actions, or -1.
    :param step_limit: the episode ends (a failure unless already solved) after this many steps.
    :param seed: seed of the noise.
    """

    noise_scale: float
    burst_start: int
    step_limit: int
    seed: int


def perturbation_for(task_index: int, init_state: int, rollout: int, max_steps: int = 520) -> Perturbation:
    """The perturbation of rollout ``rollout`` from ``(task_index, init_state)``: deterministic.

    Rollout 0 of a cycle is the clean expert; the others mix noise, a burst (half of them)
    and an early end (a third of them), so each init state gets successes and failures.
    """
    seed = 1_000_003 * task_index + 1_009 * init_state + rollout
    rng = np.random.default_rng(seed)
    noise = NOISE_SCALES[rollout % len(NOISE_SCALES)]
    burst = int(rng.integers(30, 250)) if rollout % 2 == 1 else -1
    limit = int(rng.integers(150, max_steps)) if rollout % 3 == 2 else max_steps
    return Perturbation(noise, burst, limit, seed)


def recorded_keys(path: str | Path) -> set[tuple[int, int, int]]:
    """``(task_index, init_state, rollout)`` of every episode already in ``path``."""
    import h5py

    path = Path(path)
    if not path.exists():
        return set()
    with h5py.File(path, "r") as f:
        if "data" not in f:
            return set()
        return {
            (int(g.attrs["task_index"]), int(g.attrs["init_state"]), int(g.attrs.get("rollout", 0)))
            for g in f["data"].values()
        }


def _run_episode(env, init_state: int, p: Perturbation):
    from wmrl_libero.expert import ScriptedExpert

    rng = np.random.default_rng(p.seed)
    obs, info = env.reset(seed=p.seed % (2**31), options={"init_state": init_state})
    expert = ScriptedExpert(env.goal_predicates())
    rows: dict[str, list] = {"actions": [], "states": [], "proprio": [], "object_state": []}
    success = False
    for t in range(p.step_limit):
        action = np.asarray(expert.act(obs, info)[0], dtype=np.float64)
        if 0 <= p.burst_start <= t < p.burst_start + BURST_STEPS:
            action = rng.uniform(-1.0, 1.0, 7)
        elif p.noise_scale > 0:
            action = action + p.noise_scale * rng.standard_normal(7)
        action = np.clip(action, -1.0, 1.0)
        rows["states"].append(env.sim_state())
        rows["proprio"].append(obs["proprio"])
        rows["object_state"].append(obs["object_state"])
        rows["actions"].append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            success = bool(terminated)
            break
    # the state after the last action: world models score the final state
    rows["final_proprio"] = obs["proprio"]
    rows["final_object_state"] = obs["object_state"]
    return rows, success


def _write(
    f, rows, *, task_index: int, init_state: int, rollout: int, success: bool, p: Perturbation, instruction: str
) -> None:
    """One episode in LIBERO's layout (``demos.write_demo``), with how it was perturbed and the
    state after its last action (``obs/final_*``: world models score the final state)."""
    from wmrl_libero.demos import write_demo

    data = f.require_group("data")
    write_demo(
        data,
        len(data),
        rows,
        init_state=init_state,
        task_index=task_index,
        success=success,
        instruction=instruction,
        attrs={
            "rollout": rollout,
            "noise_scale": p.noise_scale,
            "burst_start": p.burst_start,
            "step_limit": p.step_limit,
        },
        extra_obs={
            "final_proprio": np.asarray(rows["final_proprio"], dtype=np.float32),
            "final_object_state": np.asarray(rows["final_object_state"], dtype=np.float32),
        },
    )
    data.attrs.update(
        num_demos=len(data),
        total=int(data.attrs.get("total", 0)) + len(rows["actions"]),
        env_args=json.dumps(
            {"env_name": "libero_10", "type": 1, "env_kwargs": {"controller": "OSC_POSE", "control_freq": 20}}
        ),
    )
    f.flush()


def record_perturbed_rollouts(
    out: str | Path,
    *,
    suite: str = "libero_10",
    task_indices: Sequence[int],
    init_states: Sequence[int],
    rollouts: Sequence[int] = (0, 1, 2, 3),
    log: Callable[[str], None] = print,
) -> Path:
    """Record the perturbed expert for every ``(task, init_state, rollout)`` not yet in ``out``.

    Each episode is written (and flushed) as soon as it ends, so a killed run resumes where
    it stopped. Physics only (no cameras).
    """
    import h5py

    from wmrl_libero.gym_env import LiberoGymEnv
    from wmrl_libero.suites import MAX_EPISODE_STEPS

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = recorded_keys(out)
    max_steps = MAX_EPISODE_STEPS.get(suite, 600)
    for t in task_indices:
        todo = [(s, r) for s in init_states for r in rollouts if (t, s, r) not in done]
        if not todo:
            continue
        env = LiberoGymEnv(suite, t, privileged_info=True)
        try:
            for s, r in todo:
                p = perturbation_for(t, s, r, max_steps)
                start, cpu = time.time(), time.process_time()
                rows, success = _run_episode(env, s, p)
                with h5py.File(out, "a") as f:
                    _write(
                        f,
                        rows,
                        task_index=t,
                        init_state=s,
                        rollout=r,
                        success=success,
                        p=p,
                        instruction=env.language_instruction,
                    )
                log(
                    f"task {t} init {s} rollout {r}: {'success' if success else 'failure'} "
                    f"({len(rows['actions'])} steps, noise {p.noise_scale}, burst {p.burst_start}, "
                    f"limit {p.step_limit}, {time.time() - start:.1f} s wall, {time.process_time() - cpu:.1f} CPU-s)"
                )
        finally:
            env.close()
    return out

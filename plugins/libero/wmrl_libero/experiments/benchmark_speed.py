"""Speed of the simulator: steps per second of :class:`~wmrl_libero.vector_env.LiberoVectorEnv`,
seconds per GRPO-sized batch of ``LiberoEnvironment.execute`` with and without persistent
workers, and (:func:`measure_simulator_speed`) the bare MuJoCo limit beside the worker before
and after :mod:`wmrl_libero.fast_physics` and the asynchronous schedule, in one run."""

from __future__ import annotations

import os
import time

import numpy as np

from wmrl_libero.gym_env import NOOP_ACTION
from wmrl_libero.vector_env import LiberoVectorEnv

__all__ = [
    "bare_physics_steps_per_second",
    "measure_batch_seconds",
    "measure_simulator_speed",
    "measure_steps_per_second",
    "simulator_speed_table",
]

WORKER_SETTINGS = {
    "before": dict(schedule="lockstep", fast_physics=False),
    "fast physics": dict(schedule="lockstep", fast_physics=True),
    "async": dict(schedule="async", fast_physics=False),
    "after": dict(schedule="async", fast_physics=True),
}
"""The worker settings :func:`measure_simulator_speed` compares: robosuite's step in lockstep
(``before``), each change alone, both (``after``)."""


def measure_steps_per_second(
    num_workers: int, *, steps: int = 300, suite: str = "libero_10", image_size: int | None = None, seed: int = 0
) -> dict:
    """Total control steps per second (all workers together) with random actions.

    Worker ``i`` runs task ``i`` of the suite; building and resetting are not timed. An
    episode that ends is reset (timed, as in real use).
    """
    rng = np.random.default_rng(seed)
    kwargs = [dict(suite=suite, task_index=i % 10, image_size=image_size) for i in range(num_workers)]
    with LiberoVectorEnv(kwargs) as venv:
        venv.reset(seed=seed, options={"init_state": 0})
        started = time.perf_counter()
        for _ in range(steps):
            actions = [np.clip(NOOP_ACTION + rng.normal(0, 0.3, 7), -1, 1) for _ in range(num_workers)]
            _, _, term, trunc, _ = venv.step(actions)
            for i in np.flatnonzero(term | trunc):
                venv.reset_at(int(i), seed=seed, options={"init_state": 0})
        elapsed = time.perf_counter() - started
    return {
        "workers": num_workers,
        "steps": steps * num_workers,
        "seconds": round(elapsed, 2),
        "steps_per_second": round(steps * num_workers / elapsed, 1),
        "image_size": image_size,
        "suite": suite,
    }


def measure_batch_seconds(
    persistent: bool,
    *,
    task_indices=(0, 4, 6, 7),
    episodes_per_task: int = 8,
    calls: int = 3,
    num_workers: int = 2,
    max_episode_steps: int = 520,
    suite: str = "libero_10",
    seed: int = 0,
) -> dict:
    """Wall seconds of ``calls`` consecutive ``LiberoEnvironment.execute`` calls on one
    GRPO-sized batch (``episodes_per_task`` episodes of each task, init states 0, 1, ...).

    Every episode runs the same open-loop actions (a no-op with Gaussian noise, sigma 0.3),
    to the episode limit unless it succeeds, so both settings simulate the same steps;
    what differs is whether the workers and their environments persist between calls.
    """
    from wmrl_libero.environment import LiberoEnvironment

    rng = np.random.default_rng(seed)
    env = LiberoEnvironment(
        suite,
        task_indices=list(task_indices),
        num_workers=num_workers,
        max_episode_steps=max_episode_steps,
        persistent=persistent,
    )
    tasks = [t for t in env.tasks("train") if t.data["init_state"] < episodes_per_task]
    solutions = [np.clip(NOOP_ACTION + rng.normal(0, 0.3, (max_episode_steps, 7)), -1, 1) for _ in tasks]
    seconds, builds, steps = [], [], []
    try:
        for _ in range(calls):
            before = env.simulator_builds
            started = time.perf_counter()
            outcomes = env.execute(tasks, solutions)
            seconds.append(round(time.perf_counter() - started, 2))
            builds.append(env.simulator_builds - before if persistent else None)
            steps.append(sum(o.info.get("steps", 0) for o in outcomes))
    finally:
        env.close()
    return {
        "persistent": persistent,
        "episodes": len(tasks),
        "workers": num_workers,
        "max_episode_steps": max_episode_steps,
        "seconds_per_call": seconds,
        "builds_per_call": builds,
        "steps_per_call": steps,
    }


def bare_physics_steps_per_second(env, *, seconds: float = 2.0) -> dict:
    """``mj_step`` calls per second on the compiled model of one LIBERO scene (a built
    ``LiberoGymEnv``), in this process: the physics alone, no controller, no Python between
    steps (the machine's limit for this scene).

    The state is the task's init state 0 after LIBERO's settling steps, with the control those
    steps left (the arm's gravity-compensating torques held fixed).
    :return: ``{"task", "physics_steps_per_second", "control_steps_per_second", "substeps", "cpu_share"}``;
        a control step is ``substeps`` physics steps; ``cpu_share`` = process CPU / wall time.
    """
    import mujoco

    env.reset(seed=0, options={"init_state": 0})
    inner = env._env.env
    model, data = inner.sim.model._model, inner.sim.data._data
    substeps = int(round(inner.control_timestep / inner.model_timestep))
    n, started, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - started < seconds:
        for _ in range(100):
            mujoco.mj_step(model, data)
        n += 100
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    task_index = env.task_index
    return {
        "task": task_index,
        "physics_steps_per_second": n / elapsed,
        "control_steps_per_second": n / elapsed / substeps,
        "substeps": substeps,
        "cpu_share": cpu / elapsed,
    }


def _noisy_actions(n_jobs: int, steps: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.clip(NOOP_ACTION + rng.normal(0, 0.3, (steps, 7)), -1, 1) for _ in range(n_jobs)]


def _same_outcomes(a, b) -> bool:
    """Success, length and every recorded physics state of two runs of the same jobs, bit for bit."""
    for x, y in zip(a, b, strict=True):
        if (x.success, x.steps, x.status) != (y.success, y.steps, y.status):
            return False
        for key in ("proprio", "object_state"):
            if len(x.states[key]) != len(y.states[key]):
                return False
            if not all(np.array_equal(u, v) for u, v in zip(x.states[key], y.states[key])):
                return False
    return True


def measure_simulator_speed(
    *,
    task_indices=(0, 4, 6, 7),
    init_states=(0, 1),
    num_workers: int = 2,
    max_episode_steps: int = 120,
    reps: int = 3,
    bare_seconds: float = 0.5,
    suite: str = "libero_10",
    seed: int = 0,
    progress=print,
) -> dict:
    """The bare MuJoCo limit and the worker in each of :data:`WORKER_SETTINGS`, interleaved.

    A batch is one episode per (task, init state), ``max_episode_steps`` open-loop steps of a
    no-op with Gaussian noise (sigma 0.3; the same actions in every setting), run by
    :func:`~wmrl_libero.episode_runner.run_episodes` on ``num_workers`` persistent workers. Two
    pools persist through the run (robosuite's step and the fast step), warmed by one untimed
    batch each, so builds are not timed. Each repetition first measures the bare MuJoCo limit
    (``bare_seconds`` of ``mj_step`` per task, in this process), then runs every setting once, ``before`` and
    ``after`` next to each other (their order alternating between repetitions), then the two
    single changes: on a shared machine whose load drifts, the ratio of two neighbouring
    batches is what can be compared.

    Per batch: wall seconds, episodes and control steps per second, the workers' CPU seconds
    per episode (what the ledger charges) and the workers' busy share (their CPU seconds over
    ``num_workers`` x wall: below 1 where workers wait). ``same_outcomes``: every setting's
    successes, lengths and recorded states equal ``before``'s, bit for bit.
    """
    from wmrl_libero.controllers import ControllerFactory
    from wmrl_libero.episode_runner import EpisodeJob

    jobs = [
        EpisodeJob(suite, t, s, seed=s, max_episode_steps=max_episode_steps, record_states=True)
        for t in task_indices
        for s in init_states
    ]
    actions = _noisy_actions(len(jobs), max_episode_steps, seed)
    factory = ControllerFactory(make=None, name="noisy-noop")
    from wmrl_libero.gym_env import LiberoGymEnv

    bare: list[dict] = []
    bare_envs = []
    pools = {}
    rows: list[dict] = []
    try:
        bare_envs = [LiberoGymEnv(suite, t, fast_physics=False) for t in task_indices]
        reference = _warm_pools(pools, jobs, actions, factory, num_workers, envs_per_worker=len(task_indices))
        for rep in range(reps):
            for env in bare_envs:
                bare.append(dict(bare_physics_steps_per_second(env, seconds=bare_seconds), rep=rep))
                progress(
                    f"rep {rep} bare MuJoCo, task {env.task_index}: {bare[-1]['physics_steps_per_second']:.0f} physics steps/s"
                )
            order = (
                ["before", "after", "fast physics", "async"]
                if rep % 2 == 0
                else ["after", "before", "async", "fast physics"]
            )
            for name in order:
                rows.append(_timed_batch(jobs, actions, factory, pools, name, num_workers, reference, rep))
                progress(_batch_line(rows[-1]))
    finally:
        for pool in pools.values():
            pool.close()
        for env in bare_envs:
            env.close()
    return {
        "suite": suite,
        "tasks": list(task_indices),
        "init_states": list(init_states),
        "workers": num_workers,
        "max_episode_steps": max_episode_steps,
        "episodes_per_batch": len(jobs),
        "reps": reps,
        "bare": bare,
        "batches": rows,
    }


def _warm_pools(pools: dict, jobs, actions, factory, num_workers: int, *, envs_per_worker: int) -> list:
    """Start the two persistent pools (``pools[False]``: robosuite's step, ``pools[True]``: the
    fast step; added to ``pools`` as they start, so that the caller closes what was started)
    and run one untimed batch on each, so that builds and imports are not timed.

    :return: the first warm-up batch's results: the reference every timed batch must equal.
    """
    from wmrl_libero.controllers import OpenLoopController
    from wmrl_libero.episode_runner import job_env_kwargs, make_simulator_pool, run_episodes

    reference = None
    for fast in (False, True):
        first = [
            job_env_kwargs(jobs[k * len(jobs) // num_workers], factory, fast_physics=fast) for k in range(num_workers)
        ]
        pools[fast] = make_simulator_pool(first, num_workers, envs_per_worker=envs_per_worker)
        warm = run_episodes(
            jobs, factory, controllers=[OpenLoopController(a) for a in actions], pool=pools[fast], fast_physics=fast
        )
        for i in range(num_workers):
            pools[fast].take_cpu_s(i)  # builds and imports: not part of the timed batches
        reference = reference or warm
    return reference


def _timed_batch(jobs, actions, factory, pools: dict, name: str, num_workers: int, reference, rep: int) -> dict:
    """One timed batch in the worker setting ``name`` (:data:`WORKER_SETTINGS`): wall seconds,
    episodes and control steps per second, the workers' CPU seconds per episode and busy share,
    this process's CPU seconds, and whether the outcomes equal ``reference`` bit for bit."""
    from wmrl_libero.controllers import OpenLoopController
    from wmrl_libero.episode_runner import run_episodes

    setting = WORKER_SETTINGS[name]
    pool = pools[setting["fast_physics"]]
    parent_cpu, started = time.process_time(), time.perf_counter()
    results = run_episodes(jobs, factory, controllers=[OpenLoopController(a) for a in actions], pool=pool, **setting)
    wall = time.perf_counter() - started
    worker_cpu = sum(r.cpu_s for r in results)
    steps = sum(r.steps for r in results)
    return {
        "rep": rep,
        "setting": name,
        "wall_s": wall,
        "episodes_per_second": len(results) / wall,
        "control_steps_per_second": steps / wall,
        "worker_cpu_s_per_episode": worker_cpu / len(results),
        "worker_busy_share": worker_cpu / (num_workers * wall),
        "parent_cpu_s": time.process_time() - parent_cpu,
        "same_outcomes": _same_outcomes(reference, results),
        "load_average_1min": os.getloadavg()[0],
    }


def _batch_line(row: dict) -> str:
    """One progress line for a timed batch of :func:`_timed_batch`."""
    return (
        f"rep {row['rep']} {row['setting']:>12}: {row['episodes_per_second']:.3f} episodes/s, "
        f"{row['control_steps_per_second']:.0f} control steps/s, "
        f"{row['worker_cpu_s_per_episode']:.2f} worker CPU s/episode, "
        f"busy {row['worker_busy_share']:.2f}, same outcomes {row['same_outcomes']}, "
        f"load {row['load_average_1min']:.1f}"
    )


def simulator_speed_table(result: dict) -> str:
    """Markdown table of :func:`measure_simulator_speed`: per setting the mean and range over
    repetitions, and ``after``/``before`` ratios computed within each repetition."""
    bare = result["bare"]
    phys = np.array([b["physics_steps_per_second"] for b in bare])
    ctrl = np.array([b["control_steps_per_second"] for b in bare])
    lines = [
        f"bare MuJoCo (mj_step, one process, tasks {result['tasks']}): "
        f"{phys.mean():.0f} physics steps/s per core (range {phys.min():.0f}-{phys.max():.0f}) = "
        f"{ctrl.mean():.0f} control steps/s per core ({bare[0]['substeps']} substeps each); "
        f"x{result['workers']} workers: {result['workers'] * ctrl.mean():.0f} control steps/s",
        "",
        "| setting | episodes/s | control steps/s | worker CPU s / episode | worker busy share | same outcomes |",
        "|---|---:|---:|---:|---:|---|",
    ]
    steps_per_episode = np.mean([r["control_steps_per_second"] / r["episodes_per_second"] for r in result["batches"]])
    limit = result["workers"] * ctrl
    lines.append(
        f"| limit: bare mj_step x {result['workers']} processes | {np.mean(limit / steps_per_episode):.3f} "
        f"({limit.min() / steps_per_episode:.3f}-{limit.max() / steps_per_episode:.3f}) | "
        f"{limit.mean():.0f} ({limit.min():.0f}-{limit.max():.0f}) | | | |"
    )
    by = {}
    for row in result["batches"]:
        by.setdefault(row["setting"], []).append(row)
    for name, rows in by.items():

        def span(key, fmt, rows=rows):
            v = np.array([r[key] for r in rows])
            return f"{v.mean():{fmt}} ({v.min():{fmt}}-{v.max():{fmt}})"

        lines.append(
            f"| {name} | {span('episodes_per_second', '.3f')} | {span('control_steps_per_second', '.0f')} | "
            f"{span('worker_cpu_s_per_episode', '.2f')} | {span('worker_busy_share', '.2f')} | "
            f"{all(r['same_outcomes'] for r in rows)} |"
        )
    if "before" in by and "after" in by:
        eps = [a["episodes_per_second"] / b["episodes_per_second"] for a, b in zip(by["after"], by["before"])]
        cpu = [b["worker_cpu_s_per_episode"] / a["worker_cpu_s_per_episode"] for a, b in zip(by["after"], by["before"])]
        loads = [r["load_average_1min"] for r in result["batches"]]
        lines += [
            "",
            "after / before, per repetition: episodes/s "
            + ", ".join(f"{r:.2f}x" for r in eps)
            + f" (median {np.median(eps):.2f}x); worker CPU per episode "
            + ", ".join(f"{r:.2f}x less" for r in cpu)
            + f" (median {np.median(cpu):.2f}x); machine load average {min(loads):.1f}-{max(loads):.1f}",
        ]
    return "\n".join(lines)

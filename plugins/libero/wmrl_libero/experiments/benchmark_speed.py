"""Speed of the simulator: steps per second of :class:`~wmrl_libero.vector_env.LiberoVectorEnv`,
seconds per GRPO-sized batch of ``LiberoEnvironment.execute`` with and without persistent
workers, and (:func:`measure_simulator_speed`) the workers' CPU seconds per episode in several
simulator settings beside the bare MuJoCo ceiling of the same episodes, in one run."""

from __future__ import annotations

import os
import time

import numpy as np

from wmrl_libero.gym_env import NOOP_ACTION
from wmrl_libero.vector_env import LiberoVectorEnv

__all__ = [
    "bare_physics_steps_per_second",
    "episode_states",
    "bare_step_cpu_seconds",
    "measure_batch_seconds",
    "measure_simulator_speed",
    "measure_steps_per_second",
    "simulator_speed_table",
]

WORKER_SETTINGS = {
    "robosuite": dict(schedule="lockstep", fast_physics=False, chunks=False),
    "today": dict(schedule="async", fast_physics="python", chunks=False),
    "new": dict(schedule="async", fast_physics=True, chunks=True),
}
"""The worker settings :func:`measure_simulator_speed` compares: robosuite's own step in
lockstep (the unmodified simulator); the fast step with the arm's substeps in Python, the goal
predicates checked four times a step and one action per round trip (the worker before the
compiled arm, ``today``); the compiled arm, the predicates checked once and a whole action
chunk per round trip (``new``)."""

DEFAULT_SETTINGS = ("today", "new")


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
    """float32, as the episode runner hands actions to the simulator."""
    rng = np.random.default_rng(seed)
    return [np.clip(NOOP_ACTION + rng.normal(0, 0.3, (steps, 7)), -1, 1).astype(np.float32) for _ in range(n_jobs)]


class _ChunkedOpenLoop:
    """Replays a fixed action sequence ``chunk`` actions at a time, as a policy that acts open
    loop over action chunks; no-ops after its end."""

    def __init__(self, actions: np.ndarray, chunk: int):
        self.actions, self.chunk, self.t = np.asarray(actions, dtype=np.float32), chunk, 0

    def act(self, obs, info) -> np.ndarray:
        if self.t >= len(self.actions):
            return NOOP_ACTION[None]
        self.t += self.chunk
        return self.actions[self.t - self.chunk : self.t]


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


def episode_states(env, job, actions) -> list[np.ndarray]:
    """The MuJoCo state before every control step of one episode, its settle steps included:
    ``env`` (a ``LiberoGymEnv`` of the job's task and episode limit) reset as ``job`` says
    and stepped through ``actions`` to the episode's end.

    Each state is MuJoCo's integration state (``mj_getState`` with ``mjSTATE_INTEGRATION``:
    positions, velocities, controls, warm start, ...), so that :func:`bare_step_cpu_seconds`
    can step from exactly where the episode was.
    """
    import mujoco

    from wmrl_libero.vector_env import step_through

    inner = env._env
    model, data = inner.env.sim.model._model, inner.env.sim.data._data
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    states = []
    step = inner.step

    def recording_step(action):
        states.append(np.empty(mujoco.mj_stateSize(model, spec)))
        mujoco.mj_getState(model, data, states[-1], spec)
        return step(action)

    inner.step = recording_step  # instance attribute over ControlEnv.step, removed below
    try:
        env.reset(seed=job.seed, options={"init_state": job.init_state})
        step_through(env, actions)
    finally:
        del inner.step
    return states


def bare_step_cpu_seconds(env, states: list[np.ndarray]) -> float:
    """CPU seconds (this process) of bare ``mj_step`` calls, a control step's worth (25) from
    each of ``states`` with the control it holds: the physics of those control steps alone, no
    controller and no Python between substeps (the in-episode ceiling for a worker)."""
    import mujoco

    inner = env._env.env
    model, data = inner.sim.model._model, inner.sim.data._data
    substeps = int(round(inner.control_timestep / inner.model_timestep))
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    cpu = 0.0
    for state in states:
        mujoco.mj_setState(model, data, state, spec)
        started = time.process_time()
        for _ in range(substeps):
            mujoco.mj_step(model, data)
        cpu += time.process_time() - started
    return cpu


def measure_simulator_speed(
    *,
    task_indices=(0, 4, 6, 7),
    init_states=(0, 1),
    num_workers: int = 2,
    max_episode_steps: int = 120,
    reps: int = 3,
    chunk: int = 8,
    settings=DEFAULT_SETTINGS,
    suite: str = "libero_10",
    seed: int = 0,
    progress=print,
) -> dict:
    """The workers' CPU seconds per episode in each of ``settings`` (:data:`WORKER_SETTINGS`)
    beside the bare MuJoCo ceiling of the same episodes, interleaved.

    A batch is one episode per (task, init state): ``max_episode_steps`` open-loop steps of a
    no-op with Gaussian noise (sigma 0.3; the same actions in every setting), acted ``chunk``
    actions at a time, run by :func:`~wmrl_libero.episode_runner.run_episodes` on
    ``num_workers`` persistent workers (one pool per simulator setting, each warmed by one
    untimed batch, so builds are not timed). The ceiling: each episode's MuJoCo states are
    recorded once, in this process (:func:`episode_states`); each repetition times bare
    ``mj_step`` from them (:func:`bare_step_cpu_seconds`), then runs one batch per setting,
    in alternating order: on a shared machine whose load drifts, neighbouring batches are what
    can be compared.

    Per batch: the workers' CPU seconds per episode (what the ledger charges; resets and
    round trips included), wall seconds, episodes and control steps per second, the workers'
    busy share (CPU over ``num_workers`` x wall) and ``same_outcomes``: successes, lengths and
    recorded states equal the first warm-up batch's, bit for bit.
    """
    from wmrl_libero.controllers import ControllerFactory
    from wmrl_libero.episode_runner import EpisodeJob
    from wmrl_libero.gym_env import LiberoGymEnv

    unknown = set(settings) - set(WORKER_SETTINGS)
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}; choose from {list(WORKER_SETTINGS)}")
    jobs = [
        EpisodeJob(suite, t, s, seed=s, max_episode_steps=max_episode_steps, record_states=True)
        for t in task_indices
        for s in init_states
    ]
    actions = _noisy_actions(len(jobs), max_episode_steps, seed)
    batch = dict(jobs=jobs, actions=actions, chunk=chunk, factory=ControllerFactory(make=None, name="noisy-noop"))
    bare, rows, pools, bare_envs = [], [], {}, {}
    try:
        bare_envs = {t: LiberoGymEnv(suite, t, max_episode_steps=max_episode_steps) for t in task_indices}
        states = [episode_states(bare_envs[j.task_index], j, a) for j, a in zip(jobs, actions)]
        reference = _warm_pools(pools, settings, batch, num_workers, envs_per_worker=len(task_indices))
        for rep in range(reps):
            bare.append(_bare_row(bare_envs, jobs, states, rep))
            progress(_bare_line(bare[-1]))
            for name in settings if rep % 2 == 0 else settings[::-1]:
                rows.append(_timed_batch(batch, pools, name, num_workers, reference, rep))
                progress(_batch_line(rows[-1]))
    finally:
        for pool in pools.values():
            pool.close()
        for env in bare_envs.values():
            env.close()
    return {
        "suite": suite,
        "tasks": list(task_indices),
        "init_states": list(init_states),
        "workers": num_workers,
        "max_episode_steps": max_episode_steps,
        "chunk": chunk,
        "episodes_per_batch": len(jobs),
        "reps": reps,
        "settings": list(settings),
        "bare": bare,
        "batches": rows,
    }


def _bare_row(envs: dict, jobs, states: list, rep: int) -> dict:
    """One repetition of the bare ceiling: CPU seconds per episode and per control step."""
    cpu = [bare_step_cpu_seconds(envs[job.task_index], s) for job, s in zip(jobs, states)]
    steps = sum(len(s) for s in states)
    return {
        "rep": rep,
        "cpu_s_per_episode": sum(cpu) / len(jobs),
        "control_steps_per_episode": steps / len(jobs),
        "control_steps_per_cpu_s": steps / sum(cpu),
        "load_average_1min": os.getloadavg()[0],
    }


def _bare_line(row: dict) -> str:
    return (
        f"rep {row['rep']} {'bare MuJoCo':>11}: {row['cpu_s_per_episode']:.3f} CPU s/episode, "
        f"{row['control_steps_per_cpu_s']:.0f} control steps per CPU s, load {row['load_average_1min']:.1f}"
    )


def _warm_pools(pools: dict, settings, batch: dict, num_workers: int, *, envs_per_worker: int) -> list:
    """Start one persistent pool per simulator setting (``pools[fast_physics]``; added as they
    start, so that the caller closes what was started) and run one untimed batch on each, so
    that builds and imports are not timed.

    :return: the first warm-up batch's results: the reference every timed batch must equal.
    """
    from wmrl_libero.episode_runner import job_env_kwargs, make_simulator_pool, run_episodes

    jobs, factory, reference = batch["jobs"], batch["factory"], None
    for name in settings:
        setting = WORKER_SETTINGS[name]
        fast = setting["fast_physics"]
        if fast in pools:
            continue
        first = [
            job_env_kwargs(jobs[k * len(jobs) // num_workers], factory, fast_physics=fast) for k in range(num_workers)
        ]
        pools[fast] = make_simulator_pool(first, num_workers, envs_per_worker=envs_per_worker)
        controllers = [_ChunkedOpenLoop(a, batch["chunk"]) for a in batch["actions"]]
        warm = run_episodes(jobs, factory, controllers=controllers, pool=pools[fast], **setting)
        for i in range(num_workers):
            pools[fast].take_cpu_s(i)  # builds and imports: not part of the timed batches
        reference = reference or warm
    return reference


def _timed_batch(batch: dict, pools: dict, name: str, num_workers: int, reference, rep: int) -> dict:
    """One timed batch in the worker setting ``name`` (:data:`WORKER_SETTINGS`): the workers'
    CPU seconds per episode and busy share, wall seconds, episodes and control steps per
    second, this process's CPU seconds, and whether the outcomes equal ``reference`` bit for bit."""
    from wmrl_libero.episode_runner import run_episodes

    setting = WORKER_SETTINGS[name]
    controllers = [_ChunkedOpenLoop(a, batch["chunk"]) for a in batch["actions"]]
    parent_cpu, started = time.process_time(), time.perf_counter()
    results = run_episodes(
        batch["jobs"], batch["factory"], controllers=controllers, pool=pools[setting["fast_physics"]], **setting
    )
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
        f"rep {row['rep']} {row['setting']:>11}: {row['worker_cpu_s_per_episode']:.3f} worker CPU s/episode, "
        f"{row['episodes_per_second']:.3f} episodes/s, {row['control_steps_per_second']:.0f} control steps/s, "
        f"busy {row['worker_busy_share']:.2f}, same outcomes {row['same_outcomes']}, "
        f"load {row['load_average_1min']:.1f}"
    )


def _span(values, fmt: str) -> str:
    v = np.asarray(values, dtype=float)
    return f"{v.mean():{fmt}} ({v.min():{fmt}}-{v.max():{fmt}})"


def simulator_speed_table(result: dict) -> str:
    """Markdown table of :func:`measure_simulator_speed`: per setting the mean and range over
    repetitions, then the ratios of CPU seconds per episode within each repetition."""
    steps = result["bare"][0]["control_steps_per_episode"]  # episode and settle steps, every row the same
    lines = [
        f"{result['episodes_per_batch']} episodes per batch ({result['suite']} tasks {result['tasks']} x init "
        f"states {result['init_states']}), {steps:.0f} control steps each ({result['max_episode_steps']} and the "
        f"reset's settle steps), chunks of {result['chunk']}, {result['workers']} workers, {result['reps']} "
        "repetitions; mean (min-max) over repetitions; the workers' CPU includes resets and round trips",
        "",
        "| setting | worker CPU s / episode | ms CPU / control step | episodes/s | worker busy share | same outcomes |",
        "|---|---:|---:|---:|---:|---|",
    ]
    cpu = [b["cpu_s_per_episode"] for b in result["bare"]]
    lines.append(
        f"| bare MuJoCo in-episode ceiling | {_span(cpu, '.3f')} | {_span(np.array(cpu) * 1e3 / steps, '.2f')} | | | |"
    )
    by: dict[str, list] = {}
    for row in result["batches"]:
        by.setdefault(row["setting"], []).append(row)
    for name, rows in by.items():
        cpu = [r["worker_cpu_s_per_episode"] for r in rows]
        lines.append(
            f"| {name} | {_span(cpu, '.3f')} | {_span(np.array(cpu) * 1e3 / steps, '.2f')} | "
            f"{_span([r['episodes_per_second'] for r in rows], '.3f')} | "
            f"{_span([r['worker_busy_share'] for r in rows], '.2f')} | {all(r['same_outcomes'] for r in rows)} |"
        )
    lines += ["", *_ratio_lines(result, by)]
    return "\n".join(lines)


def _ratio_lines(result: dict, by: dict) -> list[str]:
    """Per repetition: how many times less worker CPU per episode ``new`` needs than each other
    setting, and each setting's CPU over the bare ceiling's."""
    loads = [r["load_average_1min"] for r in result["batches"]]
    bare = [b["cpu_s_per_episode"] for b in result["bare"]]
    lines = []
    if "new" in by:
        new = [r["worker_cpu_s_per_episode"] for r in by["new"]]
        for name in (n for n in by if n != "new"):
            ratios = [r["worker_cpu_s_per_episode"] / n for r, n in zip(by[name], new)]
            lines.append(
                f"{name} / new, worker CPU per episode, per repetition: "
                + ", ".join(f"{x:.2f}x" for x in ratios)
                + f" (median {np.median(ratios):.2f}x)"
            )
    for name, rows in by.items():
        ratios = [r["worker_cpu_s_per_episode"] / b for r, b in zip(rows, bare)]
        lines.append(
            f"{name} / bare ceiling, per repetition: "
            + ", ".join(f"{x:.2f}x" for x in ratios)
            + f" (median {np.median(ratios):.2f}x)"
        )
    lines.append(f"machine load average {min(loads):.1f}-{max(loads):.1f}")
    return lines

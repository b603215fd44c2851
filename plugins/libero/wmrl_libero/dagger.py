"""DAgger: the small VLA learns from the scripted expert on the states it visits itself.

DAgger (Ross, Gordon and Bagnell, 2011), as run here on physics-state features (proprio,
object state, instruction; no images)::

    D <- expert demonstrations (HDF5 files, optional)
    for i = 0 .. N-1:
        beta_i = max(beta_min, beta_0 * decay**i)                   (beta_schedule)
        roll out the mixture of expert and student pi_{i-1} from training init states:
            every `chunk` steps the next chunk comes from the expert with probability
            beta_i, else from the student (its deterministic chunk, executed open loop);
            the expert runs in shadow on every step of the episode (it keeps per-episode
            state) and its action labels every visited state
        D <- D + {(o_t, expert chunk a*[t:t+k])}                     (labels chunked like the
                                                                      student predicts them)
        pi_i <- behaviour cloning on D, continued from pi_{i-1}

With ``beta_0 = 1`` iteration 0 is the expert alone (more demonstrations; ``expert_noise``
adds Gaussian noise to the actions the expert executes, not to its labels, so that the data
also covers states next to its path, as in DART). Rollouts use training init states only
(0-39); 40-49 stay held out for ``wmrl-libero eval``.

Output folder (resumable: finished iterations are skipped, a rollout file without its
checkpoint is trained on, not recollected)::

    data/iter_<i>.hdf5        LIBERO's HDF5 layout (demos.py); `actions` are the expert's
                              labels, `executed_actions` what ran, `expert_executed` (0/1)
    checkpoints/iter_<i>.pt   the student after iteration i
    policy.pt                 the latest student (`wmrl-libero eval small-vla:policy.pt`)
    progress.jsonl            one line per iteration: beta, episodes, successes, wall and CPU
                              seconds of rollouts (simulator workers included) and training
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wmrl_libero.controllers import ControllerFactory
from wmrl_libero.demos import load_demonstrations, write_demo, write_file_attributes
from wmrl_libero.environment import SPLITS
from wmrl_libero.episode_runner import (
    EpisodeJob,
    job_env_kwargs,
    make_simulator_pool,
    run_episodes,
)
from wmrl_libero.policies.behaviour_cloning import (
    chunk_samples,
    fit_feature_scaling,
    fit_small_vla,
    without_heldout_init_states,
)
from wmrl_libero.policies.small_vla import SmallVLA, load_small_vla, save_small_vla
from wmrl_libero.policies.vla_interface import VLAInput
from wmrl_libero.suites import task_info

__all__ = ["DaggerConfig", "DaggerController", "beta_schedule", "run_dagger"]


@dataclass
class DaggerConfig:
    """Settings of a DAgger run (``wmrl-libero dagger``)."""

    out: str
    """Output folder (data, checkpoints, progress); a rerun resumes from it."""
    task_indices: list[int]
    """Tasks of the suite to learn (those the expert solves)."""
    suite: str = "libero_10"
    demos: list[str] = field(default_factory=list)
    """HDF5 demonstration files (``wmrl-libero record-demos``) that start the data set."""
    iterations: int = 6
    """DAgger iterations (rollouts + training each)."""
    episodes_per_task: int = 10
    """Rollouts per task and iteration; init states cycle through ``init_states``."""
    expert_episodes_per_task: int | None = None
    """Rollouts per task in iterations whose beta is 1 (the expert alone: more
    demonstrations); default ``episodes_per_task``. 0 with ``demos``: iteration 0 is behaviour
    cloning on the recorded demonstrations alone (they are the beta = 1 data)."""
    init_states: list[int] = field(default_factory=lambda: list(SPLITS["train"]))
    """Init states for rollouts: the training split 0-39 (40-49 are held out)."""
    beta0: float = 1.0
    """Expert probability of iteration 0 (1.0: iteration 0 is the expert alone)."""
    beta_decay: float = 0.5
    """beta_i = max(beta_min, beta0 * beta_decay**i)."""
    beta_min: float = 0.05
    expert_noise: float = 0.1
    """Std of Gaussian noise on the actions the expert executes (labels stay clean)."""
    chunk: int = 4
    """Actions per predicted chunk (and per mixing decision)."""
    hidden: int = 512
    """Width of the student's MLP."""
    first_train_steps: int = 16000
    """Gradient steps of the first fit (from scratch; 16000 x 256 samples is about 26 epochs of
    LIBERO-10's 500 demonstrations)."""
    train_steps: int = 4000
    """Gradient steps per later iteration (continuing from the previous student)."""
    batch_size: int = 256
    lr: float = 1e-3
    """Peak learning rate of each fit (AdamW)."""
    lr_warmup: int = 200
    """Linear warm-up steps of each fit."""
    final_lr_fraction: float = 0.0
    """Each fit decays the learning rate along a cosine to this fraction of ``lr`` (1: constant)."""
    weight_decay: float = 0.0
    """AdamW's decoupled weight decay."""
    obs_noise: float = 0.0
    """Gaussian noise on the physics features during training, in feature standard deviations."""
    num_workers: int = 2
    """Simulator worker processes (persistent for the whole run)."""
    max_episode_steps: int | None = None
    """Episode limit (default the suite's, 520 for LIBERO-10)."""
    seed: int = 0

    def __post_init__(self):
        if not self.task_indices:
            raise ValueError("DAgger needs at least one task: pass --tasks, e.g. 0,4,6,7")
        heldout = sorted(set(self.init_states) & set(SPLITS["heldout"]))
        if heldout:
            raise ValueError(
                f"init states {heldout} are held out for evaluation; roll out from 0-39 (--init-states 0-39)"
            )
        if not 0.0 <= self.beta_min <= self.beta0 <= 1.0 or not 0.0 < self.beta_decay <= 1.0:
            raise ValueError(
                f"need 0 <= beta_min <= beta0 <= 1 and 0 < beta_decay <= 1, got beta0={self.beta0}, "
                f"beta_decay={self.beta_decay}, beta_min={self.beta_min}"
            )
        if self.episodes_per_task < 1 or self.iterations < 1 or self.chunk < 1:
            raise ValueError("iterations, episodes_per_task and chunk must be >= 1")
        if self.expert_episodes_per_task == 0 and not self.demos:
            raise ValueError("--expert-episodes-per-task 0 needs --demos (iteration 0 trains on them alone)")


def beta_schedule(iteration: int, beta0: float = 1.0, decay: float = 0.5, beta_min: float = 0.05) -> float:
    """Probability that the expert acts in iteration ``i``: ``max(beta_min, beta0 * decay**i)``."""
    return max(beta_min, beta0 * decay**iteration)


class DaggerController:
    """One DAgger episode: the expert in shadow on every step, the mixture acting.

    :param expert: a fresh expert for this episode (``act(obs, info) -> (k, 7)``, reads
        ``info["privileged"]``); queried on every step, in order, row 0 is its action.
    :param student: ``student(obs) -> (chunk, 7)``, or ``None`` when ``beta`` is 1.
    :param beta: probability that the next chunk is the expert's.
    :param chunk: steps per mixing decision.
    :param rng: draws the mixing decisions and the expert's execution noise.
    :param expert_noise: std of Gaussian noise on executed expert actions.

    Recorded per step (the rows of :func:`~wmrl_libero.demos.write_demo`): ``actions`` (the
    expert's label), ``executed_actions``, ``expert_executed``, ``states`` (when the runner
    provides ``info["sim_state"]``), ``proprio``, ``object_state``.
    """

    def __init__(
        self, expert, student, *, beta: float, chunk: int, rng: np.random.Generator, expert_noise: float = 0.0
    ):
        if student is None and beta < 1.0:
            raise ValueError(f"beta={beta} < 1 needs a student")
        if hasattr(expert, "reset"):
            expert.reset()
        self.expert, self.student, self.beta, self.chunk = expert, student, beta, chunk
        self.rng, self.expert_noise = rng, expert_noise
        self._plan: list[np.ndarray | None] = []  # None: the expert's action at that step
        self.rows: dict[str, list] = {
            k: [] for k in ("actions", "executed_actions", "expert_executed", "states", "proprio", "object_state")
        }

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> np.ndarray:
        label = np.clip(np.asarray(self.expert.act(obs, info), dtype=np.float32).reshape(-1, 7)[0], -1, 1)
        if not self._plan:
            if self.rng.random() < self.beta:
                self._plan = [None] * self.chunk
            else:
                self._plan = list(np.asarray(self.student(obs), dtype=np.float32).reshape(-1, 7))
        planned = self._plan.pop(0)
        if planned is None:
            executed = (
                label if self.expert_noise == 0 else label + self.rng.normal(0, self.expert_noise, 7).astype(np.float32)
            )
            executed = np.clip(executed, -1, 1)
        else:
            executed = np.clip(planned, -1, 1)
        self.rows["actions"].append(label)
        self.rows["executed_actions"].append(executed)
        self.rows["expert_executed"].append(planned is None)
        if "sim_state" in info:
            self.rows["states"].append(info["sim_state"])
        self.rows["proprio"].append(obs["proprio"])
        self.rows["object_state"].append(obs["object_state"])
        return executed[None]


def _student(model: SmallVLA, instruction: str):
    @torch.no_grad()
    def act(obs):
        actions, _ = model.sample([VLAInput.from_obs(obs, instruction)], deterministic=True)
        return actions[0].numpy()

    return act


def _episodes_per_task(config: DaggerConfig, iteration: int) -> int:
    beta = beta_schedule(iteration, config.beta0, config.beta_decay, config.beta_min)
    if beta >= 1.0 and config.expert_episodes_per_task is not None:
        return config.expert_episodes_per_task
    return config.episodes_per_task


def _rollout_init_states(config: DaggerConfig, iteration: int) -> list[int]:
    """Iteration i takes the next init states (its episodes per task), cycling through the list."""
    offset = sum(_episodes_per_task(config, i) for i in range(iteration))
    n = len(config.init_states)
    return [config.init_states[(offset + j) % n] for j in range(_episodes_per_task(config, iteration))]


def _collect(config: DaggerConfig, pool, model: SmallVLA | None, iteration: int, beta: float, log) -> tuple[list, list]:
    from wmrl_libero.expert import expert_factory

    experts = expert_factory()
    jobs, controllers = [], []
    for t in config.task_indices:
        info = task_info(config.suite, t)
        for s in _rollout_init_states(config, iteration):
            seed = config.seed * 1_000_003 + iteration * 10_007 + 100 * t + s
            jobs.append(
                EpisodeJob(
                    config.suite, t, s, seed=seed, max_episode_steps=config.max_episode_steps, record_sim_state=True
                )
            )
            student = _student(model, info.language) if model is not None else None
            controllers.append(
                DaggerController(
                    experts.make(info, s),
                    student,
                    beta=beta,
                    chunk=config.chunk,
                    rng=np.random.default_rng(seed),
                    expert_noise=config.expert_noise,
                )
            )

    def progress(r):
        log(
            f"  iteration {iteration} task {r.job.task_index} init {r.job.init_state}: "
            f"{'success' if r.success else 'failure'} ({r.status}, {r.steps} steps, {r.seconds:.1f} s)"
        )

    factory = ControllerFactory(make=None, name="dagger", privileged=True)
    results = run_episodes(jobs, factory, controllers=controllers, pool=pool, progress=progress)
    return results, controllers


def _write_iteration(path: Path, config: DaggerConfig, iteration: int, beta: float, results, controllers) -> int:
    import h5py

    tmp = path.with_suffix(".tmp")
    n = total = 0
    with h5py.File(tmp, "w") as f:
        data = f.create_group("data")
        for r, c in zip(results, controllers):
            if r.status != "ok" or not c.rows["actions"]:
                continue  # a crashed worker: the episode is cut short, its states say nothing
            write_demo(
                data,
                n,
                c.rows,
                init_state=r.job.init_state,
                task_index=r.job.task_index,
                success=r.success,
                instruction=task_info(config.suite, r.job.task_index).language,
                extra={
                    "executed_actions": np.asarray(c.rows["executed_actions"], dtype=np.float64),
                    "expert_executed": np.asarray(c.rows["expert_executed"], dtype=np.uint8),
                },
                attrs={"dagger_iteration": iteration, "beta": beta},
            )
            n += 1
            total += len(c.rows["actions"])
        write_file_attributes(
            data,
            config.suite,
            {t: task_info(config.suite, t).language for t in config.task_indices},
            num_demos=n,
            total=total,
        )
        data.attrs.update(dagger_iteration=iteration, beta=beta)
    os.replace(tmp, path)
    return n


def run_dagger(config: DaggerConfig, log=print) -> Path:
    """Run (or resume) DAgger; returns the path of the latest student checkpoint."""
    out = Path(config.out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    (out / "checkpoints").mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(asdict(config), indent=1))
    torch.manual_seed(config.seed)
    start, model, data = _resume(config, out, log)
    pool = None
    try:
        for i in range(start, config.iterations):
            beta = beta_schedule(i, config.beta0, config.beta_decay, config.beta_min)
            path = out / "data" / f"iter_{i:02d}.hdf5"
            rollout_s = rollout_cpu = 0.0
            if not path.exists() and _episodes_per_task(config, i) == 0:
                _write_iteration(path, config, i, beta, [], [])  # beta 1 from the recorded demos alone
                record = {"rollouts": 0}
            elif not path.exists():
                if model is None and beta < 1.0:
                    model = _fit(config, None, data, config.first_train_steps, log)  # pi_0 from the demonstrations
                if pool is None:
                    pool = _rollout_pool(config)
                started, cpu = time.time(), _cpu_seconds()
                results, controllers = _collect(config, pool, model if beta < 1.0 else None, i, beta, log)
                rollout_s, rollout_cpu = time.time() - started, _cpu_seconds() - cpu
                _write_iteration(path, config, i, beta, results, controllers)
                record = _rollout_summary(results, controllers)
            else:
                record = {"rollouts": "reused from an interrupted run"}
            new = load_demonstrations(path)
            data += new
            started, cpu = time.time(), time.process_time()
            model = _fit(
                config, model, data, config.train_steps if model is not None else config.first_train_steps, log
            )
            train_s, train_cpu = time.time() - started, time.process_time() - cpu
            ckpt = _save_student(model, out, config, i, beta, len(data))
            record.update(
                iteration=i,
                beta=beta,
                episodes_total=len(data),
                samples_total=int(sum(len(d["actions"]) for d in data)),
                rollout_seconds=round(rollout_s, 1),
                rollout_cpu_seconds=round(rollout_cpu, 1),
                train_seconds=round(train_s, 1),
                train_cpu_seconds=round(train_cpu, 1),
                checkpoint=str(ckpt),
            )
            with open(out / "progress.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")
            log(f"dagger iteration {i}: {json.dumps(record)}")
    finally:
        if pool is not None:
            pool.close()
    return out / "policy.pt"


def _resume(config: DaggerConfig, out: Path, log) -> tuple[int, SmallVLA | None, list]:
    """Where a run in ``out`` stands: the first iteration without a checkpoint, the student of
    the iteration before it (``None`` at the start), and the data set so far (the recorded
    demonstrations from training init states, then every finished iteration's rollouts)."""
    demos, dropped = without_heldout_init_states(
        (d for f in config.demos for d in load_demonstrations(f)), SPLITS["heldout"]
    )
    log(f"dagger: {len(demos)} demonstrations from {len(config.demos)} file(s); tasks {config.task_indices}")
    if dropped:
        log(
            f"dagger: left out {dropped} demonstration(s) from held-out init states {SPLITS['heldout'][0]}-"
            f"{SPLITS['heldout'][-1]} (the evaluation's states; record demos with --init-states 0-39)"
        )
    done = [i for i in range(config.iterations) if (out / "checkpoints" / f"iter_{i:02d}.pt").exists()]
    start = max(done) + 1 if done else 0
    model = load_small_vla(out / "checkpoints" / f"iter_{start - 1:02d}.pt") if start else None
    data = list(demos)
    for i in range(start):
        data += load_demonstrations(out / "data" / f"iter_{i:02d}.hdf5")
    if start:
        log(f"dagger: resuming at iteration {start} with {len(data)} episodes of data")
    return start, model, data


def _rollout_pool(config: DaggerConfig):
    """Persistent simulator workers for the rollouts, the tasks spread over them, each worker
    keeping every task's environment."""
    factory = ControllerFactory(make=None, name="dagger", privileged=True)
    first = [
        job_env_kwargs(EpisodeJob(config.suite, t, 0, max_episode_steps=config.max_episode_steps), factory)
        for t in config.task_indices
    ]
    n = max(1, config.num_workers)
    return make_simulator_pool(
        [first[k * len(first) // n] for k in range(n)],
        config.num_workers,
        envs_per_worker=len(config.task_indices),
    )


def _save_student(model: SmallVLA, out: Path, config: DaggerConfig, iteration: int, beta: float, episodes: int) -> Path:
    """Save the student as iteration ``iteration``'s checkpoint and as the latest ``policy.pt``;
    returns the iteration's checkpoint."""
    ckpt = save_small_vla(
        model,
        out / "checkpoints" / f"iter_{iteration:02d}.pt",
        dagger_iteration=iteration,
        beta=beta,
        episodes=episodes,
        tasks=config.task_indices,
    )
    save_small_vla(
        model, out / "policy.pt", dagger_iteration=iteration, beta=beta, episodes=episodes, tasks=config.task_indices
    )
    return ckpt


def _cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its live children, the persistent
    simulator workers (read from Linux's /proc; elsewhere this process alone)."""
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for children in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        for pid in children.read_text().split():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # the worker ended meanwhile
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _rollout_summary(results, controllers) -> dict[str, Any]:
    per_task: dict[str, list[int]] = {}
    for r in results:
        k = per_task.setdefault(str(r.job.task_index), [0, 0])
        k[0] += int(r.success)
        k[1] += 1
    steps = sum(len(c.rows["actions"]) for c in controllers)
    expert_steps = sum(int(np.sum(c.rows["expert_executed"])) for c in controllers)
    return {
        "mixture_successes": per_task,
        "steps": steps,
        "expert_step_fraction": round(expert_steps / max(1, steps), 3),
        "infrastructure_failures": sum(r.status != "ok" for r in results),
    }


def _fit(config: DaggerConfig, model: SmallVLA | None, data: Sequence[dict], steps: int, log) -> SmallVLA:
    samples = chunk_samples(data, config.chunk, object_dim=128)
    if model is None:
        model = SmallVLA(chunk=config.chunk, object_dim=128, hidden=config.hidden)
        fit_feature_scaling(model, samples)  # kept fixed afterwards: later fits continue from these weights
    log(f"dagger: fitting on {len(data)} episodes, {len(samples)} samples, {steps} steps")
    fit_small_vla(
        model,
        samples,
        iterations=steps,
        batch_size=config.batch_size,
        lr=config.lr,
        weight_decay=config.weight_decay,
        warmup=config.lr_warmup,
        final_lr_fraction=config.final_lr_fraction,
        obs_noise=config.obs_noise,
        seed=config.seed + len(samples),
        log=log,
    )
    return model

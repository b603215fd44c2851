"""The imagination world model: controllers act in the dynamics ensemble, a scorer judges.

``predict(tasks, solutions)`` starts every solution from its task's recorded initial state
(LIBERO's stored init state after the settling steps, kept in the checkpoint), lets the
solution's controller act on imagined observations for a whole episode, all episodes in
one batch (one ensemble forward and, for the small VLA, one policy forward per chunk), and
returns each episode's predicted success probability. MuJoCo is never stepped.

Guards against exploitation and compounding error:

- **Disagreement cut**: an episode whose ensemble spread exceeds ``max_disagreement``
  (normalised units) stops there; it is scored from its last trusted state and flagged
  ``info["cut"]``. Its probability is shrunk toward the training base rate by
  ``cut_shrink`` (a policy cannot earn success in states the model does not know).
- **Horizon**: at most ``horizon`` control steps (default the suite's episode limit).
- **Range clip**: imagined states are clipped to the range seen in training (+-10%).
- **Smoothed success**: an imagined episode ends in success when the scorer's success
  probability, averaged over the last ``success_window`` chunk states, exceeds
  ``success_threshold`` (LIBERO also ends an episode at success), not on one spike.

Solutions: an action array ``(T, 7)`` (open loop; the arm holds still after its end, gripper
unchanged, as the environment does), the small VLA's controller (``model``, ``instruction``,
``eps``: batched over episodes, noise from its pre-drawn ``eps``; ``predict`` writes the imagined
episode into the controller's record ``inputs``/``actions`` and its rollout's mask, so that GRPO
has the log-probs of a rollout that only imagination scored; a real execution replaces that record), or any object with ``act_batch(obs_list, t) -> (B, k, 7)``
or, slowest, ``act(obs, info)`` (called on a deep copy, one episode at a time). Closed-loop
controllers are asked for actions every ``chunk`` steps and see the imagined observation at
the start of the chunk (the observation is held within a chunk: an approximation).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from wmrl_core.experiments.noise import UniformNoise
from wmrl_core.types import CostModel, Outcome, Task
from wmrl_libero.world_models.checkpoint import WorldModelBundle, load_bundle
from wmrl_libero.world_models.features import split_state

__all__ = ["ImaginationWorldModel", "imagine", "ImaginedEpisodes"]

_HOLD = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float32)


class _OpenLoop:
    """Action arrays of several episodes; after an array's end, hold still with its gripper."""

    def __init__(self, arrays: list[np.ndarray]):
        self.arrays = [np.asarray(a, dtype=np.float32).reshape(-1, 7) for a in arrays]

    def actions(self, obs: list[dict], t: int, k: int) -> np.ndarray:
        out = np.empty((len(self.arrays), k, 7), dtype=np.float32)
        for i, a in enumerate(self.arrays):
            hold = a[-1].copy() if len(a) else _HOLD.copy()
            hold[:6] = 0.0
            seg = a[t : t + k]
            out[i, : len(seg)] = seg
            out[i, len(seg) :] = hold
        return out


class _NoiseControllers:
    """The small VLA's closed-loop solutions, one policy forward for all episodes that share a
    model, whole policy chunks executed as in a real run: at every step ``s`` with
    ``s % chunk == 0`` the policy reads the observation and plans
    ``a_{s+j} = mu_j(o_s) + sigma * eps_{s+j}`` (j = 0..chunk-1). Imagination observes only at
    its own chunk boundaries, so a plan made inside a dynamics chunk reads the observation at
    the boundary (exact when the dynamics chunk equals the policy's, the shipped setting).

    With ``record``, each controller's ``inputs`` (one per planned chunk), ``actions`` (one
    per step) and mask row become the imagined episode, as a real execution records them
    (through the controller's ``clear_record``/``record_*``/``truncate_record``), so that the
    policy's ``log_probs`` gives a rollout scored only in imagination its gradient; a later real
    execution starts the record afresh (``LiberoEnvironment``)."""

    def __init__(self, controllers: list[Any], record: bool = False):
        self.controllers, self.record = controllers, record
        self.planned: list[torch.Tensor | None] = [None] * len(controllers)
        if record:
            for c in controllers:
                c.clear_record()

    def truncate(self, steps: np.ndarray) -> None:
        """Keep only the steps each episode actually imagined (before it ended or was cut)."""
        if self.record:
            for c, n in zip(self.controllers, steps):
                c.truncate_record(int(n))

    @torch.no_grad()
    def actions(self, obs: list[dict], t: int, k: int) -> np.ndarray:
        from wmrl_libero.policies.vla_interface import VLAInput

        out = np.tile(_HOLD, (len(self.controllers), k, 1))
        by_model: dict[int, list[int]] = {}
        for i, c in enumerate(self.controllers):
            by_model.setdefault(id(c.model), []).append(i)
        for rows in by_model.values():
            model = self.controllers[rows[0]].model
            for s in range(t, t + k):
                live = [i for i in rows if s < len(self.controllers[i].eps)]
                if not live:
                    break
                if s % model.chunk == 0:  # every episode of this model plans at the same step
                    x = [VLAInput.from_obs(obs[i], self.controllers[i].instruction) for i in live]
                    dist = model.distribution(x)
                    for j, i in enumerate(live):
                        c = self.controllers[i]
                        n = min(model.chunk, len(c.eps) - s)
                        self.planned[i] = dist.mean[j, :n] + dist.stddev[j, :n] * c.eps[s : s + n]
                        if self.record:
                            c.record_input(x[j])
                for i in live:
                    a = self.planned[i][s % model.chunk]
                    out[i, s - t] = a.clamp(-1, 1).numpy()
                    if self.record:
                        self.controllers[i].record_action(a)
        return out


class _PerEpisode:
    """Any controller: ``act_batch`` when it has one, else ``act`` on a deep copy (the real
    execution must not inherit imagined state)."""

    def __init__(self, controllers: list[Any]):
        self.controllers = [c if hasattr(c, "act_batch") else copy.deepcopy(c) for c in controllers]
        self.queues: list[list[np.ndarray]] = [[] for _ in controllers]

    def actions(self, obs: list[dict], t: int, k: int) -> np.ndarray:
        out = np.empty((len(self.controllers), k, 7), dtype=np.float32)
        for i, c in enumerate(self.controllers):
            q = self.queues[i]
            while len(q) < k:
                chunk = c.act_batch([obs[i]], t)[0] if hasattr(c, "act_batch") else c.act(obs[i], {})
                q.extend(np.asarray(chunk, dtype=np.float32).reshape(-1, 7))
            out[i] = np.stack(q[:k])
            del q[:k]
        return out


def _actors(solutions: Sequence[Any], record: bool = False) -> list[tuple[list[int], Any]]:
    """Group solutions by how they are batched: ``[(indices, actor), ...]``."""
    groups: dict[str, list[int]] = {"open": [], "vla": [], "other": []}
    for i, s in enumerate(solutions):
        if all(hasattr(s, a) for a in ("model", "instruction", "eps", "inputs", "actions")):
            groups["vla"].append(i)
        elif hasattr(s, "act") or hasattr(s, "act_batch"):
            groups["other"].append(i)
        else:
            groups["open"].append(i)
    out = []
    if groups["open"]:
        out.append((groups["open"], _OpenLoop([solutions[i] for i in groups["open"]])))
    if groups["vla"]:
        out.append((groups["vla"], _NoiseControllers([solutions[i] for i in groups["vla"]], record)))
    if groups["other"]:
        out.append((groups["other"], _PerEpisode([solutions[i] for i in groups["other"]])))
    return out


class ImaginedEpisodes:
    """What :func:`imagine` returns (numpy arrays over episodes ``B`` and chunk states ``C+1``).

    :param states: (B, C+1, D) imagined states at chunk boundaries (frozen after an episode ends).
    :param disagreement: (B, C) ensemble spread of each chunk prediction.
    :param success_prob: (B,) smoothed scorer probability at the end (or at success).
    :param steps: (B,) control steps imagined; ``cut``: (B,) stopped by disagreement;
        ``succeeded``: (B,) ended by the smoothed success rule.
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)


@torch.no_grad()
def imagine(
    bundle: WorldModelBundle,
    task_indices: Sequence[int],
    start_states: np.ndarray,
    solutions: Sequence[Any],
    *,
    horizon: int,
    max_disagreement: float = 1.0,
    success_window: int = 3,
    success_threshold: float = 0.5,
    record: bool = False,
) -> ImaginedEpisodes:
    """Roll every solution out in the ensemble from its start state (see module docstring).
    ``record``: the small VLA's controllers keep the imagined episode (see :class:`_NoiseControllers`)."""
    dyn, scorer = bundle.dynamics, bundle.scorer
    if dyn is None:
        raise ValueError(
            "this checkpoint has no dynamics model; train it with `wmrl-libero train-wm` (not --scorer-only)"
        )
    k = dyn.chunk
    B = len(solutions)
    tasks = torch.as_tensor(np.asarray(task_indices, dtype=np.int64))
    state = torch.as_tensor(np.asarray(start_states, dtype=np.float32))
    n_chunks = int(np.ceil(horizon / k))
    states = [state.clone()]
    spreads = []
    active = torch.ones(B, dtype=torch.bool)
    cut = torch.zeros(B, dtype=torch.bool)
    succeeded = torch.zeros(B, dtype=torch.bool)
    steps = torch.zeros(B, dtype=torch.long)
    probs_hist = [scorer.success_probability(state, tasks)]
    actors = _actors(solutions, record)
    object_len = [bundle.object_len.get(int(t), bundle.object_dim) for t in task_indices]
    for c in range(n_chunks):
        obs = [split_state(state[i].numpy(), object_len[i]) for i in range(B)]
        actions = np.zeros((B, k, 7), dtype=np.float32)
        for rows, actor in actors:
            actions[rows] = actor.actions([obs[i] for i in rows], c * k, k)
        nxt, spread = dyn.step(state, torch.as_tensor(actions), tasks)
        spreads.append(spread)
        trusted = spread <= max_disagreement
        newly_cut = active & ~trusted
        cut |= newly_cut
        advance = active & trusted
        state = torch.where(advance[:, None], nxt, state)
        steps += advance.long() * min(k, horizon - c * k)
        states.append(state.clone())
        probs_hist.append(scorer.success_probability(state, tasks))
        window = torch.stack(probs_hist[-success_window:]).mean(0)
        done_now = advance & (window > success_threshold)
        succeeded |= done_now
        active &= ~(newly_cut | done_now)
        if not active.any():
            break
    for rows, actor in actors:
        if isinstance(actor, _NoiseControllers):
            actor.truncate(steps.numpy()[rows])
    probs = torch.stack(probs_hist)  # (C+1, B), frozen values repeat after an episode stops
    final = probs[-success_window:].mean(0)
    final = torch.where(succeeded, torch.maximum(final, torch.full_like(final, success_threshold)), final)
    return ImaginedEpisodes(
        states=torch.stack(states, 1).numpy(),
        disagreement=torch.stack(spreads, 1).numpy(),
        success_prob=final.numpy(),
        steps=steps.numpy(),
        cut=cut.numpy(),
        succeeded=succeeded.numpy(),
    )


class ImaginationWorldModel:
    """WMRL world model ``libero-imagination``.

    :param env: the WMRL LIBERO environment (used only to start from an init state missing
        from the checkpoint: one reset, cached; and for the episode limit).
    :param checkpoint: a ``wmrl-libero train-wm`` checkpoint.
    :param horizon: control steps imagined (default: the environment's episode limit, or 520).
    :param max_disagreement: ensemble spread (normalised units) above which an episode is cut;
        default ``disagreement_factor`` times the 99th percentile of the spread on training data.
    :param cut_shrink: weight of the training base rate in a cut episode's probability.
    :param noise_scores: the control of every learning claim: imagine as usual (a rollout's
        log-probs need the states it visited) but score each episode i.i.d. U(0, 1) from the
        core's noise stream (:class:`wmrl_core.experiments.noise.UniformNoise`, the one the
        ``noise`` world model draws from); what a policy learns from it is the optimiser's
        drift, not the task. The ``noise`` world model itself cannot serve here: it visits no
        state, so a LIBERO rollout it scores has no log-probs.
    :param seed: seed of the noise scores; ``None`` takes the run's (torch's initial seed).
    """

    def __init__(
        self,
        env=None,
        *,
        checkpoint: str,
        horizon: int | None = None,
        max_disagreement: float | None = None,
        disagreement_factor: float = 3.0,
        cut_shrink: float = 0.5,
        success_window: int = 3,
        success_threshold: float = 0.5,
        noise_scores: bool = False,
        seed: int | None = None,
    ):
        self.env = env
        self.noise_scores = bool(noise_scores)
        self.noise = UniformNoise(seed=seed)
        self.bundle = load_bundle(checkpoint)
        self.horizon = horizon or getattr(env, "max_episode_steps", None) or 520
        if max_disagreement is None:
            q99 = float(self.bundle.dynamics.train_disagreement_q99) if self.bundle.dynamics is not None else 1.0
            max_disagreement = disagreement_factor * q99 if np.isfinite(q99) else 1.0
        self.max_disagreement, self.cut_shrink = max_disagreement, cut_shrink
        self.success_window, self.success_threshold = success_window, success_threshold
        self.base_rate = float(self.bundle.meta.get("train_success_rate", 0.5))
        self.cost = CostModel(per_call_s=0.05, per_item_s=0.002)
        self._missing_starts: dict[tuple[int, int], np.ndarray] = {}

    def start_state(self, task: Task) -> np.ndarray:
        from wmrl_libero.world_models.features import state_vector

        key = (int(task.data["task_index"]), int(task.data["init_state"]))
        if key in self.bundle.initial_states:
            return self.bundle.initial_states[key]
        if key not in self._missing_starts:
            if self.env is None or not hasattr(self.env, "initial_observation"):
                raise KeyError(
                    f"no recorded initial state for task {key[0]} init state {key[1]} in the checkpoint "
                    "and no environment to reset; record an episode from it or pass env="
                )
            obs = self.env.initial_observation(task)  # one MuJoCo reset (settling steps), never a policy step
            self._missing_starts[key] = state_vector(obs["proprio"], obs["object_state"], self.bundle.object_dim)
        return self._missing_starts[key]

    def imagine(self, tasks: Sequence[Task], solutions: Sequence[Any], *, record: bool = False) -> ImaginedEpisodes:
        starts = np.stack([self.start_state(t) for t in tasks])
        return imagine(
            self.bundle,
            [int(t.data["task_index"]) for t in tasks],
            starts,
            solutions,
            horizon=self.horizon,
            max_disagreement=self.max_disagreement,
            success_window=self.success_window,
            success_threshold=self.success_threshold,
            record=record,
        )

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        if len(tasks) != len(solutions):
            raise ValueError(f"{len(tasks)} tasks but {len(solutions)} solutions")
        if not tasks:
            return []
        start = time.perf_counter()
        ep = self.imagine(tasks, solutions, record=True)  # a rollout scored only here still has its log-probs
        seconds = time.perf_counter() - start
        if self.noise_scores:  # the control: one draw of the noise stream per call
            noise = self.noise.draw(len(tasks))
        out = []
        for i in range(len(tasks)):
            p = float(ep.success_prob[i])
            if ep.cut[i]:
                p = (1 - self.cut_shrink) * p + self.cut_shrink * self.base_rate
            if self.noise_scores:
                p = float(noise[i])
            out.append(
                Outcome(
                    status="ok",
                    score=p,
                    info={
                        "imagined_steps": int(ep.steps[i]),
                        "cut": bool(ep.cut[i]),
                        "succeeded": bool(ep.succeeded[i]),
                        "max_disagreement": float(ep.disagreement[i].max()),
                        "batch_seconds": seconds,
                    },
                )
            )
        return out

    def state_dict(self) -> dict[str, int]:
        """The noise stream's position (the model itself is fixed), so a resumed run continues it."""
        return self.noise.state_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.noise.load_state_dict(state)

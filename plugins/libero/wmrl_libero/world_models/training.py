"""``wmrl-libero train-wm``: fit the dynamics ensemble and the scorer on recorded episodes."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from wmrl_libero.world_models.checkpoint import WorldModelBundle, save_bundle
from wmrl_libero.world_models.dynamics import fit_dynamics
from wmrl_libero.world_models.features import (
    Episode,
    load_episodes,
    split_by_init_state,
)
from wmrl_libero.world_models.scorer import fit_scorer

__all__ = ["train_world_models", "initial_states_of"]


def initial_states_of(episodes: Sequence[Episode]) -> dict[tuple[int, int], np.ndarray]:
    """``(task, init_state) -> first recorded state`` (LIBERO's init state after settling)."""
    return {(e.task_index, e.init_state): e.states[0] for e in episodes}


def train_world_models(
    paths: Iterable[str | Path],
    out: str | Path,
    *,
    heldout_init_states: Iterable[int] = range(40, 50),
    object_dim: int = 128,
    chunk: int = 4,
    members: int = 5,
    hidden: int = 128,
    dynamics_iterations: int = 2000,
    scorer_iterations: int = 1500,
    rollout_chunks: int = 1,
    seed: int = 0,
    suite: str = "libero_10",
    log=print,
) -> Path:
    """Train on every episode not from a held-out init state and save one checkpoint.

    The initial states of *all* episodes (held-out included) go into the checkpoint: they are
    the simulator's start states, not outcomes, and imagination needs them to start.
    """
    paths = [str(p) for p in paths]
    episodes = load_episodes(paths, object_dim)
    train, heldout = split_by_init_state(episodes, heldout_init_states)
    if not train:
        raise ValueError("every episode is from a held-out init state; record training episodes from init states 0-39")
    n_succ = sum(e.success for e in train)
    log(
        f"{len(train)} training episodes ({n_succ} successes, {len(train) - n_succ} failures), "
        f"{len(heldout)} held out (not used)"
    )
    start = time.time()
    dynamics = fit_dynamics(
        train,
        chunk=chunk,
        members=members,
        hidden=hidden,
        iterations=dynamics_iterations,
        rollout_chunks=rollout_chunks,
        seed=seed,
        log=log,
    )
    scorer = fit_scorer(train, hidden=hidden, iterations=scorer_iterations, seed=seed, log=log)
    meta = dict(
        data=paths,
        train_episodes=len(train),
        train_successes=n_succ,
        train_success_rate=n_succ / len(train),
        heldout_init_states=sorted(set(heldout_init_states)),
        seed=seed,
        chunk=chunk,
        rollout_chunks=rollout_chunks,
        seconds=time.time() - start,
        observations="physics state: proprio 16 + object_state (padded), task index; no images",
    )
    bundle = WorldModelBundle(
        dynamics,
        scorer,
        object_dim,
        suite,
        initial_states_of(episodes),
        {e.task_index: e.object_len for e in episodes},
        meta,
    )
    log(f"trained in {meta['seconds']:.0f} s")
    return save_bundle(bundle, out)

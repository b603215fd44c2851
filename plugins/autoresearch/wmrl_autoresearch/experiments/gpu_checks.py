"""The AutoResearch plugin's GPU checks (registered through ``wmrl_register_gpu_checks``; ``python
benchmarks/gpu_check.py``) on a machine with an NVIDIA GPU and ``pip install vllm==0.31.0``:

* ``vllm_generate``: the code agent's vLLM backend sampling a group of completions from a tiny
  Llama saved with ``save_pretrained`` (tokens/s);
* ``weight_sync``: a change to the training weights pushed into the vLLM engine by
  ``after_update()``: before the sync the engine's log-probabilities of its own samples disagree
  with the training model's, after it they agree (max |difference|, nats);
* ``tempered_log_probs``: sampling at temperature 0.7, the engine's log-probs of its samples equal
  the training model's tempered recomputation (max |difference|, nats);
* ``llm_world_model``: the LLM world model predicting outcomes on the policy's own engine
  (``LLMWorldModel(policy=agent)``; predictions/s).

Each check takes the context ``ctx`` of its process (``ctx["tmp"]``: a temporary folder) and returns
its figures, or raises. ``gpu_check`` runs every check in a process of its own, so each builds its
own engine.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

SYNC_TOLERANCE = 2e-3
"""Largest |log p_engine - log p_training| (nats, fp32) accepted after a weight sync; two
different kernels of one fp32 model agree to ~1e-5, a stale engine differs by ~0.1 or more."""


def tiny_agent(ctx: dict[str, Any], temperature: float = 1.0) -> Any:
    """One tiny Llama code agent on the vLLM backend, shared by the vLLM checks of one process."""
    key = f"agent@{temperature:g}"
    if key not in ctx:
        from wmrl_autoresearch.llm.policy import LLMCodeAgent
        from wmrl_autoresearch.llm.testing import make_tiny_causal_lm

        folder = make_tiny_causal_lm(Path(ctx["tmp"]) / "tiny-llama", hidden_size=64)
        ctx[key] = LLMCodeAgent(
            model=str(folder),
            backend="vllm",
            device="cuda",
            dtype="float32",
            max_new_tokens=48,
            temperature=temperature,
            recompute_old_log_probs=False,
            extract={"allow_untagged": True, "check_syntax": False},
            vllm={"gpu_memory_utilization": 0.2, "enforce_eager": True, "max_model_len": 1024},
        )
        ctx.setdefault("close", []).append(ctx[key].close)  # run_checks frees the engine at the end
    return ctx[key]


def gpu_check_tasks(n: int) -> list[Any]:
    from wmrl_core.types import Task

    return [
        Task(id=f"gpu-check-{i}", description="Train a classifier on the iris dataset and report accuracy.")
        for i in range(n)
    ]


def check_vllm_generate(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch

    agent = tiny_agent(ctx)
    torch.manual_seed(0)
    start = time.perf_counter()
    rollouts = agent.generate(gpu_check_tasks(4), 8)
    elapsed = time.perf_counter() - start
    tokens = int(rollouts.mask.sum().item())
    if len(rollouts) != 32:
        raise AssertionError(f"expected 32 rollouts, got {len(rollouts)}")
    ctx["rollouts"] = rollouts
    return {"rollouts": len(rollouts), "tokens": tokens, "tokens_per_s": round(tokens / elapsed, 1)}


def engine_vs_training_gap(agent: Any) -> float:
    """Max |sampler log-prob - training-model log-prob| over a fresh batch of samples."""
    import torch

    torch.manual_seed(1)
    rollouts = agent.generate(gpu_check_tasks(2), 4)
    with torch.no_grad():
        training = agent.log_probs(rollouts)
    mask = rollouts.mask.bool()
    return float((rollouts.old_log_probs.to(training.device) - training)[mask.to(training.device)].abs().max())


def check_weight_sync(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch

    agent = tiny_agent(ctx)
    before = engine_vs_training_gap(agent)
    with torch.no_grad():  # stands in for an optimizer step: a large change to every weight
        for p in agent.model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    stale = engine_vs_training_gap(agent)
    start = time.perf_counter()
    agent.after_update()
    sync_s = time.perf_counter() - start
    after = engine_vs_training_gap(agent)
    if not before < SYNC_TOLERANCE:
        raise AssertionError(f"engine and training model disagree before any update: {before:.3g} nats")
    if not stale > 10 * SYNC_TOLERANCE:
        raise AssertionError(
            f"changing the training weights did not change its log-probs ({stale:.3g}); the check is blind"
        )
    if not after < SYNC_TOLERANCE:
        raise AssertionError(
            f"after after_update() the engine still disagrees by {after:.3g} nats: the weights were not synced"
        )
    return {
        "gap_before_update": before,
        "gap_stale_engine": stale,
        "gap_after_sync": after,
        "sync_s": round(sync_s, 3),
        "syncs": agent.backend.n_weight_syncs,
    }


def check_tempered_log_probs(ctx: dict[str, Any]) -> dict[str, Any]:
    """Sampling at temperature 0.7, the engine's log-probs of its samples equal the training model's
    recomputation ``log_softmax(logits / 0.7)`` (the backend asks for ``processed_logprobs``;
    vLLM's raw ones are the untempered model's and differ by far more than the tolerance)."""
    agent = tiny_agent(ctx, temperature=0.7)
    gap = engine_vs_training_gap(agent)
    if not gap < SYNC_TOLERANCE:
        raise AssertionError(
            f"at temperature 0.7 the engine's sampling log-probs differ from the recomputed ones by {gap:.3g} nats: "
            "the engine returns untempered log-probs (logprobs_mode)"
        )
    return {"temperature": 0.7, "max_gap_nats": gap}


def check_llm_world_model(ctx: dict[str, Any]) -> dict[str, Any]:
    from wmrl_autoresearch.llm.world_model import LLMWorldModel

    agent = tiny_agent(ctx)
    wm = LLMWorldModel(policy=agent, max_new_tokens=16)
    tasks = gpu_check_tasks(16)
    scripts = ["from sklearn.datasets import load_iris\nprint('accuracy', 0.9)\n"] * len(tasks)
    start = time.perf_counter()
    outcomes = wm.predict(tasks, scripts)
    elapsed = time.perf_counter() - start
    if len(outcomes) != len(tasks):
        raise AssertionError(f"{len(outcomes)} predictions for {len(tasks)} scripts")
    if wm.backend is not agent.backend:
        raise AssertionError("the world model did not use the policy's engine")
    return {
        "predictions": len(outcomes),
        "predictions_per_s": round(len(outcomes) / elapsed, 1),
        "parse_failures": wm.stats["parse_failures"],
        "shared_engine": True,
    }

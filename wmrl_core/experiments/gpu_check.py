"""Every check that needs an NVIDIA GPU, in one place.

CI machines have no GPU, so the paths below are unit-tested against stand-ins only. On a
machine with an NVIDIA GPU this script runs them for real, on models it builds locally (no
download), and prints what ran and how fast:

* ``cuda``          a bf16 matmul on the GPU (TFLOP/s), the device's name and memory;
* ``vllm_generate`` the code agent's vLLM backend sampling a group of completions from a tiny
  Llama saved with ``save_pretrained`` (tokens/s);
* ``weight_sync``   a change to the training weights pushed into the vLLM engine by
  ``after_update()``: before the sync the engine's log-probabilities of its own samples
  disagree with the training model's, after it they agree (max |difference|);
* ``llm_world_model`` the LLM world model predicting outcomes on the policy's own engine
  (``LLMWorldModel(policy=agent)``; predictions/s);
* ``libero_egl``    a LIBERO camera render through EGL (``MUJOCO_GL=egl``; frames/s);
* ``trl_vllm``      two steps of ``WMRLGRPOTrainer`` (integrations/trl) generating with vLLM in
  colocate mode on a tiny Qwen2, on the vowels test domain (s/step, the fusion's weights);
* ``verl_fit``      where ``.venv-verl`` exists (integrations/verl), two steps of verl's ``fit()``
  with the ``wmrl`` reward manager, estimator and trainer (exit status, s).

Needs, besides the repository's CI install: ``pip install vllm`` (a release with
``LLM.collective_rpc``, >= 0.8) for the vLLM checks, and the LIBERO plugin for ``libero_egl``.

Usage::

    python benchmarks/gpu_check.py                 # all checks
    python benchmarks/gpu_check.py --only cuda libero_egl
    python benchmarks/gpu_check.py --json gpu_check.json

Exit status: 0 every selected check passed, 1 some check failed, 2 no NVIDIA GPU (nothing run).
``.ci/run`` calls it only where ``nvidia-smi -L`` lists a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CHECKS = ("cuda", "vllm_generate", "weight_sync", "llm_world_model", "libero_egl", "trl_vllm", "verl_fit")
SYNC_TOLERANCE = 2e-3
"""Largest |log p_engine - log p_training| (nats, fp32) accepted after a weight sync; two
different kernels of one fp32 model agree to ~1e-5, a stale engine differs by ~0.1 or more."""


@dataclass
class CheckResult:
    name: str
    ok: bool
    seconds: float
    figures: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def gpu_available() -> tuple[bool, str]:
    """(True, device name) when torch sees a CUDA device, else (False, why not)."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, f"torch {torch.__version__} sees no CUDA device (CPU build, or no NVIDIA driver)"
    return True, torch.cuda.get_device_name(0)


# ---------------------------------------------------------------- the checks


def check_cuda(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch

    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    start = time.perf_counter()
    reps = 20
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    props = torch.cuda.get_device_properties(0)
    return {
        "device": props.name,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "bf16_tflops": round(2 * n**3 * reps / elapsed / 1e12, 1),
    }


def _tiny_agent(ctx: dict[str, Any]) -> Any:
    """One tiny Llama code agent on the vLLM backend, shared by the vLLM checks."""
    if "agent" not in ctx:
        from wmrl_autoresearch.llm.policy import LLMCodeAgent
        from wmrl_autoresearch.llm.testing import make_tiny_causal_lm

        folder = make_tiny_causal_lm(Path(ctx["tmp"]) / "tiny-llama", hidden_size=64)
        ctx["agent"] = LLMCodeAgent(
            model=str(folder),
            backend="vllm",
            device="cuda",
            dtype="float32",
            max_new_tokens=48,
            recompute_old_log_probs=False,
            extract={"allow_untagged": True, "check_syntax": False},
            vllm={"gpu_memory_utilization": 0.2, "enforce_eager": True, "max_model_len": 1024},
        )
    return ctx["agent"]


def _tasks(n: int) -> list[Any]:
    from wmrl_core.types import Task

    return [
        Task(id=f"gpu-check-{i}", description="Train a classifier on the iris dataset and report accuracy.")
        for i in range(n)
    ]


def check_vllm_generate(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch

    agent = _tiny_agent(ctx)
    torch.manual_seed(0)
    start = time.perf_counter()
    rollouts = agent.generate(_tasks(4), 8)
    elapsed = time.perf_counter() - start
    tokens = int(rollouts.mask.sum().item())
    if len(rollouts) != 32:
        raise AssertionError(f"expected 32 rollouts, got {len(rollouts)}")
    ctx["rollouts"] = rollouts
    return {"rollouts": len(rollouts), "tokens": tokens, "tokens_per_s": round(tokens / elapsed, 1)}


def _engine_vs_training_gap(agent: Any) -> float:
    """Max |sampler log-prob - training-model log-prob| over a fresh batch of samples."""
    import torch

    torch.manual_seed(1)
    rollouts = agent.generate(_tasks(2), 4)
    with torch.no_grad():
        training = agent.log_probs(rollouts)
    mask = rollouts.mask.bool()
    return float((rollouts.old_log_probs.to(training.device) - training)[mask.to(training.device)].abs().max())


def check_weight_sync(ctx: dict[str, Any]) -> dict[str, Any]:
    import torch

    agent = _tiny_agent(ctx)
    before = _engine_vs_training_gap(agent)
    with torch.no_grad():  # stands in for an optimizer step: a large change to every weight
        for p in agent.model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    stale = _engine_vs_training_gap(agent)
    start = time.perf_counter()
    agent.after_update()
    sync_s = time.perf_counter() - start
    after = _engine_vs_training_gap(agent)
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


def check_llm_world_model(ctx: dict[str, Any]) -> dict[str, Any]:
    from wmrl_autoresearch.llm.world_model import LLMWorldModel

    agent = _tiny_agent(ctx)
    wm = LLMWorldModel(policy=agent, max_new_tokens=16)
    tasks = _tasks(16)
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


def check_trl_vllm(ctx: dict[str, Any]) -> dict[str, Any]:
    from wmrl_trl import WMRLGRPOTrainer
    from wmrl_trl.testing import tiny_grpo_config

    from wmrl_core.vowels import make_tiny_qwen2, vowels_config

    model = make_tiny_qwen2(Path(ctx["tmp"]) / "qwen2")
    args = tiny_grpo_config(
        str(Path(ctx["tmp"]) / "trl"),
        max_steps=2,
        use_cpu=False,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.2,
    )
    trainer = WMRLGRPOTrainer.from_config(vowels_config(), model=str(model), args=args, render=lambda t: t.description)
    env = trainer.environment
    start = time.perf_counter()
    trainer.train()
    elapsed = time.perf_counter() - start
    if trainer.wmrl_step != 2:
        raise AssertionError(f"{trainer.wmrl_step} WMRL steps for max_steps=2")
    record = trainer.last_wmrl["record"]
    return {
        "s_per_step": round(elapsed / 2, 2),
        "anchor_rows_executed": env.executed,
        "w_world_model": record["fusion/w_world_model"],
    }


def check_verl_fit(ctx: dict[str, Any]) -> dict[str, Any]:
    import subprocess

    python = Path(__file__).resolve().parents[1] / ".venv-verl" / "bin" / "python"
    if not python.exists():
        raise FileNotFoundError(f"{python} is missing: create the verl environment (docs/integrations.md)")
    script = Path(__file__).resolve().parents[1] / "integrations" / "verl" / "gpu_fit.py"
    start = time.perf_counter()
    done = subprocess.run([str(python), str(script), ctx["tmp"]], capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise AssertionError(f"verl fit exited {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")
    return {"seconds": round(time.perf_counter() - start, 1), "tail": done.stdout.strip().splitlines()[-1:]}


RUNNERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "cuda": check_cuda,
    "vllm_generate": check_vllm_generate,
    "weight_sync": check_weight_sync,
    "llm_world_model": check_llm_world_model,
    "libero_egl": check_libero_egl,
    "trl_vllm": check_trl_vllm,
    "verl_fit": check_verl_fit,
}


def run_checks(names: list[str]) -> list[CheckResult]:
    results = []
    with tempfile.TemporaryDirectory(prefix="wmrl-gpu-check-") as tmp:
        ctx: dict[str, Any] = {"tmp": tmp}
        for name in names:
            start = time.perf_counter()
            try:
                figures = RUNNERS[name](ctx)
                results.append(CheckResult(name, True, time.perf_counter() - start, figures))
            except Exception as exc:  # a failed check is reported, the others still run
                traceback.print_exc()
                results.append(
                    CheckResult(name, False, time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
                )
            r = results[-1]
            print(
                f"{'ok    ' if r.ok else 'FAILED'} {r.name:16s} {r.seconds:7.2f} s  "
                f"{json.dumps(r.figures) if r.ok else r.error}",
                flush=True,
            )
        agent = ctx.get("agent")
        if agent is not None:
            agent.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=CHECKS, default=list(CHECKS), help="checks to run (default: all)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    found, device = gpu_available()
    if not found:
        print(
            f"gpu_check: no NVIDIA GPU: {device}. Nothing was run; run this on a machine with a GPU "
            "(and `pip install vllm` there for the vLLM checks).",
            file=sys.stderr,
        )
        return 2
    print(f"gpu_check on {device}: {', '.join(args.only)}", flush=True)
    results = run_checks(args.only)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2, default=str))
    failed = [r.name for r in results if not r.ok]
    print(
        f"gpu_check: {len(results) - len(failed)}/{len(results)} passed"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every check that needs an NVIDIA GPU, in one place.

CI machines have no GPU, so the paths below are unit-tested against stand-ins only. On a
machine with an NVIDIA GPU this runs them for real, on models it builds locally (no
download), and prints what ran and how fast. The plugins' checks are registered through the
``wmrl_register_gpu_checks`` hook (and imported only when run); the ones below that need this
checkout (the integrations) are defined here:

* ``cuda``          a bf16 matmul on the GPU (TFLOP/s), the device's name and memory;
* ``vllm_generate`` the code agent's vLLM backend sampling a group of completions from a tiny
  Llama saved with ``save_pretrained`` (tokens/s);
* ``weight_sync``   a change to the training weights pushed into the vLLM engine by
  ``after_update()``: before the sync the engine's log-probabilities of its own samples
  disagree with the training model's, after it they agree (max |difference|);
* ``tempered_log_probs`` sampling at temperature 0.7, the engine's log-probs of its samples equal
  the training model's tempered recomputation (``logprobs_mode="processed_logprobs"``);
* ``llm_world_model`` the LLM world model predicting outcomes on the policy's own engine
  (``LLMWorldModel(policy=agent)``; predictions/s);
* ``libero_egl``    a LIBERO camera render through EGL (``MUJOCO_GL=egl``; frames/s);
* ``trl_vllm``      two steps of ``WMRLGRPOTrainer`` (integrations/trl) generating with vLLM in
  colocate mode on a tiny Qwen2, on the vowels test domain (s/step, the fusion's weights);
* ``verl_fit``      in ``.venv-verl-gpu`` (``verl[vllm]==0.9.1`` with its own pins; integrations/verl), two steps of verl's ``fit()``
  with the ``wmrl`` reward manager, estimator and trainer (exit status, s).

Needs, besides the repository's CI install: ``pip install vllm==0.31.0`` (it pins torch 2.13.0;
TRL 1.16 supports vLLM 0.22-0.31) for the vLLM checks, and the LIBERO plugin for ``libero_egl``.

Each check runs in a process of its own (``--child NAME``), which prints one JSON line: a check
that crashes its process or leaves an engine behind takes no other check with it.

Usage::

    python benchmarks/gpu_check.py                 # all checks
    python benchmarks/gpu_check.py --only cuda libero_egl
    python benchmarks/gpu_check.py --json gpu_check.json

Exit status: 0 every selected check passed, 1 some check failed, 2 no NVIDIA GPU (nothing run).
``.ci/run`` calls it only where ``nvidia-smi -L`` lists a GPU.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[1]
"""The repository checkout: ``verl_fit`` runs ``integrations/verl/gpu_fit.py`` in ``.venv-verl-gpu`` there
(neither is part of an installed package)."""
Check = Callable[[dict[str, Any]], dict[str, Any]]
"""A check: takes the shared context (``ctx["tmp"]``, a temporary folder; ``ctx["close"]``,
functions called once every check has run) and returns its figures, or raises."""


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

    python = CHECKOUT / ".venv-verl-gpu" / "bin" / "python"  # verl[vllm]'s own pins (docs/integrations.md)
    if not python.exists():
        raise FileNotFoundError(f"{python} is missing: create verl's GPU environment (docs/integrations.md, .ci/run)")
    script = CHECKOUT / "integrations" / "verl" / "gpu_fit.py"
    start = time.perf_counter()
    done = subprocess.run([str(python), str(script), ctx["tmp"]], capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise AssertionError(f"verl fit exited {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")
    return {"seconds": round(time.perf_counter() - start, 1), "tail": done.stdout.strip().splitlines()[-1:]}


def _registered_checks() -> dict[str, str | Callable[..., Any]]:
    """The installed plugins' checks (``wmrl_register_gpu_checks``), in registration order."""
    from wmrl_core.plugins import build_registry

    return {spec.name: spec.entry_point for spec in build_registry().gpu_checks}


RUNNERS: dict[str, Check | str] = {
    "cuda": check_cuda,
    **_registered_checks(),
    "trl_vllm": check_trl_vllm,
    "verl_fit": check_verl_fit,
}
"""Check name -> the check, or its entry point ``"module:function"`` (a plugin's check: one that does
not import fails that check only, with the ``ModuleNotFoundError``)."""
CHECKS = tuple(RUNNERS)


def resolve(runner: Check | str) -> Check:
    """The check itself, importing an entry point ``"module:function"``."""
    if callable(runner):
        return runner
    module, _, name = runner.partition(":")
    check: Check = getattr(importlib.import_module(module), name)
    return check


CHILD_TIMEOUT_S = 2400.0
"""Seconds one check's process may run before it is killed and reported failed."""


def run_checks(names: list[str], *, isolated: bool = False) -> list[CheckResult]:
    """Run the checks one after another; a failed check is reported and the others still run.

    :param isolated: each in a process of its own (what ``main`` does); else in this process, sharing
        one context (what the unit tests do with stand-in checks).
    """
    results = []
    with tempfile.TemporaryDirectory(prefix="wmrl-gpu-check-") as tmp:
        ctx: dict[str, Any] = {"tmp": tmp}
        for name in names:
            results.append(_run_child(name, tmp) if isolated else _run_here(name, ctx))
            r = results[-1]
            print(
                f"{'ok    ' if r.ok else 'FAILED'} {r.name:18s} {r.seconds:7.2f} s  "
                f"{json.dumps(r.figures) if r.ok else r.error}",
                flush=True,
            )
        for close in ctx.get("close", []):
            close()
    return results


def _run_here(name: str, ctx: dict[str, Any]) -> CheckResult:
    start = time.perf_counter()
    try:
        figures = resolve(RUNNERS[name])(ctx)
        return CheckResult(name, True, time.perf_counter() - start, figures)
    except Exception as exc:
        traceback.print_exc()
        return CheckResult(name, False, time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")


def _run_child(name: str, tmp: str) -> CheckResult:
    """``name`` in a fresh interpreter (``--child``), read back from the JSON line it prints last."""
    import subprocess

    start = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp))
    command = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--tmp", str(folder)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return CheckResult(name, False, time.perf_counter() - start, error=f"killed after {CHILD_TIMEOUT_S:g} s")
    sys.stderr.write(done.stderr)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        return CheckResult(
            name, False, time.perf_counter() - start, error=f"its process exited {done.returncode}: {' | '.join(tail)}"
        )
    return CheckResult(**json.loads(lines[-1]))


def _child(name: str, tmp: str) -> int:
    """One check in this process: its result as one JSON line on stdout."""
    ctx: dict[str, Any] = {"tmp": tmp}
    result = _run_here(name, ctx)
    for close in ctx.get("close", []):
        close()
    print(json.dumps(asdict(result), default=str), flush=True)
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=CHECKS, default=list(CHECKS), help="checks to run (default: all)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--child", choices=CHECKS, help=argparse.SUPPRESS)  # one check, in this process
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.tmp or tempfile.mkdtemp(prefix="wmrl-gpu-check-"))
    found, device = gpu_available()
    if not found:
        print(
            f"gpu_check: no NVIDIA GPU: {device}. Nothing was run; run this on a machine with a GPU "
            "(and `pip install vllm==0.31.0 torch==2.13.0` there for the vLLM checks).",
            file=sys.stderr,
        )
        return 2
    print(f"gpu_check on {device}: {', '.join(args.only)}", flush=True)
    results = run_checks(args.only, isolated=True)
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

"""Batched generation with vLLM on a GPU, with the trained weights synced in after each step.

vLLM is optional and GPU-only; importing this module does not import it. The engine is
created in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` is set unless the user set it), the
colocated layout TRL uses: the trainer's model and the engine share one GPU, so give vLLM a
fraction of the memory with ``gpu_memory_utilization`` (default here 0.35).

Weight sync (:meth:`VLLMBackend.load_weights`) hands vLLM Hugging Face-named tensors; each
vLLM model's ``load_weights`` maps HF names onto its fused layers (``q/k/v_proj`` ->
``qkv_proj``, ...). :func:`hf_weights_for_vllm` produces those tensors from the policy:
LoRA deltas are merged on the fly (``W + scale * B @ A``, the trainable model is not
modified) and wrapper prefixes (peft, torch.compile, activation checkpointing, DDP) are
stripped. With one GPU (tensor_parallel_size 1) the engine's model object is reached
directly (the attribute path TRL and verl use); otherwise, or when vLLM moved that object,
weights travel through ``LLM.collective_rpc`` to every worker.

Only the parts that need no engine are unit-tested on CPU (name mapping, LoRA merge,
sampling-parameter building, output conversion with a stand-in engine).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from wmrl_autoresearch.llm.backends.base import Generation
from wmrl_autoresearch.llm.sampling import SamplingConfig

__all__ = [
    "VLLMBackend",
    "import_vllm",
    "sampling_params_kwargs",
    "vllm_weight_name",
    "hf_weights_for_vllm",
    "find_vllm_model",
]

_VLLM_FIX = (
    "install vLLM on a CUDA machine (pip install vllm==0.31.0 torch==2.13.0: the release pinned to "
    "this torch), or set the component's kwarg backend: transformers"
)


def import_vllm() -> Any:
    """Import vllm or fail with the fix."""
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(
            f"backend='vllm' needs the `vllm` package, which is not importable ({exc}); {_VLLM_FIX}"
        ) from exc
    except Exception as exc:  # vLLM built against another torch/CUDA fails in odd ways
        raise ImportError(f"`import vllm` failed ({type(exc).__name__}: {exc}); {_VLLM_FIX}") from exc
    return vllm


LOGPROBS_MODE = "processed_logprobs"
"""``vllm.LLM(logprobs_mode=...)``: sampled tokens' log-probs after temperature (TRL passes the same)."""


def sampling_params_kwargs(
    sampling: SamplingConfig, n: int, *, want_logprobs: bool = False, seed: int | None = None
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` equivalent to ``sampling``.

    vLLM's ``top_k=-1`` and ``temperature=0`` mean "disabled" and "greedy". ``logprobs=0``
    returns the log-prob of each sampled token only. ``detokenize=False``: we decode
    ourselves from token ids.
    """
    if n < 1:
        raise ValueError(f"n={n}; ask for at least one completion per prompt")
    kw: dict[str, Any] = {
        "n": n,
        "max_tokens": sampling.max_new_tokens,
        "temperature": 0.0 if sampling.greedy else sampling.temperature,
        "top_p": 1.0 if sampling.greedy else sampling.top_p,
        "top_k": -1 if (sampling.greedy or sampling.top_k == 0) else sampling.top_k,
        "detokenize": False,
    }
    if sampling.stop_token_ids:
        kw["stop_token_ids"] = list(sampling.stop_token_ids)
    if want_logprobs:
        kw["logprobs"] = 0
    if seed is not None:
        kw["seed"] = int(seed)
    return kw


_PREFIXES = ("base_model.model.", "module.", "_orig_mod.")
_DROP = re.compile(r"(^|\.)(lora_[A-Za-z_]+|original_module)(\.|$)")


def vllm_weight_name(key: str) -> str | None:
    """The Hugging Face checkpoint name of a trainable-model state-dict key, or ``None``
    for tensors vLLM must not receive (LoRA factors, peft's saved originals).

    ``base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight`` ->
    ``model.layers.0.self_attn.q_proj.weight``.
    """
    if _DROP.search(key):
        return None
    changed = True
    while changed:
        changed = False
        for p in _PREFIXES:
            if key.startswith(p):
                key, changed = key[len(p) :], True
    key = key.replace("._checkpoint_wrapped_module", "").replace("._orig_mod", "")
    key = key.replace(".base_layer.", ".").replace(".modules_to_save.default.", ".")
    return key


def hf_weights_for_vllm(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(hf_name, tensor)`` for every weight vLLM needs, LoRA merged in, in the model's dtype.

    For a peft LoRA layer with base weight ``W`` the tensor sent is ``W + delta`` with
    ``delta = get_delta_weight(adapter)`` (``scale * B @ A``) for each active adapter; the
    adapter stays unmerged in the trainable model.
    """
    merged: dict[str, torch.Tensor] = {}
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:  # no peft: nothing can be a LoRA layer
        LoraLayer = None  # type: ignore[assignment]
    if LoraLayer is not None:
        for name, module in model.named_modules():
            if not isinstance(module, LoraLayer) or getattr(module, "merged", False):
                continue
            if getattr(module, "disable_adapters", False):
                continue
            base = module.get_base_layer()
            weight = base.weight.detach()
            delta = torch.zeros_like(weight)
            for adapter in module.active_adapters:
                if adapter in getattr(module, "lora_A", {}) or adapter in getattr(module, "lora_embedding_A", {}):
                    delta = delta + module.get_delta_weight(adapter).to(weight.dtype)
            merged[f"{name}.base_layer.weight"] = weight + delta
    with torch.no_grad():
        for key, tensor in model.state_dict().items():
            name = vllm_weight_name(key)
            if name is None:
                continue
            yield name, merged.get(key, tensor).detach()


_MODEL_PATHS = (
    ("llm_engine", "model_executor", "driver_worker", "worker", "model_runner", "model"),
    ("llm_engine", "model_executor", "driver_worker", "model_runner", "model"),
    ("llm_engine", "engine_core", "engine_core", "model_executor", "driver_worker", "worker", "model_runner", "model"),
)


def find_vllm_model(llm: Any) -> Any | None:
    """The in-process model object of a vLLM ``LLM`` (first attribute path that exists)."""
    for path in _MODEL_PATHS:
        obj = llm
        for attr in path:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        if obj is not None and hasattr(obj, "load_weights"):
            return obj
    return None


def _rpc_load_weights(worker: Any, weights: list[tuple[str, torch.Tensor]]) -> int:
    """Runs inside each vLLM worker (via ``collective_rpc``)."""
    worker.model_runner.model.load_weights(weights=weights)
    return len(weights)


_DTYPE_NAMES = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}


class VLLMBackend:
    """Sample with a vLLM engine.

    :param model: local path or hub id of the checkpoint vLLM loads (the *initial* policy).
    :param dtype: torch dtype or vLLM dtype string (``"auto"``, ``"bfloat16"`` ...).
    :param seed: engine seed; each request also gets a seed drawn from torch's global RNG
        so runs resume reproducibly from a trainer checkpoint.
    :param engine_kwargs: passed to ``vllm.LLM`` (``gpu_memory_utilization``,
        ``tensor_parallel_size``, ``max_model_len``, ``enforce_eager`` ...).
    :param llm: an existing engine (shared with another component, or a stand-in in tests).
    :param sampling_params_cls: ``vllm.SamplingParams`` unless given (tests).
    """

    name = "vllm"

    def __init__(
        self,
        model: str | None = None,
        *,
        tokenizer: str | None = None,
        dtype: Any = "auto",
        seed: int = 0,
        revision: str | None = None,
        trust_remote_code: bool = False,
        engine_kwargs: dict[str, Any] | None = None,
        llm: Any = None,
        sampling_params_cls: Callable[..., Any] | None = None,
    ):
        self.engine_kwargs = dict(engine_kwargs or {})
        if llm is None:
            if model is None:
                raise ValueError("VLLMBackend needs `model` (a path or hub id) or an existing `llm` engine")
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # keep the model in-process
            vllm = import_vllm()
            if not torch.cuda.is_available():
                raise RuntimeError(f"backend='vllm' needs a CUDA GPU and torch sees none; {_VLLM_FIX}")
            # processed: the log-probs of the distribution sampled from (after temperature), which is
            # what the trainer recomputes; vLLM's default returns the untempered model's
            kwargs = {"gpu_memory_utilization": 0.35, "enable_prefix_caching": True, "logprobs_mode": LOGPROBS_MODE}
            kwargs.update(self.engine_kwargs)
            llm = vllm.LLM(
                model=model,
                tokenizer=tokenizer or model,
                dtype=_DTYPE_NAMES.get(dtype, dtype) if isinstance(dtype, torch.dtype) else dtype,
                seed=seed,
                revision=revision,
                trust_remote_code=trust_remote_code,
                **kwargs,
            )
            sampling_params_cls = sampling_params_cls or vllm.SamplingParams
        if sampling_params_cls is None:
            sampling_params_cls = import_vllm().SamplingParams
        self.llm = llm
        self._sampling_params_cls = sampling_params_cls
        self.n_weight_syncs = 0

    def generate(
        self, prompts: Sequence[Sequence[int]], n: int, sampling: SamplingConfig, *, want_logprobs: bool = False
    ) -> list[list[Generation]]:
        params = [
            self._sampling_params_cls(
                **sampling_params_kwargs(
                    sampling, n, want_logprobs=want_logprobs, seed=int(torch.randint(0, 2**31 - 1, (1,)).item())
                )
            )
            for _ in prompts
        ]
        requests = [{"prompt_token_ids": [int(t) for t in p]} for p in prompts]
        outputs = self.llm.generate(requests, sampling_params=params, use_tqdm=False)
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        results = []
        for out in outputs:
            group = []
            for c in out.outputs:
                toks = [int(t) for t in c.token_ids]
                lps = None
                if want_logprobs:
                    if c.logprobs is None:
                        raise RuntimeError("vLLM returned no logprobs although logprobs=0 was requested")
                    lps = [float(step[tok].logprob) for tok, step in zip(toks, c.logprobs)]
                group.append(Generation(toks, lps, "length" if c.finish_reason == "length" else "stop"))
            results.append(group)
        return results

    def load_weights(self, weights: Iterator[tuple[str, torch.Tensor]]) -> int:
        """Copy HF-named weights into the engine; returns how many tensors were sent."""
        tp = int(self.engine_kwargs.get("tensor_parallel_size", 1))
        target = find_vllm_model(self.llm) if tp == 1 else None
        if target is not None:
            items = list(weights)
            target.load_weights(weights=items)
        elif hasattr(self.llm, "collective_rpc"):
            items = [(k, v.detach().cpu()) for k, v in weights]  # must cross process boundaries
            self.llm.collective_rpc(_rpc_load_weights, args=(items,))
        else:
            raise RuntimeError(
                "cannot reach the vLLM engine's model to sync weights (no known attribute path and no "
                "collective_rpc); use a vLLM release with LLM.collective_rpc (>= 0.8) or backend: transformers"
            )
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if callable(reset):
            reset()  # cached KV blocks were computed with the old weights
        self.n_weight_syncs += 1
        return len(items)

    def close(self) -> None:
        self.llm = None

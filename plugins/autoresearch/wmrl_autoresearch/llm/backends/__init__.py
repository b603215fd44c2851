"""Generation backends: ``transformers`` (CPU/GPU) and ``vllm`` (GPU, batched)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wmrl_autoresearch.llm.backends.base import Generation, GenerationBackend

BACKENDS = ("transformers", "vllm")

__all__ = ["Generation", "GenerationBackend", "BACKENDS", "check_backend", "generation_stop_ids", "make_backend"]


def check_backend(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"backend={name!r}; use one of {list(BACKENDS)}")
    return name


def generation_stop_ids(model: Any, tokenizer: Any) -> set[int]:
    """The ids generation stops at: the model's ``generation_config.eos_token_id`` (an int or a
    list; read under any peft wrapper) and the tokenizer's ``eos_token_id``."""
    get_base = getattr(model, "get_base_model", None)
    base = get_base() if callable(get_base) else model
    ids: set[int] = set()
    for src in (getattr(base.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if src is not None:
            ids.update([int(src)] if isinstance(src, int) else [int(x) for x in src])
    return ids


def make_backend(
    name: str,
    model: str,
    *,
    local_model: Callable[[], Any] | None,
    tokenizer: Any,
    tokenizer_name: str,
    stop_ids: set[int] | None = None,
    batch_size: int,
    dtype: Any,
    seed: int,
    revision: str | None,
    trust_remote_code: bool,
    vllm: dict[str, Any] | None,
) -> GenerationBackend:
    """The generation engine ``name`` (see :data:`BACKENDS`).

    ``vllm`` loads its own copy of the weights from ``model`` (``vllm`` holds its engine
    arguments); ``transformers`` samples from ``local_model()``, called at every generation so
    that a model being trained (or wrapped by peft) is the one used, and stops at ``stop_ids``
    (default :func:`generation_stop_ids`).
    """
    if check_backend(name) == "vllm":
        from wmrl_autoresearch.llm.backends.vllm_backend import VLLMBackend

        return VLLMBackend(
            model,
            tokenizer=tokenizer_name,
            dtype=dtype,
            seed=seed,
            revision=revision,
            trust_remote_code=trust_remote_code,
            engine_kwargs=vllm,
        )
    if vllm:
        raise ValueError("kwarg `vllm` is only used with backend: vllm; remove it or set backend: vllm")
    if local_model is None:
        raise ValueError("backend: transformers needs the loaded model (`local_model`)")
    from wmrl_autoresearch.llm.backends.transformers_backend import TransformersBackend

    return TransformersBackend(
        local_model,
        pad_id=tokenizer.pad_token_id,
        stop_ids=generation_stop_ids(local_model(), tokenizer) if stop_ids is None else stop_ids,
        batch_size=batch_size,
    )

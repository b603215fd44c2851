"""Generation backends: ``transformers`` (CPU/GPU) and ``vllm`` (GPU, batched)."""

from wmrl_autoresearch.llm.backends.base import Generation, GenerationBackend

BACKENDS = ("transformers", "vllm")

__all__ = ["Generation", "GenerationBackend", "BACKENDS", "check_backend"]


def check_backend(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"backend={name!r}; use one of {list(BACKENDS)}")
    return name

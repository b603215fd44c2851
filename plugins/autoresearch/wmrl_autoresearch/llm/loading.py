"""Loading a causal LM and its tokenizer through ``from_pretrained`` (local path or hub id).

The same path serves a tiny test model saved to a temporary folder and a 9B checkpoint;
nothing here special-cases sizes. Optional LoRA adapters come from ``peft``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["import_transformers", "resolve_device", "resolve_dtype", "load_tokenizer", "load_causal_lm", "apply_lora"]

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


def import_transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "the LLM components need `transformers` (and `tokenizers`); install them with "
            "pip install 'wmrl-autoresearch[llm]' or pip install \"torch==<your torch>\" transformers"
        ) from exc
    return transformers


def resolve_device(device: str | None) -> torch.device:
    """``"auto"``/``None`` -> CUDA when available else CPU; otherwise ``torch.device(device)``."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} but torch sees no CUDA GPU; set device: cpu or auto")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """``"auto"``/``None`` -> bfloat16 on a GPU that supports it, float32 otherwise."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    try:
        return _DTYPES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"dtype={dtype!r}; use one of {sorted(_DTYPES)} or 'auto'") from None


def load_tokenizer(name_or_path: str, *, trust_remote_code: bool = False, revision: str | None = None) -> Any:
    """The tokenizer, with a pad token (the EOS token when the checkpoint defines none)."""
    transformers = import_transformers()
    try:
        tok = transformers.AutoTokenizer.from_pretrained(
            name_or_path, trust_remote_code=trust_remote_code, revision=revision
        )
    except OSError as exc:
        raise OSError(
            f"cannot load a tokenizer from {name_or_path!r}: {exc}. Give a local folder made by "
            "save_pretrained, or a hub id on a machine that can reach the hub (or whose cache holds it)"
        ) from exc
    if tok.pad_token_id is None:
        if tok.eos_token_id is None:
            raise ValueError(
                f"tokenizer of {name_or_path!r} has neither a pad nor an EOS token; add one "
                "(tokenizer.add_special_tokens) and save it again"
            )
        tok.pad_token = tok.eos_token
    return tok


def load_causal_lm(
    name_or_path: str,
    *,
    device: torch.device,
    dtype: torch.dtype,
    trust_remote_code: bool = False,
    revision: str | None = None,
    attn_implementation: str | None = None,
) -> Any:
    """``AutoModelForCausalLM.from_pretrained`` on ``device`` in ``dtype``, in eval mode.

    Needs ``accelerate`` for ``device_map`` (a dependency of peft; install it with
    transformers otherwise).
    """
    transformers = import_transformers()
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    # device_map loads the weights straight onto the device (no full copy in host RAM first)
    kwargs: dict[str, Any] = {
        "trust_remote_code": trust_remote_code,
        "revision": revision,
        "device_map": {"": str(device)},
    }
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype, **kwargs)
    except TypeError:  # transformers < 4.56 names it torch_dtype
        model = transformers.AutoModelForCausalLM.from_pretrained(name_or_path, torch_dtype=dtype, **kwargs)
    except OSError as exc:
        raise OSError(
            f"cannot load a causal LM from {name_or_path!r}: {exc}. Give a local folder made by "
            "save_pretrained, or a hub id on a machine that can reach the hub (or whose cache holds it)"
        ) from exc
    model.to(device)
    model.eval()
    return model


def apply_lora(model: Any, lora: dict[str, Any]) -> Any:
    """Wrap ``model`` with a peft LoRA adapter; only the adapter stays trainable.

    ``lora`` holds ``peft.LoraConfig`` fields, e.g. ``{r: 16, lora_alpha: 32,
    lora_dropout: 0.0, target_modules: all-linear}``. Dropout defaults to 0 so that
    log-probabilities are deterministic (GRPO's ratio is exactly 1 before the first update).
    """
    try:
        import peft
    except ImportError as exc:
        raise ImportError(
            "policy kwarg `lora` needs the `peft` package; pip install peft (keep your torch pin), "
            "or remove `lora` to train all weights"
        ) from exc
    cfg = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear", "bias": "none"}
    cfg.update(lora)
    cfg["task_type"] = "CAUSAL_LM"
    return peft.get_peft_model(model, peft.LoraConfig(**cfg))

"""The LLM code agent: a causal LM that answers each task with a Python script.

For every task the agent renders a prompt (``prompt_template`` filled with
``Task.description``, wrapped in the tokenizer's chat template when it has one), samples
``G`` completions, and extracts the script of each (see
:mod:`~wmrl_autoresearch.llm.solution` for the ``str`` / ``InvalidSolution`` convention).

GRPO quantities (``N = B * G`` rollouts, ``T`` = longest completion in tokens)::

    old_log_probs[i, t] = log softmax(z_t / tau)[y_i,t]   at sampling time    (N, T)
    log_probs(r)[i, t]  = the same under the current parameters (with grad)  (N, T)
    mask[i, t]          = 1 for the completion's tokens, EOS included           (N, T)

By default ``old_log_probs`` is recomputed with a teacher-forced forward pass of the
training model (``recompute_old_log_probs=True``), so the importance ratio is exactly the
one GRPO expects even when the sampler is vLLM in another precision. ``rollouts.extra`` is
an :class:`LLMRolloutData` (token ids, prompt lengths, decoded texts).

Modes: ``log_probs`` runs in the module's mode (train after construction, so gradient
checkpointing is active); sampling, ``old_log_probs`` and ``reference_log_probs`` run in
eval mode. Keep dropout at 0 (the default of Llama/Qwen configs and of ``lora``) so the
ratio is exactly 1 before the first update.

Trainable weights: all of them, or a peft LoRA adapter (``lora: {r: 16, ...}``). The KL
reference is the initial model: the same weights with the adapter disabled under LoRA,
otherwise a frozen copy loaded lazily from ``model`` on the first call.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from wmrl_autoresearch.llm import prompts as P
from wmrl_autoresearch.llm.backends import check_backend, generation_stop_ids, make_backend
from wmrl_autoresearch.llm.loading import (
    apply_lora,
    load_causal_lm,
    load_tokenizer,
    resolve_device,
    resolve_dtype,
)
from wmrl_autoresearch.llm.logprobs import CompletionBatch, build_batch, completion_log_probs
from wmrl_autoresearch.llm.parsing import extract_script
from wmrl_autoresearch.llm.sampling import SamplingConfig
from wmrl_autoresearch.llm.solution import InvalidSolution
from wmrl_core.types import Rollouts, Task

__all__ = ["LLMCodeAgent", "LLMRolloutData"]


@dataclass
class LLMRolloutData:
    """``Rollouts.extra`` of the code agent: what ``log_probs`` needs, plus the raw text.

    :param batch: prompt/completion token ids and masks (see :mod:`..logprobs`).
    :param prompt_lengths: (N,) long, prompt tokens of each rollout (padding excluded).
    :param texts: decoded completions (the model's full answers).
    :param finish_reasons: ``"stop"`` or ``"length"`` per rollout.
    """

    batch: CompletionBatch
    prompt_lengths: torch.Tensor
    texts: list[str] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)

    @property
    def completion_ids(self) -> torch.Tensor:
        return self.batch.completion_ids

    def select(self, idx: Sequence[int] | np.ndarray) -> LLMRolloutData:
        """The rows ``idx`` (for an engine that subsets rollouts)."""
        arr = np.asarray(idx)
        ix = torch.as_tensor(np.flatnonzero(arr) if arr.dtype == bool else arr, dtype=torch.long)
        return LLMRolloutData(
            self.batch.select(ix),
            self.prompt_lengths[ix],
            [self.texts[i] for i in ix.tolist()],
            [self.finish_reasons[i] for i in ix.tolist()],
        )


def _extract_options(extract: dict[str, Any] | None) -> dict[str, Any]:
    """The defaults of :func:`..parsing.extract_script` updated with ``extract``; an unknown option is an error."""
    options = {"which": "last", "allow_untagged": False, "check_syntax": True}
    unknown = set(extract or {}) - set(options)
    if unknown:
        raise ValueError(f"unknown extract option(s) {sorted(unknown)}; known: {sorted(options)}")
    options.update(extract or {})
    return options


class LLMCodeAgent(torch.nn.Module):
    """A Hugging Face causal LM as a WMRL policy (``generate`` / ``log_probs``).

    :param env: the environment (unused; accepted per the factory contract).
    :param model: local folder or hub id, loaded with ``from_pretrained``.
    :param backend: ``"transformers"`` (CPU/GPU) or ``"vllm"`` (GPU; weights synced by
        :meth:`after_update`).
    :param tokenizer: tokenizer path/id when it differs from ``model``.
    :param prompt_template: ``str.format`` template with ``{description}`` (and optionally
        ``{task_id}``); see :mod:`..prompts`.
    :param system_prompt: system message (chat models) or header line (plain prompts);
        ``None`` or ``""`` for none.
    :param use_chat_template: ``None`` auto, ``True`` require, ``False`` never.
    :param plain_suffix: appended after the filled template when no chat template is used.
    :param chat_template_kwargs: extra ``apply_chat_template`` kwargs
        (``{enable_thinking: false}`` for Qwen3 hybrid models).
    :param max_new_tokens: completion budget in tokens.
    :param temperature, top_p, top_k: sampling (see :class:`..sampling.SamplingConfig`).
    :param stop_token_ids: extra ids that end an answer besides EOS.
    :param device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"`` ...
    :param dtype: ``"auto"`` (bf16 on a capable GPU, else fp32), ``"bfloat16"`` ...
    :param lora: ``peft.LoraConfig`` fields to train a LoRA adapter; ``None`` = full weights.
    :param gradient_checkpointing: trade compute for activation memory in ``log_probs``.
    :param generation_batch_size: prompts per transformers ``generate`` call.
    :param logprob_micro_batch_size: rows per forward pass in ``log_probs`` (``None`` = all).
    :param recompute_old_log_probs: teacher-force ``old_log_probs`` with the training model
        (default) instead of taking the sampler's own values.
    :param extract: options of :func:`..parsing.extract_script` (``which``,
        ``allow_untagged``, ``check_syntax``).
    :param vllm: ``vllm.LLM`` keyword arguments (``gpu_memory_utilization``,
        ``tensor_parallel_size``, ``max_model_len`` ...); backend ``vllm`` only.
    :param seed: vLLM engine seed (per-request seeds come from torch's global RNG).
    """

    def __init__(
        self,
        env: Any = None,
        *,
        model: str,
        backend: str = "transformers",
        tokenizer: str | None = None,
        revision: str | None = None,
        trust_remote_code: bool = False,
        attn_implementation: str | None = None,
        prompt_template: str = P.POLICY_TEMPLATE,
        system_prompt: str | None = P.POLICY_SYSTEM,
        use_chat_template: bool | None = None,
        plain_suffix: str = "\n\n",
        chat_template_kwargs: dict[str, Any] | None = None,
        max_new_tokens: int = 1024,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        stop_token_ids: Sequence[int] = (),
        device: str | None = "auto",
        dtype: str | None = "auto",
        lora: dict[str, Any] | None = None,
        gradient_checkpointing: bool = False,
        generation_batch_size: int = 8,
        logprob_micro_batch_size: int | None = None,
        recompute_old_log_probs: bool = True,
        extract: dict[str, Any] | None = None,
        vllm: dict[str, Any] | None = None,
        seed: int = 0,
    ):
        super().__init__()
        self.backend_name = check_backend(backend)
        self.model_name = model
        self.prompt_template = P.check_template(
            prompt_template, allowed=P.POLICY_FIELDS, required={"description"}, what="policy prompt"
        )
        self.system_prompt = system_prompt or None
        self.use_chat_template = use_chat_template
        self.plain_suffix = plain_suffix
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.sampling = SamplingConfig(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            stop_token_ids=tuple(int(i) for i in stop_token_ids),
        )
        self.extract_options = _extract_options(extract)
        self.logprob_micro_batch_size = logprob_micro_batch_size
        self.recompute_old_log_probs = recompute_old_log_probs
        self._load_kwargs = dict(
            trust_remote_code=trust_remote_code, revision=revision, attn_implementation=attn_implementation
        )

        self._load_model(model, tokenizer or model, device, dtype, lora, gradient_checkpointing)
        self._start_backend(backend, model, tokenizer or model, batch_size=generation_batch_size, seed=seed, vllm=vllm)
        self.n_invalid = 0  # answers without a usable script, since creation
        # nn.Module starts in train mode but from_pretrained returns eval mode: align them so
        # log_probs runs in train mode (needed for gradient checkpointing); sampling and the
        # old/reference log-probs switch to eval temporarily
        self.train()
        self._warn_on_dropout(model)

    def _load_model(
        self,
        model: str,
        tokenizer: str,
        device: str | None,
        dtype: str | None,
        lora: dict[str, Any] | None,
        gradient_checkpointing: bool,
    ) -> None:
        """Load the tokenizer and the model onto the device, with checkpointing and a LoRA adapter as asked."""
        self.device_ = resolve_device(device)
        self.dtype_ = resolve_dtype(dtype, self.device_)
        self.tokenizer = load_tokenizer(
            tokenizer, trust_remote_code=self._load_kwargs["trust_remote_code"], revision=self._load_kwargs["revision"]
        )
        self.model = load_causal_lm(model, device=self.device_, dtype=self.dtype_, **self._load_kwargs)
        self.uses_lora = bool(lora)
        if gradient_checkpointing:
            self._enable_gradient_checkpointing()
        if self.uses_lora:
            self.model = apply_lora(self.model, dict(lora))

    def _start_backend(
        self, backend: str, model: str, tokenizer: str, *, batch_size: int, seed: int, vllm: dict[str, Any] | None
    ) -> None:
        """Start the sampling engine over the loaded model and its stop ids."""
        stop_ids = generation_stop_ids(self.model, self.tokenizer)
        # kept out of nn.Module registration: neither the engine nor a reference copy is a
        # trainable part, and neither belongs in state_dict()
        self.__dict__["_reference_model"] = None
        self.__dict__["backend"] = make_backend(
            backend,
            model,
            local_model=lambda: self.model,
            tokenizer=self.tokenizer,
            tokenizer_name=tokenizer,
            stop_ids=stop_ids,
            batch_size=batch_size,
            dtype=self.dtype_,
            seed=seed,
            revision=self._load_kwargs["revision"],
            trust_remote_code=self._load_kwargs["trust_remote_code"],
            vllm=vllm,
        )
        self.stop_ids = stop_ids

    def _enable_gradient_checkpointing(self) -> None:
        """Checkpoint the model's activations (and, under LoRA, give the checkpointed blocks a grad-carrying input)."""
        # transformers >= 5.x names it activation checkpointing (the old name is deprecated)
        enable = (
            getattr(self.model, "activation_checkpointing_enable", None) or self.model.gradient_checkpointing_enable
        )
        enable()
        if self.uses_lora:
            self.model.enable_input_require_grads()  # checkpointed blocks need a grad-carrying input

    def _warn_on_dropout(self, model: str) -> None:
        """Warn at the constructor's caller when the model has dropout (train and eval log-probs then differ)."""
        dropout = sorted({m.p for m in self.model.modules() if isinstance(m, torch.nn.Dropout) and m.p > 0})
        if dropout:
            warnings.warn(
                f"{model!r} has dropout p={dropout}: log_probs (train mode) then differ from old_log_probs "
                "(eval mode) even before an update; set the config's dropout fields to 0 (and lora_dropout: 0)",
                stacklevel=3,
            )

    # ------------------------------------------------------------------ prompts

    def _base_model(self) -> Any:
        """The transformers model under any peft wrapper."""
        get_base = getattr(self.model, "get_base_model", None)
        return get_base() if callable(get_base) else self.model

    def _render(self, task: Task) -> tuple[str, bool]:
        return P.render(
            self.tokenizer,
            P.fill(self.prompt_template, task),
            system=self.system_prompt,
            use_chat_template=self.use_chat_template,
            plain_suffix=self.plain_suffix,
            chat_template_kwargs=self.chat_template_kwargs,
        )

    def prompt_text(self, task: Task) -> str:
        """The exact text the model sees for ``task``."""
        return self._render(task)[0]

    def encode_prompt(self, task: Task) -> list[int]:
        """Token ids of the prompt (chat text carries its own special tokens)."""
        text, is_chat = self._render(task)
        ids = self.tokenizer(text, add_special_tokens=not is_chat)["input_ids"]
        if not ids:
            raise ValueError(f"task {task.id!r}: the prompt tokenized to nothing; check prompt_template")
        return list(ids)

    # ------------------------------------------------------------------ policy contract

    def generate(self, tasks: Sequence[Task], group_size: int) -> Rollouts:
        """``group_size`` answers per task -> :class:`~wmrl_core.types.Rollouts` (N = B*G)."""
        if group_size < 1:
            raise ValueError(f"group_size={group_size}; it must be >= 1")
        tasks = list(tasks)
        if not tasks:
            raise ValueError("generate got no tasks; pass at least one Task")
        prompt_ids = [self.encode_prompt(t) for t in tasks]
        want = not self.recompute_old_log_probs
        groups = self.backend.generate(prompt_ids, group_size, self.sampling, want_logprobs=want)

        if len(groups) != len(tasks):
            raise RuntimeError(f"backend returned {len(groups)} groups for {len(tasks)} tasks")
        flat_tasks, flat_prompts, completions, sampled_lp, reasons = [], [], [], [], []
        for task, ids, group in zip(tasks, prompt_ids, groups, strict=True):
            if len(group) != group_size:
                raise RuntimeError(f"backend returned {len(group)} samples for task {task.id!r}, expected {group_size}")
            for gen in group:
                flat_tasks.append(task)
                flat_prompts.append(ids)
                completions.append(gen.token_ids)
                sampled_lp.append(gen.logprobs)
                reasons.append(gen.finish_reason)
        batch = build_batch(flat_prompts, completions, self.tokenizer.pad_token_id)
        texts = self.tokenizer.batch_decode([c for c in completions], skip_special_tokens=True)
        solutions: list[str | InvalidSolution] = [extract_script(t, **self.extract_options) for t in texts]
        self.n_invalid += sum(isinstance(s, InvalidSolution) for s in solutions)

        mask = batch.completion_mask.to(self.device_)
        if self.recompute_old_log_probs:
            with torch.no_grad():
                was_training = self.model.training
                self.model.eval()
                try:
                    old = self._log_probs(self.model, batch)
                finally:
                    self.model.train(was_training)
        else:
            old = torch.zeros(batch.completion_ids.shape, dtype=torch.float32)
            for i, lps in enumerate(sampled_lp):
                if lps is None:
                    raise RuntimeError("the backend returned no sampling log-probs; set recompute_old_log_probs: true")
                old[i, : len(lps)] = torch.as_tensor(lps, dtype=torch.float32)
            old = old.to(self.device_)
        extra = LLMRolloutData(
            batch=batch,
            prompt_lengths=torch.as_tensor([len(p) for p in flat_prompts], dtype=torch.long),
            texts=list(texts),
            finish_reasons=reasons,
        )
        return Rollouts(
            tasks=flat_tasks,
            solutions=solutions,
            group_ids=np.repeat(np.arange(len(tasks)), group_size),
            old_log_probs=old.detach() * mask,
            mask=mask,
            extra=extra,
        )

    def _log_probs(self, model: Any, batch: CompletionBatch) -> torch.Tensor:
        return completion_log_probs(
            model,
            batch,
            temperature=self.sampling.effective_temperature,
            micro_batch_size=self.logprob_micro_batch_size,
        )

    def _rollout_batch(self, rollouts: Rollouts) -> CompletionBatch:
        extra = rollouts.extra
        if not isinstance(extra, LLMRolloutData):
            raise TypeError(
                f"rollouts.extra is {type(extra).__name__}, not LLMRolloutData; pass rollouts made by "
                "LLMCodeAgent.generate (use LLMRolloutData.select to subset them)"
            )
        if len(extra.batch) != len(rollouts):
            raise ValueError(
                f"rollouts has {len(rollouts)} solutions but extra holds {len(extra.batch)} rows; subset "
                "extra with LLMRolloutData.select(idx) together with the other fields"
            )
        return extra.batch

    def log_probs(self, rollouts: Rollouts) -> torch.Tensor:
        """(N, T) log-probabilities of the rollouts' tokens under the current weights, with grad."""
        return self._log_probs(self.model, self._rollout_batch(rollouts))

    @torch.no_grad()
    def reference_log_probs(self, rollouts: Rollouts) -> torch.Tensor:
        """(N, T) log-probabilities under the initial model (no grad), for the KL term."""
        batch = self._rollout_batch(rollouts)
        if self.uses_lora:
            was_training = self.model.training
            self.model.eval()
            try:
                with self.model.disable_adapter():
                    return self._log_probs(self.model, batch)
            finally:
                self.model.train(was_training)
        ref = self.__dict__["_reference_model"]
        if ref is None:
            ref = load_causal_lm(self.model_name, device=self.device_, dtype=self.dtype_, **self._load_kwargs)
            ref.requires_grad_(False)
            self.__dict__["_reference_model"] = ref
        return self._log_probs(ref, batch)

    def after_update(self) -> None:
        """After each optimizer step: push the new weights into the vLLM engine (if used)."""
        if self.backend_name != "vllm":
            return
        from wmrl_autoresearch.llm.backends.vllm_backend import hf_weights_for_vllm

        self.backend.load_weights(hf_weights_for_vllm(self.model))

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """``nn.Module.load_state_dict``, then re-sync vLLM (a resumed run samples from the
        restored weights, not the checkpoint vLLM started from)."""
        result = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self.after_update()
        return result

    def close(self) -> None:
        backend = self.__dict__.get("backend")
        if backend is not None and hasattr(backend, "close"):
            backend.close()
        self.__dict__["_reference_model"] = None

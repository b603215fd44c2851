"""The LLM world model: a language model reads the task and a candidate script and
predicts what running it would yield.

One :meth:`LLMWorldModel.predict` call renders one prompt per solution
(``prompt_template`` with ``{description}``, ``{task_id}``, ``{solution}``), decodes all of
them greedily in batched ``generate`` calls (``max_new_tokens`` small: the answer is two
short lines), and parses each answer with :func:`~wmrl_autoresearch.llm.parsing.parse_prediction`:

==========================================  ===============================================
answer                                      ``Outcome``
==========================================  ===============================================
``status: crash`` / ``timeout`` / ``oom``   ``Outcome("crashed" | "timeout" | "oom", None)``
a readable number (``score: 0.87``, ``87%``) ``Outcome("ok", 0.87)``
no readable number                          ``Outcome("no_prediction", None)`` (no reward:
                                            dropped, not penalised), ``info["parse_failed"] = True``
an :class:`InvalidSolution` (not queried)   ``Outcome("invalid_solution", None)``, as the
                                            real environment reports it
==========================================  ===============================================

Every outcome's ``info`` holds ``predicted=True``, the raw answer, and
``world_model_parse_failures`` (failures in this call); :attr:`LLMWorldModel.stats` keeps
running totals. ``info["reason"]`` tells a parse failure
(``"world_model_answer_unparseable"``) from an invalid solution.

Engines: its own model (``model=...``, backend ``transformers`` or ``vllm``), or the code
agent's (``share_policy: true``): the engine passes the run's policy to the factory
(``policy=``, see ``wmrl_core.components``), and the same weights and the same engine answer
with another prompt, so no second model is loaded and, under vLLM, scoring shares the
generation engine. Built by hand: ``LLMWorldModel(policy=agent, share_policy=True)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wmrl_autoresearch.llm import prompts as P
from wmrl_autoresearch.llm.backends import check_backend, make_backend
from wmrl_autoresearch.llm.loading import load_causal_lm, load_tokenizer, resolve_device, resolve_dtype
from wmrl_autoresearch.llm.parsing import parse_prediction
from wmrl_autoresearch.llm.sampling import SamplingConfig
from wmrl_autoresearch.llm.solution import INVALID_STATUS, is_invalid_solution
from wmrl_core.types import Outcome, Task

__all__ = ["LLMWorldModel"]

UNPARSEABLE = "world_model_answer_unparseable"
NO_PREDICTION = "no_prediction"


def _check_engine_choice(model: str | None, policy: Any, share_policy: bool) -> None:
    """Exactly one engine: the world model's own ``model`` or the policy's (``share_policy``)."""
    if model is not None and share_policy:
        raise ValueError(
            f"give either `model` (the world model's own LM, got {model!r}) or `share_policy: true` "
            "(answer with the policy's engine), not both"
        )
    if model is None and policy is None:
        raise ValueError(
            "the LLM world model needs an engine: give `model` (its own LM), or `share_policy: true` in a "
            "run whose policy is llm-code-agent (the engine passes the policy); by hand, pass "
            "LLMWorldModel(policy=agent, share_policy=True)"
        )


def _parse_options(parse: dict[str, Any] | None) -> dict[str, Any]:
    """The defaults of :func:`..parsing.parse_prediction` updated with ``parse``; an unknown option is an error."""
    options: dict[str, Any] = {
        "score_keys": ("score", "metric", "value", "accuracy", "result"),
        "require_key": False,
        "percent_as_fraction": True,
    }
    unknown = set(parse or {}) - set(options)
    if unknown:
        raise ValueError(f"unknown parse option(s) {sorted(unknown)}; known: {sorted(options)}")
    options.update(parse or {})
    options["score_keys"] = tuple(options["score_keys"])
    return options


class LLMWorldModel:
    """Predict ``Outcome`` s of scripts with a language model (see the module docstring).

    :param env: the environment (unused; accepted per the factory contract).
    :param model: local folder or hub id of the world model's LM; omit when sharing.
    :param policy: the run's policy, passed by the engine (``wmrl_core.components``); an
        :class:`~wmrl_autoresearch.llm.policy.LLMCodeAgent` whose model and engine answer
        when the world model has no ``model`` of its own. Ignored when ``model`` is given.
    :param share_policy: say explicitly that the policy's engine answers (an error if
        ``model`` is given too, or if no policy was passed).
    :param backend: ``"transformers"`` or ``"vllm"`` (own model only).
    :param prompt_template: template with ``{solution}`` (and ``{description}``,
        ``{task_id}``); see :mod:`..prompts`.
    :param max_new_tokens: answer budget in tokens (greedy decoding).
    :param batch_size: prompts per transformers ``generate`` call.
    :param max_solution_chars: scripts longer than this are cut (head kept) in the prompt.
    :param parse: options of :func:`..parsing.parse_prediction` (``score_keys``,
        ``require_key``, ``percent_as_fraction``).
    :param vllm: ``vllm.LLM`` keyword arguments (own vLLM engine only).
    """

    def __init__(
        self,
        env: Any = None,
        *,
        model: str | None = None,
        policy: Any = None,
        share_policy: bool = False,
        backend: str = "transformers",
        tokenizer: str | None = None,
        revision: str | None = None,
        trust_remote_code: bool = False,
        prompt_template: str = P.WORLD_MODEL_TEMPLATE,
        system_prompt: str | None = P.WORLD_MODEL_SYSTEM,
        use_chat_template: bool | None = None,
        plain_suffix: str = "\n\n",
        chat_template_kwargs: dict[str, Any] | None = None,
        max_new_tokens: int = 24,
        batch_size: int = 16,
        max_solution_chars: int | None = 12000,
        parse: dict[str, Any] | None = None,
        device: str | None = "auto",
        dtype: str | None = "auto",
        vllm: dict[str, Any] | None = None,
        seed: int = 0,
    ):
        _check_engine_choice(model, policy, share_policy)
        self.prompt_template = P.check_template(
            prompt_template, allowed=P.WORLD_MODEL_FIELDS, required={"solution"}, what="world-model prompt"
        )
        self.system_prompt = system_prompt or None
        self.use_chat_template = use_chat_template
        self.plain_suffix = plain_suffix
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.sampling = SamplingConfig(max_new_tokens=max_new_tokens, greedy=True)
        self.max_solution_chars = max_solution_chars
        self.parse_options = _parse_options(parse)
        self.stats = {"calls": 0, "queried": 0, "parse_failures": 0, "invalid_solutions": 0}

        self._policy: Any = None
        self.tokenizer: Any = None
        self.backend: Any = None
        self.model: Any = None
        if model is not None:
            check_backend(backend)
            self.tokenizer = load_tokenizer(tokenizer or model, trust_remote_code=trust_remote_code, revision=revision)
            dev = resolve_device(device)
            dt = resolve_dtype(dtype, dev)
            if backend != "vllm":
                self.model = load_causal_lm(
                    model, device=dev, dtype=dt, trust_remote_code=trust_remote_code, revision=revision
                )
                self.model.requires_grad_(False)
            self.backend = make_backend(
                backend,
                model,
                local_model=(lambda: self.model) if self.model is not None else None,
                tokenizer=self.tokenizer,
                tokenizer_name=tokenizer or model,
                batch_size=batch_size,
                dtype=dt,
                seed=seed,
                revision=revision,
                trust_remote_code=trust_remote_code,
                vllm=vllm,
            )
        else:
            self._attach(policy)

    # ------------------------------------------------------------------ engine

    def _attach(self, policy: Any) -> None:
        for attr in ("tokenizer", "backend"):
            if not hasattr(policy, attr):
                raise TypeError(f"policy {type(policy).__name__} has no `{attr}`; pass an LLMCodeAgent")
        self._policy = policy
        self.tokenizer = policy.tokenizer
        self.backend = policy.backend

    # ------------------------------------------------------------------ prediction

    def prompt_text(self, task: Task, solution: str) -> tuple[str, bool]:
        if self.max_solution_chars is not None and len(solution) > self.max_solution_chars:
            solution = solution[: self.max_solution_chars] + "\n# ... (truncated)\n"
        return P.render(
            self.tokenizer,
            P.fill(self.prompt_template, task, solution),
            system=self.system_prompt,
            use_chat_template=self.use_chat_template,
            plain_suffix=self.plain_suffix,
            chat_template_kwargs=self.chat_template_kwargs,
        )

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        """One predicted :class:`~wmrl_core.types.Outcome` per solution (same order)."""
        if len(tasks) != len(solutions):
            raise ValueError(f"{len(tasks)} tasks but {len(solutions)} solutions; pass one task per solution")
        self.stats["calls"] += 1
        outcomes: list[Outcome | None] = [None] * len(solutions)
        query_idx, prompts = [], []
        for i, (task, sol) in enumerate(zip(tasks, solutions)):
            if is_invalid_solution(sol) or not isinstance(sol, str) or not sol.strip():
                reason = getattr(sol, "reason", "the solution is not a non-empty script")
                outcomes[i] = Outcome(INVALID_STATUS, None, {"predicted": True, "reason": reason})
                self.stats["invalid_solutions"] += 1
                continue
            text, is_chat = self.prompt_text(task, sol)
            prompts.append(list(self.tokenizer(text, add_special_tokens=not is_chat)["input_ids"]))
            query_idx.append(i)
        answers: list[str] = []
        if prompts:
            gens = self.backend.generate(prompts, 1, self.sampling, want_logprobs=False)
            if len(gens) != len(prompts) or any(len(g) != 1 for g in gens):
                raise RuntimeError(f"backend returned {len(gens)} answers for {len(prompts)} prompts")
            answers = self.tokenizer.batch_decode([g[0].token_ids for g in gens], skip_special_tokens=True)
        failures = 0
        for i, answer in zip(query_idx, answers, strict=True):
            status, score = parse_prediction(answer, **self.parse_options)
            info: dict[str, Any] = {"predicted": True, "raw_answer": answer}
            if status is not None and status != "ok":  # a predicted failure needs no score
                outcomes[i] = Outcome(status, None, info)
            elif score is not None:
                outcomes[i] = Outcome("ok", score, info)
            else:
                failures += 1
                info.update(parse_failed=True, reason=UNPARSEABLE)
                outcomes[i] = Outcome(NO_PREDICTION, None, info)
        self.stats["queried"] += len(query_idx)
        self.stats["parse_failures"] += failures
        for o in outcomes:
            assert o is not None
            o.info["world_model_parse_failures"] = failures
        return outcomes  # type: ignore[return-value]

    def close(self) -> None:
        self.model = None
        if self._policy is None and self.backend is not None and hasattr(self.backend, "close"):
            self.backend.close()
        self.backend = None

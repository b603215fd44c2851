"""The LLM world model: batched prediction, parsing into Outcomes, fallback, sharing."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
import torch
from wmrl_autoresearch.llm.backends.base import Generation
from wmrl_autoresearch.llm.policy import LLMCodeAgent
from wmrl_autoresearch.llm.solution import InvalidSolution
from wmrl_autoresearch.llm.testing import make_tiny_causal_lm
from wmrl_autoresearch.llm.world_model import UNPARSEABLE, LLMWorldModel

from wmrl_core.types import Outcome, Task

TASK = Task("iris", "Train a classifier on the iris dataset; the metric is test accuracy.")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(make_tiny_causal_lm(tmp_path_factory.mktemp("tiny_wm"), seed=3))


class ScriptedBackend:
    """Answers prompts with fixed texts, recording what it was asked."""

    name = "scripted"

    def __init__(self, tokenizer, answers: list[str]):
        self.tokenizer, self.answers = tokenizer, answers
        self.calls: list[tuple[int, int, bool]] = []
        self.prompts: list[list[int]] = []

    def generate(self, prompts, n, sampling, *, want_logprobs=False):
        self.calls.append((len(prompts), n, sampling.greedy))
        self.prompts.extend(prompts)
        out = []
        for i in range(len(prompts)):
            ids = self.tokenizer(self.answers[i % len(self.answers)], add_special_tokens=False)["input_ids"]
            out.append([Generation(list(ids) + [self.tokenizer.eos_token_id])])
        return out


def scripted(wm: LLMWorldModel, answers: list[str]) -> ScriptedBackend:
    backend = ScriptedBackend(wm.tokenizer, answers)
    wm.backend = backend
    return backend


def test_real_model_batched_prediction_returns_one_outcome_per_solution(tiny):
    torch.manual_seed(0)
    wm = LLMWorldModel(env=None, model=tiny, device="cpu", max_new_tokens=8, batch_size=3)
    solutions = [f"print({i})\n" for i in range(5)]
    outcomes = wm.predict([TASK] * 5, solutions)
    assert len(outcomes) == 5 and all(isinstance(o, Outcome) for o in outcomes)
    failures = sum(bool(o.info.get("parse_failed")) for o in outcomes)
    for o in outcomes:
        assert o.info["predicted"] is True and isinstance(o.info["raw_answer"], str)
        assert o.info["world_model_parse_failures"] == failures
        assert o.status in {"ok", "crashed", "timeout", "invalid_output", "no_prediction"}
        assert (o.score is not None) == (o.status == "ok")
    assert wm.stats == {"calls": 1, "queried": 5, "parse_failures": failures, "invalid_solutions": 0}
    # greedy decoding: the same inputs give the same answers
    again = wm.predict([TASK] * 5, solutions)
    assert [o.info["raw_answer"] for o in again] == [o.info["raw_answer"] for o in outcomes]
    assert all(not p.requires_grad for p in wm.model.parameters())


def test_answers_become_outcomes(tiny):
    wm = LLMWorldModel(model=tiny, device="cpu")
    answers = [
        "status: ok\nscore: 0.87",
        "status: ok\nscore: 91%",
        "status: crash\nscore: none",
        "status: timeout",
        "score = 1e-2",
        "I am not sure what this does.",
        "status: oom",
    ]
    backend = scripted(wm, answers)
    outcomes = wm.predict([TASK] * 7, [f"x = {i}\n" for i in range(7)])
    assert backend.calls == [(7, 1, True)]  # one batched, greedy request
    assert [o.status for o in outcomes] == ["ok", "ok", "crashed", "timeout", "ok", "no_prediction", "oom"]
    assert [o.score for o in outcomes[:2]] == [pytest.approx(0.87), pytest.approx(0.91)]
    assert outcomes[4].score == pytest.approx(0.01)
    assert outcomes[2].score is None and outcomes[3].score is None and outcomes[5].score is None
    assert outcomes[5].info["parse_failed"] is True and outcomes[5].info["reason"] == UNPARSEABLE
    assert all(o.info["world_model_parse_failures"] == 1 for o in outcomes)
    assert wm.stats["parse_failures"] == 1


def test_invalid_solutions_are_not_queried(tiny):
    wm = LLMWorldModel(model=tiny, device="cpu")
    backend = scripted(wm, ["score: 0.5"])
    sols = ["a = 1\n", InvalidSolution("no fenced ```python block in the answer", "blah"), "", "b = 2\n"]
    outcomes = wm.predict([TASK] * 4, sols)
    assert backend.calls == [(2, 1, True)]
    assert [o.status for o in outcomes] == ["ok", "invalid_solution", "invalid_solution", "ok"]
    assert outcomes[1].info["reason"].startswith("no fenced")
    assert wm.stats["invalid_solutions"] == 2
    # nothing to query: no backend call at all
    assert [o.status for o in wm.predict([TASK], [InvalidSolution("empty")])] == ["invalid_solution"]
    assert len(backend.calls) == 1


def test_prompt_holds_task_and_script_and_long_scripts_are_cut(tiny):
    wm = LLMWorldModel(
        model=tiny,
        device="cpu",
        prompt_template="{task_id}: {description}\n---\n{solution}---\nscore:",
        use_chat_template=False,
        system_prompt=None,
        plain_suffix="",
        max_solution_chars=20,
    )
    text, is_chat = wm.prompt_text(TASK, "print('hello world and more')\n")
    assert not is_chat
    assert text.startswith("iris: Train a classifier") and "print('hello world a" in text
    assert "# ... (truncated)" in text and "and more" not in text
    with pytest.raises(ValueError, match=r"\{solution\}"):
        LLMWorldModel(model=tiny, device="cpu", prompt_template="{description}")
    with pytest.raises(ValueError, match="parse option"):
        LLMWorldModel(model=tiny, device="cpu", parse={"strict": True})
    with pytest.raises(ValueError, match="one task per solution"):
        wm.predict([TASK], ["a\n", "b\n"])


def test_one_engine_source(tiny):
    with pytest.raises(ValueError, match="needs an engine"):
        LLMWorldModel()
    with pytest.raises(ValueError, match="not both"):
        LLMWorldModel(model=tiny, share_policy=True)


def test_sharing_the_policy_engine(tiny):
    policy = LLMCodeAgent(model=tiny, device="cpu", max_new_tokens=8)
    wm = LLMWorldModel(policy=policy, share_policy=True, max_new_tokens=6)
    assert wm.backend is policy.backend and wm.tokenizer is policy.tokenizer
    outcomes = wm.predict([TASK] * 3, ["a = 1\n", "b = 2\n", "c = 3\n"])
    assert len(outcomes) == 3
    # a world model with its own model ignores the policy the engine passes
    own = LLMWorldModel(model=tiny, policy=policy, device="cpu", max_new_tokens=6)
    assert own.backend is not policy.backend
    wm.close()
    assert policy.backend is not None  # closing a sharing world model leaves the policy's engine alone


def test_sharing_a_policy_that_is_not_a_language_model_names_the_fix():
    with pytest.raises(TypeError, match="pass an LLMCodeAgent"):
        LLMWorldModel(policy=object(), share_policy=True)

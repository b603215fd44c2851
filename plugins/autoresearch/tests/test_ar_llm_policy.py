"""The LLM code agent on a tiny random Llama saved and reloaded with from_pretrained.

Random weights produce gibberish; these tests check plumbing: shapes, masks, that the
log-probabilities are those of the sampled tokens, gradients, LoRA and the KL reference.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")
import torch
from wmrl_autoresearch.llm.backends.base import Generation
from wmrl_autoresearch.llm.policy import LLMCodeAgent, LLMRolloutData
from wmrl_autoresearch.llm.solution import InvalidSolution
from wmrl_autoresearch.llm.testing import make_tiny_causal_lm

from wmrl_core.types import Rollouts, Task

TASKS = [Task("iris", "Train a classifier on the iris dataset."), Task("mean", "Print the mean of 1..100.")]
MAX_NEW = 12


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(make_tiny_causal_lm(tmp_path_factory.mktemp("tiny_chat")))


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> str:
    return str(make_tiny_causal_lm(tmp_path_factory.mktemp("tiny_gpt2"), architecture="gpt2", seed=2))


@pytest.fixture(scope="module")
def tiny_plain(tmp_path_factory) -> str:
    return str(make_tiny_causal_lm(tmp_path_factory.mktemp("tiny_plain"), chat_template=False, seed=1))


def agent(path: str, **kw) -> LLMCodeAgent:
    kw.setdefault("max_new_tokens", MAX_NEW)
    kw.setdefault("device", "cpu")
    return LLMCodeAgent(env=None, model=path, **kw)


def grpo_step(policy: LLMCodeAgent, rollouts: Rollouts, lr: float = 0.05) -> None:
    """One clipped-surrogate step with fixed random advantages (what the engine does)."""
    gen = torch.Generator().manual_seed(0)
    adv = torch.randn(len(rollouts), generator=gen)
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    logp = policy.log_probs(rollouts)
    ratio = torch.exp(logp - rollouts.old_log_probs)
    surrogate = torch.minimum(ratio * adv[:, None], ratio.clamp(0.8, 1.2) * adv[:, None])
    loss = -(surrogate * rollouts.mask).sum() / rollouts.mask.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    policy.after_update()


def reference_token_log_probs(model, prompt: list[int], completion: list[int], tau: float) -> torch.Tensor:
    """log pi(y_t | x, y_<t) of one unpadded sequence, computed independently."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    steps = logits[len(prompt) - 1 : len(prompt) + len(completion) - 1] / tau
    return torch.log_softmax(steps, -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)


# ----------------------------------------------------------------------------- generate


def test_generate_shapes_groups_and_masks(tiny):
    torch.manual_seed(0)
    policy = agent(tiny)
    r = policy.generate(TASKS, group_size=3)
    n = len(TASKS) * 3
    assert len(r) == n and len(r.tasks) == n
    assert [t.id for t in r.tasks] == ["iris"] * 3 + ["mean"] * 3
    np.testing.assert_array_equal(r.group_ids, [0, 0, 0, 1, 1, 1])
    assert r.old_log_probs.shape == r.mask.shape
    assert r.mask.shape[0] == n and 1 <= r.mask.shape[1] <= MAX_NEW
    assert not r.old_log_probs.requires_grad
    assert isinstance(r.extra, LLMRolloutData)
    lengths = r.mask.sum(1).long()
    for i in range(n):
        # mask is a prefix of ones; log-probs are <= 0 there and 0 elsewhere
        assert torch.all(r.mask[i, : lengths[i]] == 1) and torch.all(r.mask[i, lengths[i] :] == 0)
        assert torch.all(r.old_log_probs[i, : lengths[i]] <= 0)
        assert torch.all(r.old_log_probs[i, lengths[i] :] == 0)
        reason = r.extra.finish_reasons[i]
        last = int(r.extra.completion_ids[i, lengths[i] - 1])
        if reason == "stop":
            assert last in policy.stop_ids
        else:
            assert reason == "length" and lengths[i] == MAX_NEW
    for sol in r.solutions:  # gibberish from random weights: every answer is invalid or a script
        assert isinstance(sol, (str, InvalidSolution))
    assert r.extra.prompt_lengths.tolist() == [len(policy.encode_prompt(t)) for t in r.tasks]


@pytest.mark.parametrize("arch", ["tiny", "tiny_gpt2"])
def test_old_log_probs_are_those_of_the_sampled_tokens(arch, request):
    """Compared with a separate unpadded forward pass of each sequence (checks padding,
    position ids (GPT-2's absolute positions) and the logit/token alignment)."""
    torch.manual_seed(1)
    policy = agent(request.getfixturevalue(arch), temperature=0.7)
    r = policy.generate(TASKS, group_size=2)
    for i in range(len(r)):
        length = int(r.mask[i].sum())
        prompt = policy.encode_prompt(r.tasks[i])
        completion = r.extra.completion_ids[i, :length].tolist()
        expected = reference_token_log_probs(policy.model, prompt, completion, tau=0.7)
        torch.testing.assert_close(r.old_log_probs[i, :length], expected, atol=1e-4, rtol=1e-4)


def test_log_probs_match_old_log_probs_at_init_and_sampler_values(tiny):
    """Without recomputation old_log_probs come from generate's own logits (KV cache,
    left padding); teacher-forced log_probs must agree with them before any update."""
    torch.manual_seed(2)
    policy = agent(tiny, temperature=0.8, recompute_old_log_probs=False)
    r = policy.generate(TASKS, group_size=3)
    logp = policy.log_probs(r)
    assert logp.shape == r.old_log_probs.shape and logp.requires_grad
    torch.testing.assert_close(logp.detach() * r.mask, r.old_log_probs, atol=1e-4, rtol=1e-4)


def test_grpo_step_changes_parameters_and_log_probs(tiny):
    torch.manual_seed(3)
    policy = agent(tiny)
    r = policy.generate(TASKS, group_size=2)
    before = {k: v.detach().clone() for k, v in policy.state_dict().items()}
    logp_before = policy.log_probs(r).detach()
    grpo_step(policy, r)
    after = policy.state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "no parameter moved after an optimizer step"
    assert (policy.log_probs(r).detach() - logp_before).abs().max() > 1e-4


def test_reference_is_the_frozen_initial_model(tiny):
    torch.manual_seed(4)
    policy = agent(tiny)
    r = policy.generate(TASKS, group_size=2)
    ref0 = policy.reference_log_probs(r)
    torch.testing.assert_close(ref0, r.old_log_probs, atol=1e-5, rtol=1e-5)
    keys = set(policy.state_dict())
    grpo_step(policy, r)
    ref1 = policy.reference_log_probs(r)
    torch.testing.assert_close(ref1, ref0)  # unchanged by training
    assert (policy.log_probs(r).detach() - ref1).abs().max() > 1e-4
    assert set(policy.state_dict()) == keys  # the reference copy is not part of the policy
    assert all(p.requires_grad for p in policy.parameters())


def test_lora_trains_only_the_adapter_and_reference_disables_it(tiny):
    pytest.importorskip("peft")
    torch.manual_seed(5)
    policy = agent(tiny, lora={"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]})
    trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    r = policy.generate(TASKS, group_size=2)
    torch.testing.assert_close(policy.reference_log_probs(r), r.old_log_probs, atol=1e-5, rtol=1e-5)
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if not p.requires_grad}
    lora_before = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    grpo_step(policy, r)
    params = dict(policy.named_parameters())
    assert all(torch.equal(params[n], v) for n, v in frozen.items())
    assert any(not torch.equal(params[n], v) for n, v in lora_before.items())
    ref = policy.reference_log_probs(r)
    torch.testing.assert_close(ref, r.old_log_probs, atol=1e-5, rtol=1e-5)  # base model unchanged
    assert (policy.log_probs(r).detach() - ref).abs().max() > 1e-4
    assert policy.__dict__["_reference_model"] is None  # LoRA needs no second copy


def test_chat_prompt_is_not_given_a_second_bos(tiny):
    policy = agent(tiny)
    text = policy.prompt_text(TASKS[0])
    assert text.startswith("<|system|>") and text.endswith("<|assistant|>\n") and TASKS[0].description in text
    assert policy.encode_prompt(TASKS[0]) == policy.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert policy.tokenizer(text)["input_ids"][0] == policy.tokenizer.bos_token_id


def test_plain_prompt_without_chat_template(tiny_plain):
    policy = agent(tiny_plain, system_prompt="", prompt_template="Task: {description}", plain_suffix="\nAnswer:\n")
    assert policy.prompt_text(TASKS[0]) == "Task: Train a classifier on the iris dataset.\nAnswer:\n"
    ids = policy.encode_prompt(TASKS[0])
    assert ids[0] == policy.tokenizer.bos_token_id  # plain prompts get the tokenizer's special tokens
    r = policy.generate(TASKS[:1], group_size=2)
    assert r.old_log_probs.shape[0] == 2
    with pytest.raises(ValueError, match="no chat_template"):
        agent(tiny_plain, use_chat_template=True).encode_prompt(TASKS[0])


def test_configuration_errors_name_the_fix(tiny):
    with pytest.raises(ValueError, match="unknown field"):
        agent(tiny, prompt_template="Do {task}")
    with pytest.raises(ValueError, match=r"\{description\}"):
        agent(tiny, prompt_template="Write code")
    with pytest.raises(ValueError, match="backend"):
        agent(tiny, backend="tgi")
    with pytest.raises(ValueError, match="extract"):
        agent(tiny, extract={"strict": True})
    with pytest.raises(ValueError, match="backend: vllm"):
        agent(tiny, vllm={"gpu_memory_utilization": 0.5})


class ScriptedBackend:
    """Returns fixed answers (encoded with the policy's tokenizer) instead of sampling."""

    name = "scripted"

    def __init__(self, tokenizer, answers: list[str], eos_id: int):
        self.tokenizer, self.answers, self.eos_id = tokenizer, answers, eos_id
        self.calls = 0

    def generate(self, prompts, n, sampling, *, want_logprobs=False):
        self.calls += 1
        out, k = [], 0
        for _ in prompts:
            group = []
            for _ in range(n):
                ids = self.tokenizer(self.answers[k % len(self.answers)], add_special_tokens=False)["input_ids"]
                group.append(Generation(list(ids) + [self.eos_id], None, "stop"))
                k += 1
            out.append(group)
        return out


def test_answers_are_decoded_and_scripts_extracted(tiny):
    policy = agent(tiny)
    answers = [
        "Here you go:\n```python\nx = [i ** 2 for i in range(100)]\nprint(sum(x) / len(x))\n```",
        "I cannot do that.",
        "```python\nimport numpy as np\nprint(np.mean(",  # cut off
    ]
    policy.__dict__["backend"] = ScriptedBackend(policy.tokenizer, answers, policy.tokenizer.eos_token_id)
    r = policy.generate(TASKS[:1], group_size=3)
    assert r.solutions[0] == "x = [i ** 2 for i in range(100)]\nprint(sum(x) / len(x))\n"
    assert isinstance(r.solutions[1], InvalidSolution) and "no fenced" in r.solutions[1].reason
    assert isinstance(r.solutions[2], InvalidSolution) and "unterminated" in r.solutions[2].reason
    assert policy.n_invalid == 2
    assert r.extra.texts == answers
    for i, a in enumerate(answers):  # mask covers the answer's tokens plus EOS
        assert int(r.mask[i].sum()) == len(policy.tokenizer(a, add_special_tokens=False)["input_ids"]) + 1
    torch.testing.assert_close(policy.log_probs(r).detach(), r.old_log_probs, atol=1e-5, rtol=1e-5)


def test_rollout_data_select_and_mismatch_error(tiny):
    torch.manual_seed(6)
    policy = agent(tiny)
    r = policy.generate(TASKS, group_size=2)
    idx = [0, 3]
    sub = Rollouts(
        tasks=[r.tasks[i] for i in idx],
        solutions=[r.solutions[i] for i in idx],
        group_ids=r.group_ids[idx],
        old_log_probs=r.old_log_probs[idx],
        mask=r.mask[idx],
        extra=r.extra.select(idx),
    )
    torch.testing.assert_close(policy.log_probs(sub).detach(), r.old_log_probs[idx], atol=1e-5, rtol=1e-5)
    bad = Rollouts(sub.tasks, sub.solutions, sub.group_ids, sub.old_log_probs, sub.mask, r.extra)
    with pytest.raises(ValueError, match="select"):
        policy.log_probs(bad)


def test_gradient_checkpointing_with_lora_gives_the_same_gradients(tiny):
    pytest.importorskip("peft")
    lora = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "init_lora_weights": "gaussian"}
    torch.manual_seed(7)
    plain = agent(tiny, lora=lora)
    torch.manual_seed(7)
    ckpt = agent(tiny, lora=lora, gradient_checkpointing=True)
    base = ckpt._base_model()
    assert ckpt.model.training
    assert getattr(base, "is_activation_checkpointing", None) or base.is_gradient_checkpointing
    r = plain.generate(TASKS, group_size=2)
    grads = []
    for policy in (plain, ckpt):
        policy.zero_grad()
        (policy.log_probs(r) * r.mask).sum().backward()
        grads.append({n: p.grad.clone() for n, p in policy.named_parameters() if p.requires_grad})
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], atol=1e-5, rtol=1e-4)
    assert any(g.abs().sum() > 0 for g in grads[1].values())

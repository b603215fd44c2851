"""The vLLM backend's engine-free parts: sampling parameters, weight names, LoRA merging,
output conversion and weight sync against a stand-in engine.

vLLM itself needs a CUDA GPU and is not installed on CPU machines: the real engine
(generation, ``load_weights`` inside vLLM) is NOT exercised here.
"""

from __future__ import annotations

import copy
import importlib.util
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")
import torch
from wmrl_autoresearch.llm.backends.vllm_backend import (
    VLLMBackend,
    find_vllm_model,
    hf_weights_for_vllm,
    import_vllm,
    sampling_params_kwargs,
    vllm_weight_name,
)
from wmrl_autoresearch.llm.policy import LLMCodeAgent
from wmrl_autoresearch.llm.sampling import SamplingConfig
from wmrl_autoresearch.llm.testing import make_tiny_causal_lm

from wmrl_core.types import Task


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(make_tiny_causal_lm(tmp_path_factory.mktemp("tiny_vllm"), seed=4))


# ----------------------------------------------------------------------------- sampling


def test_sampling_params_for_sampling_and_greedy():
    s = SamplingConfig(max_new_tokens=64, temperature=0.7, top_p=0.95, top_k=0, stop_token_ids=(7,))
    kw = sampling_params_kwargs(s, 8, want_logprobs=True, seed=123)
    assert kw == {
        "n": 8,
        "max_tokens": 64,
        "temperature": 0.7,
        "top_p": 0.95,
        "top_k": -1,
        "detokenize": False,
        "stop_token_ids": [7],
        "logprobs": 0,
        "seed": 123,
    }
    g = sampling_params_kwargs(SamplingConfig(max_new_tokens=16, greedy=True, top_k=5), 1)
    assert g["temperature"] == 0.0 and g["top_k"] == -1 and g["top_p"] == 1.0
    assert "logprobs" not in g and "seed" not in g
    assert sampling_params_kwargs(SamplingConfig(top_k=20), 2)["top_k"] == 20
    with pytest.raises(ValueError, match="n=0"):
        sampling_params_kwargs(s, 0)


def test_sampling_config_validation():
    with pytest.raises(ValueError, match="greedy"):
        SamplingConfig(temperature=0.0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingConfig(top_p=0.0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        SamplingConfig(max_new_tokens=0)


# ----------------------------------------------------------------------------- weight names


@pytest.mark.parametrize(
    "key, name",
    [
        ("model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.weight"),
        (
            "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight",
            "model.layers.0.self_attn.q_proj.weight",
        ),
        ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight", None),
        ("base_model.model.model.layers.0.self_attn.q_proj.lora_B.default.weight", None),
        ("base_model.model.model.embed_tokens.lora_embedding_A.default", None),
        ("base_model.model.lm_head.original_module.weight", None),
        ("base_model.model.lm_head.modules_to_save.default.weight", "lm_head.weight"),
        ("_orig_mod.model.norm.weight", "model.norm.weight"),
        ("module.model.layers.1._checkpoint_wrapped_module.mlp.up_proj.weight", "model.layers.1.mlp.up_proj.weight"),
        ("lm_head.weight", "lm_head.weight"),
    ],
)
def test_vllm_weight_name(key, name):
    assert vllm_weight_name(key) == name


def test_plain_model_weights_pass_through(tiny):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny)
    items = dict(hf_weights_for_vllm(model))
    sd = model.state_dict()
    assert set(items) == set(sd)
    assert all(torch.equal(items[k], sd[k]) for k in sd)


def test_lora_weights_are_merged_without_touching_the_model(tiny):
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny)
    names = set(base.state_dict())
    model = peft.get_peft_model(
        base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    )
    torch.manual_seed(0)
    with torch.no_grad():  # LoRA B starts at zero; make the adapter non-trivial
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    items = dict(hf_weights_for_vllm(model))
    assert set(items) == names  # HF checkpoint names, no LoRA factors
    merged = copy.deepcopy(model).merge_and_unload().state_dict()
    for k in names:
        torch.testing.assert_close(items[k], merged[k], atol=1e-6, rtol=1e-6)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.allclose(items[q], before[f"base_model.model.{q.replace('.weight', '.base_layer.weight')}"])
    after = model.state_dict()
    assert all(torch.equal(after[k], before[k]) for k in before)  # adapter still unmerged


# ----------------------------------------------------------------------------- stand-in engine


class FakeModel:
    def __init__(self):
        self.loaded: list[tuple[str, torch.Tensor]] = []

    def load_weights(self, weights):
        self.loaded.extend(weights)
        return {name for name, _ in self.loaded}


class FakeLLM:
    """Mimics vllm.LLM: generate(prompts, sampling_params=[...]) -> RequestOutput-like objects."""

    def __init__(self, with_model: bool = True):
        self.model = FakeModel()
        if with_model:
            worker = SimpleNamespace(model_runner=SimpleNamespace(model=self.model))
            self.llm_engine = SimpleNamespace(
                model_executor=SimpleNamespace(driver_worker=SimpleNamespace(worker=worker))
            )
        self.resets = 0
        self.rpc_calls: list = []
        self.requests: list = []

    def generate(self, requests, sampling_params, use_tqdm=False):
        self.requests.append((requests, sampling_params))
        outs = []
        for req, sp in zip(requests, sampling_params):
            base = req["prompt_token_ids"][-1]
            completions = []
            for k in range(sp["n"]):
                toks = [base + k, 2] if k % 2 == 0 else [base + k] * sp["max_tokens"]
                lps = (
                    [{t: SimpleNamespace(logprob=-0.5 * (j + 1))} for j, t in enumerate(toks)]
                    if "logprobs" in sp
                    else None
                )
                completions.append(
                    SimpleNamespace(token_ids=toks, logprobs=lps, finish_reason="stop" if k % 2 == 0 else "length")
                )
            outs.append(SimpleNamespace(outputs=completions))
        return outs

    def reset_prefix_cache(self):
        self.resets += 1

    def collective_rpc(self, fn, args=()):
        self.rpc_calls.append(args)
        worker = SimpleNamespace(model_runner=SimpleNamespace(model=self.model))
        return [fn(worker, *args)]


def test_find_vllm_model_paths():
    llm = FakeLLM()
    assert find_vllm_model(llm) is llm.model
    old = SimpleNamespace(
        llm_engine=SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=SimpleNamespace(model=llm.model)))
        )
    )
    assert find_vllm_model(old) is llm.model
    assert find_vllm_model(SimpleNamespace(llm_engine=SimpleNamespace())) is None


def test_backend_converts_outputs_and_seeds_requests():
    llm = FakeLLM()
    backend = VLLMBackend(llm=llm, sampling_params_cls=dict)
    torch.manual_seed(0)
    out = backend.generate([[5, 6], [9]], 2, SamplingConfig(max_new_tokens=3, temperature=0.9), want_logprobs=True)
    assert [[g.token_ids for g in group] for group in out] == [[[6, 2], [7, 7, 7]], [[9, 2], [10, 10, 10]]]
    assert [g.finish_reason for g in out[0]] == ["stop", "length"]
    assert out[0][1].logprobs == [-0.5, -1.0, -1.5]
    requests, params = llm.requests[0]
    assert requests == [{"prompt_token_ids": [5, 6]}, {"prompt_token_ids": [9]}]
    assert params[0]["temperature"] == 0.9 and params[0]["n"] == 2
    assert params[0]["seed"] != params[1]["seed"]  # per-request seeds from torch's RNG
    torch.manual_seed(0)
    backend.generate([[5, 6], [9]], 2, SamplingConfig(max_new_tokens=3, temperature=0.9))
    assert [p["seed"] for p in llm.requests[1][1]] == [p["seed"] for p in params]  # reproducible


def test_load_weights_direct_and_through_collective_rpc():
    weights = [("a.weight", torch.ones(2)), ("b.weight", torch.zeros(3))]
    llm = FakeLLM()
    backend = VLLMBackend(llm=llm, sampling_params_cls=dict)
    assert backend.load_weights(iter(weights)) == 2
    assert [n for n, _ in llm.model.loaded] == ["a.weight", "b.weight"] and llm.resets == 1 and not llm.rpc_calls
    # tensor parallel (or no reachable model object): every worker loads through collective_rpc
    llm_tp = FakeLLM(with_model=False)
    backend_tp = VLLMBackend(llm=llm_tp, sampling_params_cls=dict, engine_kwargs={"tensor_parallel_size": 2})
    assert backend_tp.load_weights(iter(weights)) == 2
    assert len(llm_tp.rpc_calls) == 1 and [n for n, _ in llm_tp.model.loaded] == ["a.weight", "b.weight"]
    no_path = VLLMBackend(llm=SimpleNamespace(), sampling_params_cls=dict)
    with pytest.raises(RuntimeError, match="collective_rpc"):
        no_path.load_weights(iter(weights))


def test_policy_on_vllm_backend_generates_and_syncs_weights(tiny):
    """The policy with the vLLM path (engine replaced by the stand-in): after_update sends
    the trained weights, under their HF names, to the engine."""
    policy = LLMCodeAgent(model=tiny, device="cpu", max_new_tokens=4)
    llm = FakeLLM()
    policy.backend_name = "vllm"
    policy.__dict__["backend"] = VLLMBackend(llm=llm, sampling_params_cls=dict)
    r = policy.generate([Task("t", "Say hi")], group_size=2)
    assert r.mask.shape == (2, 4) and r.mask.sum(1).tolist() == [2.0, 4.0]
    with torch.no_grad():
        policy.model.lm_head.weight.add_(1.0)
    policy.after_update()
    loaded = dict(llm.model.loaded)
    assert set(loaded) == set(policy.model.state_dict())
    assert torch.equal(loaded["lm_head.weight"], policy.model.lm_head.weight)
    assert llm.resets == 1
    # resuming from a checkpoint re-syncs the engine too
    state = {k: v.clone() for k, v in policy.state_dict().items()}
    llm.model.loaded.clear()
    policy.load_state_dict(state)
    assert llm.resets == 2 and set(dict(llm.model.loaded)) == set(policy.model.state_dict())


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_missing_vllm_names_the_fix(tiny):
    with pytest.raises(ImportError, match="backend: transformers"):
        import_vllm()
    with pytest.raises(ImportError, match="pip install vllm"):
        LLMCodeAgent(model=tiny, device="cpu", backend="vllm")


def test_the_engine_returns_the_log_probs_of_the_tempered_distribution_it_samples(monkeypatch, tiny):
    """What the backend asks of ``vllm.LLM``; that the engine honours it (tempered sampling log-probs
    equal the training model's recomputation) is the GPU check ``tempered_log_probs``."""
    from wmrl_autoresearch.llm.backends import vllm_backend

    made = {}

    class StandInLLM:
        def __init__(self, **kwargs):
            made.update(kwargs)

    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: SimpleNamespace(LLM=StandInLLM, SamplingParams=dict))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    VLLMBackend(model=tiny)
    assert made["logprobs_mode"] == "processed_logprobs"
    VLLMBackend(model=tiny, engine_kwargs={"logprobs_mode": "raw_logprobs"})  # a user's choice wins
    assert made["logprobs_mode"] == "raw_logprobs"

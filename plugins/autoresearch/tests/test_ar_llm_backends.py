"""The shared engine factory of the LLM policy and world model (``wmrl_autoresearch.llm.backends``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from wmrl_autoresearch.llm.backends import generation_stop_ids, make_backend
from wmrl_autoresearch.llm.backends.transformers_backend import TransformersBackend


def model_with_eos(eos):
    return SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=eos))


def test_stop_ids_join_the_model_and_the_tokenizer():
    assert generation_stop_ids(model_with_eos([2, 5]), SimpleNamespace(eos_token_id=7)) == {2, 5, 7}
    assert generation_stop_ids(model_with_eos(3), SimpleNamespace(eos_token_id=3)) == {3}
    assert generation_stop_ids(model_with_eos(None), SimpleNamespace(eos_token_id=None)) == set()


def test_stop_ids_are_read_under_a_peft_wrapper():
    base = model_with_eos([4])
    wrapped = SimpleNamespace(get_base_model=lambda: base)  # no generation_config of its own
    assert generation_stop_ids(wrapped, SimpleNamespace(eos_token_id=9)) == {4, 9}


def engine(name, **kw):
    args = dict(
        local_model=lambda: model_with_eos(1),
        tokenizer=SimpleNamespace(pad_token_id=0, eos_token_id=2),
        tokenizer_name="tok",
        batch_size=3,
        dtype="auto",
        seed=0,
        revision=None,
        trust_remote_code=False,
        vllm=None,
    )
    return make_backend(name, "model", **{**args, **kw})


def test_transformers_engine_samples_from_the_current_model_and_stops_at_its_eos():
    backend = engine("transformers")
    assert isinstance(backend, TransformersBackend)
    assert backend.stop_ids == {1, 2} and backend.pad_id == 0 and backend.batch_size == 3
    assert engine("transformers", stop_ids={8}).stop_ids == {8}


@pytest.mark.parametrize(
    "name, kw, match",
    [
        ("transformers", {"vllm": {"gpu_memory_utilization": 0.5}}, "only used with backend: vllm"),
        ("transformers", {"local_model": None}, "needs the loaded model"),
        ("sglang", {}, r"use one of \['transformers', 'vllm'\]"),
    ],
)
def test_engine_errors_name_the_fix(name, kw, match):
    with pytest.raises(ValueError, match=match):
        engine(name, **kw)

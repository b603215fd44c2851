"""WMRLGRPOTrainer on the AutoResearch domain: the tiny LM writes scripts, the anchors run in real
Docker sandboxes, the LLM world model (the same tiny LM, prompted with the task and the script)
scores every completion. Two steps, end to end."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow

SCRIPT_ANSWER = "```python\nprint('accuracy', 0.87)\n```"


def _docker_or_fail() -> None:
    from wmrl_autoresearch.sandbox.docker_client import DockerUnavailableError, docker_client
    from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE, image_exists

    try:
        client = docker_client(timeout_s=10)
        ok = image_exists(client, SANDBOX_IMAGE)
        client.close()
    except DockerUnavailableError as exc:
        ok, why = False, str(exc)
    else:
        why = f"sandbox image {SANDBOX_IMAGE} missing: run `wmrl-autoresearch build-image`"
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs Docker for this test: {why}")
        pytest.skip(why)


def _chat_prompt(task):
    from wmrl_autoresearch.llm import prompts as P

    return [
        {"role": "system", "content": P.POLICY_SYSTEM},
        {"role": "user", "content": P.fill(P.POLICY_TEMPLATE, task)},
    ]


def _warm_start(model_dir, task) -> None:
    """Teach the random tiny LM to answer with one fenced script, so that some of its sampled
    completions are scripts (the rest are not): a stand-in for an instruction-tuned model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    prompt = tok.apply_chat_template(_chat_prompt(task), tokenize=False, add_generation_prompt=True)
    ids = tok(prompt + SCRIPT_ANSWER + "<|end|>", add_special_tokens=False, return_tensors="pt")["input_ids"]
    n_prompt = len(tok(prompt, add_special_tokens=False)["input_ids"])
    labels = ids.clone()
    labels[:, :n_prompt] = -100
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(model_dir)


def test_autoresearch_two_steps_with_real_sandboxes(tmp_path):
    _docker_or_fail()
    from wmrl_autoresearch.llm.parsing import extract_script
    from wmrl_autoresearch.llm.testing import make_tiny_causal_lm
    from wmrl_trl import WMRLGRPOTrainer
    from wmrl_trl.testing import tiny_grpo_config

    from wmrl_core.config import load_config

    model_dir = str(make_tiny_causal_lm(tmp_path / "lm"))
    cfg = load_config(
        None,
        [
            "environment.name=autoresearch",
            "environment.kwargs={max_parallel: 2}",
            "policy.name=trl-model",
            "world_model.name=llm-world-model",
            f"world_model.kwargs={{model: {model_dir}, device: cpu, max_new_tokens: 8, batch_size: 8}}",
            "anchors.fraction=0.5",
        ],
    )
    from wmrl_autoresearch.environment import AutoResearchEnvironment

    tasks = AutoResearchEnvironment().tasks("train")[:2]
    _warm_start(model_dir, tasks[0])
    args = tiny_grpo_config(str(tmp_path / "run"), max_steps=2, max_completion_length=24, learning_rate=1e-3)
    trainer = WMRLGRPOTrainer.from_config(
        cfg,
        model=model_dir,
        args=args,
        render=_chat_prompt,
        to_solution=lambda task, text: extract_script(text),
        max_tasks=2,  # the warm-started task among them
        keep_history=True,
    )
    env, world_model = trainer.environment, trainer.world_model
    statuses: list[str] = []
    execute = env.execute

    def spy(run_tasks, solutions):
        outcomes = execute(run_tasks, solutions)
        statuses.extend(o.status for o in outcomes)
        return outcomes

    env.execute = spy
    predicted: list = []
    predict = world_model.predict

    def spy_predict(run_tasks, solutions):
        outcomes = predict(run_tasks, solutions)
        predicted.append([o.status for o in outcomes])
        return outcomes

    world_model.predict = spy_predict
    try:
        trainer.train()
    finally:
        trainer.close()
    seen = trainer.wmrl_history
    assert [s["step"] for s in seen] == [1, 2]
    assert len(statuses) == 2 * 4  # one anchor group of 4 a step, nothing else executed
    assert any(s not in ("invalid_solution", "sandbox_error") for s in statuses), statuses  # ran in a container
    for s in seen:
        real = np.asarray(s["real_rewards"], dtype=float)
        anchor_rows = np.repeat(np.asarray(s["anchor_groups"]), 4)
        assert np.isfinite(real[anchor_rows]).all()  # every executed script gets its reward, failures included
    for s, wm_statuses in zip(seen, predicted, strict=True):
        # a prediction that does not parse is `no_prediction`: dropped (NaN), never 0
        wm = np.asarray(s["wm_rewards"], dtype=float)
        dropped = np.asarray([st == "no_prediction" for st in wm_statuses])
        assert np.isnan(wm[dropped]).all() and np.isfinite(wm[~dropped]).all()

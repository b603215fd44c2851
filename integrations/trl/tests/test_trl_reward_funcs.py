"""WMRLGRPOTrainer as TRL users write it: ``reward_funcs`` (sync, async, weighted) as the real reward
on the anchor rows only, ``world_model`` as a reward function or a local reward model on every
row, held-out evaluation with ``num_generations_eval``, refused options, and TRL's logged
``reward`` metrics and completions table reporting WMRL's fused reward."""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest
import torch

from wmrl_core.errors import ConfigError
from wmrl_core.vowels import vowel_share

pytestmark = pytest.mark.slow  # TRL and transformers take seconds to import

PROMPTS = [f"Write some words, number {i}." for i in range(4)]
HELD_OUT = ["Name a fruit.", "Describe the sea.", "Count to three."]


def _dataset(prompts):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": p, "level": i} for i, p in enumerate(prompts)])


def _vowels(prompts, completions, **kwargs):
    return [vowel_share(c) for c in completions]


# -- the two pure functions, by hand -------------------------------------------------------------
def test_weighted_real_reward_sums_what_the_functions_returned():
    from wmrl_trl.reward_funcs import weighted_real_reward

    columns = np.array([[0.5, 1.0], [np.nan, 1.0], [0.2, np.nan], [np.nan, np.nan]])
    out = weighted_real_reward(columns, [2.0, 0.5])
    np.testing.assert_allclose(out[:3], [2 * 0.5 + 0.5 * 1.0, 0.5 * 1.0, 2 * 0.2])
    assert np.isnan(out[3])  # every function returned None: no reward, never 0
    with pytest.raises(ValueError):
        weighted_real_reward(columns, [1.0])


def test_reward_metrics_by_hand():
    from wmrl_trl.reward_funcs import reward_metrics

    m = reward_metrics(np.array([1.0, 1.0, np.nan, 3.0]), 2)
    assert m["reward"] == pytest.approx(5 / 3)
    assert m["reward_std"] == pytest.approx(math.sqrt(((2 / 3) ** 2 * 2 + (4 / 3) ** 2) / 2))  # Bessel, NaN skipped
    assert m["frac_reward_zero_std"] == 0.5  # group (1, 1) has no spread; (nan, 3) has too few rewards to tell


# -- options WMRL cannot honour ----------------------------------------------------------------------
def test_refuses_what_it_cannot_honour_by_name(tmp_path):
    from wmrl_trl import WMRLGRPOTrainer
    from wmrl_trl.testing import tiny_grpo_config

    from wmrl_core.vowels import VowelsEnvironment, VowelsWorldModel

    args = tiny_grpo_config(str(tmp_path), multi_objective_aggregation="normalize_then_sum", reward_weights=[1, 2, 3])
    with pytest.raises(ConfigError) as err:
        WMRLGRPOTrainer("unused", reward_funcs=[_vowels], args=args, environment_factory=lambda: None)
    message = str(err.value)
    assert "multi_objective_aggregation='normalize_then_sum'" in message and "use 'sum_then_normalize'" in message
    assert "reward_weights has 3 weights for 1 reward_funcs" in message
    assert "environment_factory" in message and "reward_funcs" in message

    env = VowelsEnvironment()
    plugin = {"environment": env, "reward": lambda task, outcome: outcome.score, "tasks": env.tasks("train")}
    with pytest.raises(ConfigError, match=r"reward_weights=\[1.0\]: the plugin route has one real reward"):
        WMRLGRPOTrainer("unused", args=tiny_grpo_config(str(tmp_path), reward_weights=[1.0]), **plugin)
    with pytest.raises(ConfigError, match="not both"):
        WMRLGRPOTrainer("unused", reward_funcs=[_vowels], args=tiny_grpo_config(str(tmp_path)), **plugin)
    with pytest.raises(ConfigError, match="goes with environment= and reward="):
        WMRLGRPOTrainer(
            "unused", reward_funcs=[_vowels], world_model=VowelsWorldModel(), args=tiny_grpo_config(str(tmp_path))
        )
    with pytest.raises(ConfigError, match="needs a real reward"):
        WMRLGRPOTrainer("unused", args=tiny_grpo_config(str(tmp_path)))


# -- reward_funcs and a world-model function, trained once for the tests below ---------------------
@pytest.fixture(scope="module")
def trained(tiny_qwen2, tmp_path_factory):
    from wmrl_trl import WMRLGRPOTrainer
    from wmrl_trl.testing import tiny_grpo_config

    seen = {"vowels": [], "short": [], "guess": []}

    def vowels(prompts, completions, completion_ids=None, level=None, **kwargs):
        assert len(completion_ids) == len(completions) and "trainer_state" in kwargs
        seen["vowels"].append(list(zip(completions, level, prompts)))
        return [None if lvl % 2 else vowel_share(c) for c, lvl in zip(completions, level)]

    async def short(prompts, completions, level=None, **kwargs):
        await asyncio.sleep(0)
        seen["short"].append(list(completions))
        kwargs["log_extra"]("length", [len(c) for c in completions])
        return [None if lvl % 2 else float(len(c) < 20) for c, lvl in zip(completions, level)]

    def guess(prompts, completions, level=None, **kwargs):
        seen["guess"].append(list(zip(completions, level)))
        return [0.05 * lvl + 0.5 * (vowel_share(c) or 0.0) for c, lvl in zip(completions, level)]

    out = tmp_path_factory.mktemp("reward-funcs")
    args = tiny_grpo_config(str(out), max_steps=3, reward_weights=[1.0, 0.5], log_completions=True)
    trainer = WMRLGRPOTrainer(
        str(tiny_qwen2),
        reward_funcs=[vowels, short],
        world_model=guess,
        wmrl={"anchors.fraction": 0.5},
        args=args,
        train_dataset=_dataset(PROMPTS),
        keep_history=True,
    )
    trainer.train()
    return trainer, seen, out


def test_reward_funcs_sync_and_async_run_on_the_anchor_rows_only(trained):
    trainer, seen, _ = trained
    assert len(seen["vowels"]) == len(seen["short"]) == 3  # once a step, each
    odd_anchors = 0
    for step, every_row, anchored, shorts in zip(trainer.wmrl_history, seen["guess"], seen["vowels"], seen["short"]):
        anchor_rows = np.repeat(np.asarray(step["anchor_groups"]), 4)
        assert anchor_rows.sum() == 4 and len(anchored) == len(shorts) == 4  # one group of two
        expected_completions = [c for (c, _), a in zip(every_row, anchor_rows) if a]
        assert [c for c, _, _ in anchored] == shorts == expected_completions
        for _, level, prompt in anchored:
            assert prompt == PROMPTS[level]  # the dataset's columns reach the function, row by row
        real = np.asarray(step["real_rewards"], dtype=float)
        assert np.isnan(real[~anchor_rows]).all()
        expected = []
        for c, level, _ in anchored:
            share = vowel_share(c)
            if level % 2:  # both functions returned None: no reward (NaN), never 0
                expected.append(np.nan)
                odd_anchors += 1
            else:
                expected.append((share or 0.0) + 0.5 * float(len(c) < 20))  # a None among others adds nothing
        np.testing.assert_allclose(real[anchor_rows], expected, rtol=1e-6)
    assert odd_anchors  # some anchor group had every function return None
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"rewards/vowels/mean", "rewards/short/mean", "rewards/world_model/mean"} <= logged  # one per stream
    assert {"wmrl/reward/real_mean", "wmrl/reward/world_model_mean", "wmrl/reward/train_mean"} <= logged


def test_a_world_model_function_scores_every_row(trained):
    trainer, seen, _ = trained
    assert len(seen["guess"]) == 3 and all(len(rows) == 8 for rows in seen["guess"])
    for step, rows in zip(trainer.wmrl_history, seen["guess"]):
        expected = [0.05 * lvl + 0.5 * (vowel_share(c) or 0.0) for c, lvl in rows]
        np.testing.assert_allclose(step["wm_rewards"], expected, rtol=1e-6)


def _nanstd(x):
    x = x[np.isfinite(x)]
    return float(np.std(x, ddof=1)) if x.size > 1 else math.nan


def test_logged_reward_is_the_fused_reward(trained):
    trainer, _, _ = trained
    entries = [e for e in trainer.state.log_history if "reward" in e]
    assert len(entries) == len(trainer.wmrl_history) == 3
    summed_columns_differ = False
    for entry, step in zip(entries, trainer.wmrl_history):
        fused = np.asarray(step["fused_rewards"], dtype=float)
        real, wm = np.asarray(step["real_rewards"], float), np.asarray(step["wm_rewards"], float)
        anchor_rows = np.repeat(np.asarray(step["anchor_groups"]), 4)
        np.testing.assert_array_equal(fused[anchor_rows], real[anchor_rows])  # anchors train on the real reward
        assert np.isfinite(fused[~anchor_rows]).all()  # the rest on the calibrated world model
        assert entry["reward"] == pytest.approx(np.nanmean(fused), abs=1e-9)
        assert entry["reward"] == pytest.approx(entry["wmrl/reward/train_mean"], abs=1e-9)
        assert entry["reward_std"] == pytest.approx(_nanstd(fused), rel=1e-6)  # TRL's nanstd corrects in float32
        groups = fused.reshape(-1, 4)
        zero = [np.isfinite(g).sum() > 1 and _nanstd(g) < 1e-8 for g in groups]
        assert entry["frac_reward_zero_std"] == pytest.approx(np.mean(zero))
        # what TRL alone would log: the columns summed, anchor rows counted twice
        both = np.stack([wm, real])
        summed = np.where(np.isfinite(both).any(0), np.nansum(both, 0), np.nan)
        summed_columns_differ |= abs(np.nanmean(summed) - entry["reward"]) > 1e-6
    assert summed_columns_differ


def test_log_completions_show_the_fused_reward_and_wmrl_advantages(trained):
    import pandas as pd

    trainer, _, out = trained
    table = pd.read_parquet(out / "completions" / "completions_00003.parquet")
    last = trainer.wmrl_history[-1]
    assert list(table.columns[:7]) == ["step", "prompt", "completion", "fused_reward", "world_model", "vowels", "short"]
    np.testing.assert_allclose(table["fused_reward"], last["fused_rewards"], rtol=1e-6)
    np.testing.assert_allclose(table["world_model"], last["wm_rewards"], rtol=1e-6)
    np.testing.assert_allclose(table["advantage"], last["advantages"], rtol=1e-6, atol=1e-7)
    anchor_rows = np.repeat(np.asarray(last["anchor_groups"]), 4)
    lengths = table["length"].to_numpy()  # logged by the async function on its rows, None elsewhere
    assert all(v is None or (isinstance(v, float) and math.isnan(v)) for v in lengths[~anchor_rows])
    assert [int(v) for v in lengths[anchor_rows]] == [len(c) for c in table["completion"][anchor_rows]]


# -- a reward model as the world model ---------------------------------------------------------------
def test_a_local_reward_model_as_the_world_model_scores_every_row(tiny_qwen2, tmp_path):
    from transformers import (
        AutoConfig,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        PreTrainedModel,
        Qwen2ForSequenceClassification,
    )
    from wmrl_trl import WMRLGRPOTrainer
    from wmrl_trl.testing import tiny_grpo_config

    folder = tmp_path / "reward-model"
    config = AutoConfig.from_pretrained(tiny_qwen2)
    config.num_labels = 1
    torch.manual_seed(1)
    Qwen2ForSequenceClassification(config).save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen2)
    tokenizer.save_pretrained(folder)
    reward_model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1)

    args = tiny_grpo_config(str(tmp_path / "run"), max_steps=1)
    trainer = WMRLGRPOTrainer(
        str(tiny_qwen2),
        reward_funcs=[_vowels],
        world_model=reward_model,
        args=args,
        train_dataset=_dataset(PROMPTS),
        keep_history=True,
    )
    trainer.train()
    texts = [p + c for p, c in zip(trainer._logs["prompt"], trainer._logs["completion"])]
    encoded = tokenizer(text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    with torch.no_grad():
        expected = reward_model(**encoded).logits[:, 0].numpy()
    scores = np.asarray(trainer.last_wmrl["wm_rewards"], dtype=float)
    assert scores.shape == (8,) and np.isfinite(scores).all()
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-5)

    by_path = WMRLGRPOTrainer(
        str(tiny_qwen2),
        reward_funcs=[_vowels],
        world_model=str(folder),  # a reward model's id, as TRL takes one in reward_funcs
        args=tiny_grpo_config(str(tmp_path / "by-path")),
        train_dataset=_dataset(PROMPTS),
    )
    assert isinstance(by_path.reward_funcs[0], PreTrainedModel) and by_path.reward_func_names[0] == "world_model"


# -- held-out evaluation -------------------------------------------------------------------------------
def test_eval_dataset_of_new_prompts_with_fewer_generations(tiny_qwen2, tmp_path):
    from wmrl_trl import WMRLGRPOTrainer
    from wmrl_trl.testing import tiny_grpo_config

    real_rewards, world_model_calls = [], []

    def vowels(prompts, completions, **kwargs):
        assert set(prompts) <= set(HELD_OUT)
        rewards = [vowel_share(c) for c in completions]
        real_rewards.extend(np.nan if r is None else r for r in rewards)
        return rewards

    def guess(prompts, completions, **kwargs):
        world_model_calls.append(len(completions))
        return [0.5] * len(completions)

    # 2 generations per held-out prompt, one prompt per batch: 2 completions, not a multiple of num_generations=4
    args = tiny_grpo_config(str(tmp_path), num_generations_eval=2, per_device_eval_batch_size=2)
    trainer = WMRLGRPOTrainer(
        str(tiny_qwen2),
        reward_funcs=[vowels],
        world_model=guess,
        args=args,
        train_dataset=_dataset(PROMPTS),
        eval_dataset=_dataset(HELD_OUT),
    )
    metrics = trainer.evaluate()
    assert len(real_rewards) == 2 * len(HELD_OUT) and world_model_calls == []  # the real reward alone
    assert metrics["eval_reward"] == pytest.approx(np.nanmean(real_rewards), abs=1e-6)
    assert metrics["eval_rewards/vowels/mean"] == pytest.approx(np.nanmean(real_rewards), abs=1e-6)


def test_plugin_route_evaluates_tasks_it_does_not_train_on(tiny_qwen2, tmp_path):
    from wmrl_trl import WMRLGRPOTrainer, task_dataset
    from wmrl_trl.testing import tiny_grpo_config

    from wmrl_core.vowels import VowelsEnvironment, VowelsWorldModel, vowels_config

    env = VowelsEnvironment()
    tasks = env.tasks("train")
    train, held_out = tasks[:4], tasks[4:6]

    def make(eval_tasks, known):
        return WMRLGRPOTrainer(
            str(tiny_qwen2),
            wmrl=vowels_config(),
            environment=env,
            world_model=VowelsWorldModel(),
            reward=lambda task, outcome: outcome.score,
            tasks=known,
            args=tiny_grpo_config(str(tmp_path), num_generations_eval=2, per_device_eval_batch_size=2),
            train_dataset=task_dataset(train, lambda t: t.description),
            eval_dataset=task_dataset(eval_tasks, lambda t: t.description),
        )

    metrics = make(held_out, train + held_out).evaluate()
    assert env.executed == 2 * len(held_out) and math.isfinite(metrics["eval_reward"])
    assert metrics["eval_reward"] == pytest.approx(metrics["eval_rewards/real/mean"], abs=1e-6)
    with pytest.raises(ConfigError, match=r"task_id vowels-[45] is not among the 4 tasks passed as tasks="):
        make(held_out, train).evaluate()

    from_config = WMRLGRPOTrainer.from_config(
        vowels_config(),
        model=str(tiny_qwen2),
        args=tiny_grpo_config(str(tmp_path)),
        render=lambda t: t.description,
        eval_split="heldout",
    )
    assert len(from_config.eval_dataset) == len(env.tasks("heldout"))
    assert set(from_config.eval_dataset["task_id"]) <= set(from_config.tasks_by_id)


# -- the example -------------------------------------------------------------------------------------------
def test_the_example_runs_as_printed(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "vowels.py"
    done = subprocess.run([sys.executable, str(example), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "6 WMRL steps; real reward run on 24 completions of 48; logged reward = WMRL's fused reward at every step"
        in done.stdout
    )
    state = json.loads((tmp_path / "run" / "checkpoint-6" / "trainer_state.json").read_text())
    logged = [e for e in state["log_history"] if "reward" in e]
    assert len(logged) == 6
    for entry in logged:
        assert entry["reward"] == pytest.approx(entry["wmrl/reward/train_mean"], abs=1e-9)
    assert [e["step"] for e in state["log_history"] if "eval_reward" in e] == [3, 6]
    assert (tmp_path / "run" / "checkpoint-6" / "wmrl_state.pt").exists()

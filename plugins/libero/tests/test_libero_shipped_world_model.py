"""The shipped world-model checkpoint: the LIBERO-Long config's default, covering its tasks."""

from pathlib import Path

import numpy as np
import pytest
import torch
from wmrl_libero.experiments import config_path
from wmrl_libero.world_models.checkpoint import load_bundle
from wmrl_libero.world_models.imagination import ImaginationWorldModel

from wmrl_core.config import load_config
from wmrl_core.types import Task

CONFIG = config_path("libero_long.yaml")
SHIPPED = "plugins/libero/checkpoints/libero_wm_t0-9.pt"
"""The config's default, relative to the repository root (where `wmrl train` runs)."""
CHECKPOINT = Path(__file__).resolve().parents[1] / "checkpoints" / "libero_wm_t0-9.pt"
"""The same file, found from this plugin's folder."""


@pytest.fixture(scope="module")
def bundle():
    return load_bundle(CHECKPOINT)


def test_config_defaults_to_the_shipped_checkpoint_and_the_env_var_overrides(monkeypatch, tmp_path):
    monkeypatch.delenv("WMRL_LIBERO_WM", raising=False)
    assert load_config(CONFIG).world_model.kwargs["checkpoint"] == SHIPPED
    monkeypatch.setenv("WMRL_LIBERO_WM", str(tmp_path / "mine.pt"))
    assert load_config(CONFIG).world_model.kwargs["checkpoint"] == str(tmp_path / "mine.pt")


def test_shipped_checkpoint_is_small_and_covers_every_configured_task(bundle):
    assert CHECKPOINT.stat().st_size < 5 * 2**20
    tasks = load_config(CONFIG).environment.kwargs["task_indices"]
    assert set(tasks) <= set(range(10)) and len(tasks) >= 9
    for t in range(10):  # all ten LIBERO-10 tasks: a 0-9 base policy needs no new world model
        assert t in bundle.object_len, f"task {t} missing from the shipped world model"
        assert any(k[0] == t for k in bundle.initial_states), f"no start state of task {t}"
    meta = bundle.meta
    assert meta["heldout_init_states"] == list(range(40, 50))
    assert meta["train_successes"] < meta["train_episodes"]  # failures were trained on


def test_shipped_checkpoint_imagines_a_batch_of_every_task():
    # one start state per task, 8 chunks of random actions: finite probabilities in [0, 1]
    wm = ImaginationWorldModel(checkpoint=str(CHECKPOINT), horizon=32)
    starts = {}
    for t, s in sorted(wm.bundle.initial_states):
        starts.setdefault(t, s)
    tasks = [
        Task(id=f"libero_10/{t}/{s}", data={"suite": "libero_10", "task_index": t, "init_state": s})
        for t, s in starts.items()
    ]
    torch.manual_seed(0)
    actions = [np.random.default_rng(i).uniform(-1, 1, (32, 7)) for i in range(len(tasks))]
    scores = np.array([o.score for o in wm.predict(tasks, actions)])
    assert len(scores) == 10 and np.isfinite(scores).all() and ((scores >= 0) & (scores <= 1)).all()

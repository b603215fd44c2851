"""The Hugging Face action-token VLA loader on a tiny model built locally."""

import numpy as np
import pytest
import torch
from wmrl_libero.policies.hf_vla import ActionTokenizer, HFActionTokenVLA
from wmrl_libero.policies.vla_interface import VLAInput
from wmrl_libero.testing import build_tiny_action_token_model

from wmrl_core.testing import require


def test_action_tokenizer_round_trip_matches_openvla_binning():
    at = ActionTokenizer(vocab_size=32000)
    a = np.array([-1.0, -0.5, 0.0, 0.3, 0.999, 1.0, 0.01])
    ids = at.encode(a)
    assert ids.min() >= 32000 - 255 and ids.max() <= 31999
    assert np.abs(at.decode(ids) - a).max() <= 2.0 / 255 + 1e-9  # within one bin width
    assert at.encode(np.array([-1.0]))[0] == 31999  # OpenVLA: token = vocab_size - digitize(a)


@pytest.fixture(scope="module")
def vla(tmp_path_factory):
    import importlib.util

    require(
        importlib.util.find_spec("transformers") is not None,
        "transformers is not installed: pip install 'wmrl-libero[hf]'",
    )
    folder = build_tiny_action_token_model(tmp_path_factory.mktemp("tiny_vla"))
    return HFActionTokenVLA(folder)


def test_sample_and_log_prob_agree_and_are_trainable(vla):
    x = VLAInput("put both the alphabet soup and the tomato sauce in the basket", np.zeros(16, np.float32))
    torch.manual_seed(0)
    actions, lp = vla.sample([x])
    assert actions.shape == (1, 1, 7) and lp.shape == (1, 1)
    assert actions.abs().max() <= 1.0
    recomputed = vla.log_prob([x], actions)
    assert recomputed.item() == pytest.approx(lp.item(), abs=1e-4)
    # a few gradient steps on the log-prob of one target action make it more likely
    target = torch.tensor([[[0.5, -0.5, 0.0, 0.1, -0.1, 0.2, 1.0]]])
    opt = torch.optim.Adam(vla.parameters(), lr=1e-2)
    before = vla.log_prob([x], target).item()
    for _ in range(10):
        loss = -vla.log_prob([x], target).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert vla.log_prob([x], target).item() > before + 1.0
    greedy, _ = vla.sample([x], deterministic=True)
    assert np.abs(greedy.numpy() - target.numpy()).max() < 0.05

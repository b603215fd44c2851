"""Hugging Face VLA checkpoints with OpenVLA-style action tokens.

OpenVLA's action tokenizer: each of the 7 action dimensions in [-1, 1] is cut into 256
uniform bins (``np.digitize`` against ``linspace(-1, 1, 256)``, values 1..256) and written
as token ``vocab_size - bin``, i.e. the last 255 ids of the tokenizer's vocabulary; decoding
takes the centre of the bin. An action is 7 tokens generated after the prompt
``"In: What action should the robot take to {instruction}?\\nOut:"``.

This loader handles causal language models (``AutoModelForCausalLM`` + ``AutoTokenizer``):
the prompt is text, optionally followed by the discretised proprioception. Log-probs are
taken over the 255 action tokens only (a softmax restricted to them), summed over the 7
tokens of an action: a proper distribution over the discretised action space for GRPO.

Not handled yet: the image input of real OpenVLA checkpoints (a Prismatic vision backbone
loaded with ``trust_remote_code``); this loader ignores images, so a released OpenVLA
checkpoint would run blind. Tested on a tiny model built locally (tests/).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from wmrl_libero.policies.vla_interface import VLAInput

__all__ = ["ActionTokenizer", "HFActionTokenVLA", "HFVLAController", "load_controller_factory"]

PROMPT = "In: What action should the robot take to {instruction}?\nOut:"


class ActionTokenizer:
    """OpenVLA's discretisation: actions in [-1, 1] <-> the last ``n_bins - 1`` token ids."""

    def __init__(self, vocab_size: int, n_bins: int = 256):
        self.vocab_size, self.n_bins = vocab_size, n_bins
        self.bins = np.linspace(-1.0, 1.0, n_bins)
        self.centers = (self.bins[:-1] + self.bins[1:]) / 2.0
        self.token_ids = torch.arange(vocab_size - (n_bins - 1), vocab_size)  # ascending ids

    def encode(self, actions: np.ndarray) -> np.ndarray:
        """Float actions -> token ids (same shape)."""
        disc = np.digitize(np.clip(actions, -1.0, 1.0), self.bins)
        return self.vocab_size - np.clip(disc, 1, self.n_bins - 1)

    def decode(self, token_ids: np.ndarray) -> np.ndarray:
        """Token ids -> bin-centre actions in [-1, 1]."""
        disc = np.clip(self.vocab_size - np.asarray(token_ids), 1, self.n_bins - 1)
        return self.centers[disc - 1]

    def index_in_action_vocab(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Position of each id in ``self.token_ids`` (for gathering restricted log-probs)."""
        return token_ids - int(self.token_ids[0])


class HFActionTokenVLA(nn.Module):
    """A causal LM checkpoint as a VLA (chunk of one action = 7 tokens).

    :param model_dir: folder with a ``transformers`` causal LM and its tokenizer.
    :param use_proprio: append ``State: <7 proprio tokens>`` to the prompt (eef position and
        gripper, discretised like actions after scaling); off for OpenVLA-style checkpoints.
    """

    chunk = 1

    def __init__(self, model_dir: str | Path, *, use_proprio: bool = False, n_bins: int = 256):
        super().__init__()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir)
        self.actions = ActionTokenizer(len(self.tokenizer), n_bins)
        if self.model.config.vocab_size < self.actions.vocab_size:
            raise ValueError(f"{model_dir}: model vocabulary {self.model.config.vocab_size} is smaller than the tokenizer's "
                             f"{self.actions.vocab_size}; not an action-token VLA checkpoint")
        self.use_proprio = use_proprio

    def _prompt_ids(self, x: VLAInput) -> torch.Tensor:
        ids = self.tokenizer(PROMPT.format(instruction=x.instruction.lower()), return_tensors="pt").input_ids[0]
        if self.use_proprio:
            state = np.concatenate([x.proprio[:3] * 2.0, x.proprio[7:9] * 25.0, [0.0, 0.0]])  # ~[-1, 1]
            ids = torch.cat([ids, torch.as_tensor(self.actions.encode(state), dtype=torch.long)])
        return ids

    def _restricted_log_probs(self, ids: torch.Tensor) -> torch.Tensor:
        """(L, 255) log-probs over action tokens of the next token after each position."""
        logits = self.model(input_ids=ids[None]).logits[0]
        return torch.log_softmax(logits[:, self.actions.token_ids], dim=-1)

    def sample(self, inputs: list[VLAInput], *, deterministic: bool = False, generator=None):
        acts, lps = [], []
        for x in inputs:
            ids = self._prompt_ids(x)
            total = torch.zeros(())
            tokens = []
            with torch.no_grad():
                for _ in range(7):
                    lp = self._restricted_log_probs(ids)[-1]
                    k = int(lp.argmax()) if deterministic else int(torch.multinomial(lp.exp(), 1, generator=generator))
                    total = total + lp[k]
                    tok = self.actions.token_ids[k]
                    tokens.append(int(tok))
                    ids = torch.cat([ids, tok.view(1)])
            acts.append(torch.as_tensor(self.actions.decode(np.array(tokens)), dtype=torch.float32))
            lps.append(total)
        return torch.stack(acts)[:, None, :], torch.stack(lps)[:, None]

    def log_prob(self, inputs: list[VLAInput], actions: torch.Tensor) -> torch.Tensor:
        """Differentiable (B, 1) log-probs of (B, 1, 7) actions (taken at their bins)."""
        out = []
        for x, a in zip(inputs, actions):
            tokens = torch.as_tensor(self.actions.encode(a[0].detach().numpy()), dtype=torch.long)
            prompt = self._prompt_ids(x)
            lp = self._restricted_log_probs(torch.cat([prompt, tokens[:-1]]))[len(prompt) - 1:]
            out.append(lp.gather(1, self.actions.index_in_action_vocab(tokens)[:, None]).sum())
        return torch.stack(out)[:, None]


class HFVLAController:
    """Closed loop: one action per query (greedy by default)."""

    def __init__(self, vla: HFActionTokenVLA, instruction: str, *, deterministic: bool = True):
        self.vla, self.instruction, self.deterministic = vla, instruction, deterministic

    def act(self, obs, info) -> np.ndarray:
        actions, _ = self.vla.sample([VLAInput.from_obs(obs, self.instruction)], deterministic=self.deterministic)
        return actions[0].numpy()


def load_controller_factory(model_dir: str):
    from wmrl_libero.controllers import ControllerFactory

    vla = HFActionTokenVLA(model_dir).eval()
    return ControllerFactory(make=lambda task, init: HFVLAController(vla, task.language), name=f"hf-vla:{model_dir}")


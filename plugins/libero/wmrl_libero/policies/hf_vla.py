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

WMRL policy ``libero-hf-vla`` (:class:`HFVLAPolicy`): GRPO on the action tokens. Each
solution is a closed-loop controller that samples the 7 action tokens of every step at a
temperature from uniforms drawn at generation time, and records (prompt ids, sampled token
ids) per step; :meth:`HFVLAPolicy.log_probs` recomputes the restricted log-probs of the
same tokens differentiably.

Not handled yet: the image input of real OpenVLA checkpoints (a Prismatic vision backbone
loaded with ``trust_remote_code``); this loader **ignores images**, so a released OpenVLA
checkpoint would run blind. Without ``use_proprio`` the prompt is the instruction only, so
the policy does not depend on the observation at all (a closed loop in name only). Tested
on a tiny model built locally (tests/).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from wmrl_libero.gym_env import NOOP_ACTION
from wmrl_libero.policies.vla_interface import VLAInput

__all__ = ["ActionTokenizer", "HFActionTokenVLA", "HFVLAController", "HFVLAPolicy", "load_controller_factory"]

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
            raise ValueError(
                f"{model_dir}: model vocabulary {self.model.config.vocab_size} is smaller than the tokenizer's "
                f"{self.actions.vocab_size}; not an action-token VLA checkpoint"
            )
        self.use_proprio = use_proprio

    def _prompt_ids(self, x: VLAInput) -> torch.Tensor:
        ids = self.tokenizer(PROMPT.format(instruction=x.instruction.lower()), return_tensors="pt").input_ids[0]
        if self.use_proprio:
            state = np.concatenate([x.proprio[:3] * 2.0, x.proprio[7:9] * 25.0, [0.0, 0.0]])  # ~[-1, 1]
            ids = torch.cat([ids, torch.as_tensor(self.actions.encode(state), dtype=torch.long)])
        return ids

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _restricted_log_probs(self, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        """(L, 255) log-probs over action tokens of the next token after each position."""
        logits = self.model(input_ids=ids[None].to(self._device())).logits[0]
        return torch.log_softmax(logits[:, self.actions.token_ids.to(logits.device)].float() / temperature, dim=-1)

    @torch.no_grad()
    def sample_tokens(self, prompt: torch.Tensor, uniforms: torch.Tensor, temperature: float = 1.0):
        """Sample the 7 action tokens after ``prompt`` by inverse CDF from ``uniforms`` (7,).

        :return: (token ids (7,) long, summed restricted log-prob at ``temperature``, a float).
        """
        ids, tokens, total = prompt, [], 0.0
        for u in uniforms.tolist():
            lp = self._restricted_log_probs(ids, temperature)[-1]
            cdf = lp.exp().cumsum(0)
            k = min(int(torch.searchsorted(cdf, torch.tensor([u * float(cdf[-1])], device=cdf.device))), len(cdf) - 1)
            total += float(lp[k])
            tok = self.actions.token_ids[k]
            tokens.append(int(tok))
            ids = torch.cat([ids, tok.view(1)])
        return torch.tensor(tokens, dtype=torch.long), total

    def token_log_probs(
        self, prompts: list[torch.Tensor], tokens: torch.Tensor, temperature: float = 1.0, batch_size: int = 64
    ) -> torch.Tensor:
        """Differentiable (M,) log-probs of ``tokens`` (M, 7) after ``prompts`` (M prompt id
        tensors), summed over the 7 tokens; batched, right-padded (causal: padding after a
        row's tokens does not change them)."""
        out = []
        pad = self.tokenizer.pad_token_id or 0
        device = self._device()
        action_ids = self.actions.token_ids.to(device)
        for start in range(0, len(prompts), batch_size):
            seqs = [
                torch.cat([p, t[:-1]])
                for p, t in zip(prompts[start : start + batch_size], tokens[start : start + batch_size])
            ]
            length = max(len(q) for q in seqs)
            ids = torch.full((len(seqs), length), pad, dtype=torch.long)
            attn = torch.zeros((len(seqs), length), dtype=torch.long)
            for r, q in enumerate(seqs):
                ids[r, : len(q)], attn[r, : len(q)] = q, 1
            logits = self.model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits
            starts = torch.tensor([len(q) - 6 for q in seqs], device=device)  # position predicting token 0
            rows = torch.arange(len(seqs), device=device)[:, None]
            pos = starts[:, None] - 1 + torch.arange(7, device=device)[None]
            lp = torch.log_softmax(logits[rows, pos][..., action_ids].float() / temperature, dim=-1)  # (m, 7, 255)
            idx = self.actions.index_in_action_vocab(tokens[start : start + batch_size]).to(device)
            out.append(lp.gather(2, idx[..., None])[..., 0].sum(-1))
        return torch.cat(out) if out else torch.zeros(0, device=device)

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
            lp = self._restricted_log_probs(torch.cat([prompt, tokens[:-1]]))[len(prompt) - 1 :]
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


class _TokenSamplingController:
    """One closed-loop sample of :class:`HFVLAPolicy` for one rollout.

    Step ``t`` builds the prompt from the observation (instruction, plus proprio with
    ``use_proprio``; images are ignored), samples its 7 action tokens from the pre-drawn
    uniforms ``u[t]`` and records (prompt ids, token ids). The sampling log-prob and the
    mask of step ``t`` are written into this rollout's rows of ``Rollouts.old_log_probs`` and
    ``Rollouts.mask`` (views), so they are known once the episode has run. After
    ``len(u)`` steps it holds still (no-op, gripper open).
    """

    def __init__(
        self,
        vla: HFActionTokenVLA,
        instruction: str,
        uniforms: torch.Tensor,
        temperature: float,
        old_row: torch.Tensor,
        mask_row: torch.Tensor,
    ):
        self.vla, self.instruction, self.uniforms, self.temperature = vla, instruction, uniforms, temperature
        self.old_row, self.mask_row = old_row, mask_row
        self.prompts: list[torch.Tensor] = []
        self.tokens: list[torch.Tensor] = []

    @torch.no_grad()
    def act(self, obs, info) -> np.ndarray:
        t = len(self.tokens)
        if t >= len(self.uniforms):
            return NOOP_ACTION[None].copy()
        prompt = self.vla._prompt_ids(VLAInput.from_obs(obs, self.instruction))
        tokens, lp = self.vla.sample_tokens(prompt, self.uniforms[t], self.temperature)
        self.prompts.append(prompt)
        self.tokens.append(tokens)
        self.old_row[t] = lp
        self.mask_row[t] = 1.0
        return self.vla.actions.decode(tokens.numpy()).astype(np.float32)[None]


class HFVLAPolicy(nn.Module):
    """A Hugging Face action-token VLA as a WMRL policy (GRPO on discrete action tokens).

    Factory: ``HFVLAPolicy(env=env, checkpoint=MODEL_DIR, ...)`` (registered as
    ``libero-hf-vla``). **Images are ignored** (see the module docstring): the prompt is the
    instruction, plus the discretised proprioception with ``use_proprio=True``.

    A solution is a closed-loop controller (:class:`_TokenSamplingController`); its ``T``
    log-prob entries are its steps (``T = max_steps``), each the sum over the 7 action tokens
    of the log-prob under ``softmax(logits[action tokens] / temperature)``. Unlike a Gaussian
    with pre-drawn noise, these depend on what the episode meets, so ``old_log_probs`` and
    ``mask`` are zeros at generation and each step's entries are written in place while the
    environment runs the controller (in this process); a rollout never executed keeps an
    empty mask. :meth:`log_probs` recomputes the same tokens' log-probs under the current
    weights, ``(N, T)`` (0 at the steps not executed), and changes nothing in the rollouts.

    :param env: the WMRL environment; its ``max_episode_steps`` is the default ``max_steps``.
    :param checkpoint: folder of a ``transformers`` causal LM + tokenizer with action tokens.
    :param max_steps: steps per rollout (default the environment's episode limit, else 520).
    :param temperature: sampling temperature (> 0), also used by :meth:`log_probs`.
    :param use_proprio: append the discretised proprioception to the prompt.
    :param batch_size: sequences per forward pass in :meth:`log_probs`.
    """

    def __init__(
        self,
        env=None,
        *,
        checkpoint: str | Path | None = None,
        max_steps: int | None = None,
        temperature: float = 1.0,
        use_proprio: bool = False,
        batch_size: int = 64,
    ):
        super().__init__()
        if not checkpoint:
            raise ValueError("libero-hf-vla needs checkpoint=MODEL_DIR (a transformers causal LM with action tokens)")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
        self.vla = HFActionTokenVLA(checkpoint, use_proprio=use_proprio)
        self.max_steps = int(max_steps or getattr(env, "max_episode_steps", None) or 520)
        self.temperature, self.batch_size = float(temperature), batch_size

    @torch.no_grad()
    def generate(self, tasks, group_size: int):
        from wmrl_core.types import Rollouts

        n = len(tasks) * group_size
        device = self.vla._device()
        old = torch.zeros(n, self.max_steps, device=device)
        mask = torch.zeros(n, self.max_steps, device=device)
        flat, groups, solutions = [], [], []
        for g, task in enumerate(tasks):
            for _ in range(group_size):
                i = len(solutions)
                uniforms = torch.rand(self.max_steps, 7)  # torch's global RNG (checkpointed by the trainer)
                solutions.append(
                    _TokenSamplingController(self.vla, task.description, uniforms, self.temperature, old[i], mask[i])
                )
                flat.append(task)
                groups.append(g)
        return Rollouts(flat, solutions, np.asarray(groups), old, mask, extra=None)

    def log_probs(self, rollouts) -> torch.Tensor:
        device = self.vla._device()
        rows, steps, prompts, tokens = [], [], [], []
        for i, ctrl in enumerate(rollouts.solutions):
            n = len(ctrl.tokens)
            rows += [i] * n
            steps += range(n)
            prompts += ctrl.prompts
            tokens += ctrl.tokens
        out = torch.zeros(len(rollouts), self.max_steps, device=device)
        if not tokens:
            return out + 0.0 * sum(p.sum() for p in self.parameters() if p.requires_grad)  # keeps a graph
        lp = self.vla.token_log_probs(prompts, torch.stack(tokens), self.temperature, self.batch_size)
        return out.index_put((torch.tensor(rows, device=device), torch.tensor(steps, device=device)), lp)

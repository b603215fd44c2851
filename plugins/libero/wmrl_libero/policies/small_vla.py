"""A small embedded vision-language-action policy (torch, trainable on CPU).

Inputs: the instruction (hashed word/bigram bag, :mod:`.text_encoding`), proprioception
(16), LIBERO's object-state vector (physics features, zero-padded to ``object_dim``) and,
when ``image_size`` is set, the agentview and wrist images through a 3-layer CNN.
Output: a Gaussian over a chunk of ``chunk`` actions: mean ``tanh(MLP)`` (k, 7), a learned
state-independent log standard deviation per action dimension. Log-probs are per action
(summed over the 7 dimensions), shape (B, k). Gripper actions are continuous here; LIBERO
thresholds them at 0.

Also: the WMRL policy (:class:`SmallVLAPolicy`) and the controller used by
``wmrl-libero eval small-vla:CHECKPOINT``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from wmrl_libero.gym_env import NOOP_ACTION
from wmrl_libero.policies.text_encoding import hashed_token_ids
from wmrl_libero.policies.vla_interface import VLAInput, batch_inputs

__all__ = ["SmallVLA", "SmallVLAController", "load_small_vla", "load_controller_factory", "SmallVLAPolicy"]


class _ImageEncoder(nn.Module):
    def __init__(self, out_dim: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(6, 16, 5, stride=2),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
            nn.Flatten(),
            nn.Linear(128, out_dim),
            nn.ReLU(),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # (B, 6, H, W) in [0, 1]
        return self.net(images)


class SmallVLA(nn.Module):
    """The network. See the module docstring for inputs and outputs.

    :param chunk: actions per chunk.
    :param object_dim: object-state features kept (zero-padded); 0 ignores object state.
    :param image_size: camera side in pixels; ``None`` uses no images.
    :param hidden: width of the MLP.
    :param text_buckets: hash buckets of the instruction encoder.
    """

    def __init__(
        self,
        *,
        chunk: int = 4,
        object_dim: int = 128,
        image_size: int | None = None,
        hidden: int = 256,
        text_buckets: int = 2048,
        init_log_std: float = -1.0,
    ):
        super().__init__()
        self.config = dict(
            chunk=chunk,
            object_dim=object_dim,
            image_size=image_size,
            hidden=hidden,
            text_buckets=text_buckets,
            init_log_std=init_log_std,
        )
        self.chunk, self.object_dim, self.image_size, self.text_buckets = chunk, object_dim, image_size, text_buckets
        self.text = nn.EmbeddingBag(text_buckets, 64, mode="mean")
        self.images = _ImageEncoder(128) if image_size else None
        in_dim = 64 + 16 + object_dim + (128 if image_size else 0)
        self.trunk = nn.Sequential(
            nn.Linear(in_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
        )
        self.mean_head = nn.Linear(hidden, chunk * 7)
        self.log_std = nn.Parameter(torch.full((7,), float(init_log_std)))
        # feature scaling fitted on data by behaviour cloning (identity until then)
        self.register_buffer("feat_mean", torch.zeros(16 + object_dim))
        self.register_buffer("feat_std", torch.ones(16 + object_dim))

    def _text(self, instructions: list[str]) -> torch.Tensor:
        ids = [hashed_token_ids(text, self.text_buckets) for text in instructions]
        offsets = torch.tensor([0] + [len(x) for x in ids[:-1]]).cumsum(0)
        return self.text(torch.cat(ids), offsets)

    def _features(self, inputs: list[VLAInput]) -> torch.Tensor:
        proprio, objs = batch_inputs(inputs, self.object_dim)
        state = (torch.cat([proprio, objs], 1) - self.feat_mean) / self.feat_std
        parts = [self._text([i.instruction for i in inputs]), state]
        if self.images is not None:
            imgs = np.stack(
                [np.concatenate([i.images["agentview_image"], i.images["wrist_image"]], -1) for i in inputs]
            )
            parts.append(self.images(torch.as_tensor(imgs).permute(0, 3, 1, 2).float() / 255.0))
        return torch.cat(parts, 1)

    def _head(self, features: torch.Tensor) -> torch.distributions.Normal:
        mean = torch.tanh(self.mean_head(self.trunk(features))).view(-1, self.chunk, 7)
        return torch.distributions.Normal(mean, self.log_std.clamp(-5, 1).exp().expand_as(mean))

    def distribution(self, inputs: list[VLAInput]) -> torch.distributions.Normal:
        return self._head(self._features(inputs))

    def state_distribution(
        self, state: torch.Tensor, instructions: list[str], which: torch.Tensor
    ) -> torch.distributions.Normal:
        """The same distribution from pre-batched physics features (a fast path for training):
        ``state`` (B, 16 + object_dim) is proprio and zero-padded object state as
        :func:`~.vla_interface.batch_inputs` makes them, ``which`` (B,) indexes ``instructions``."""
        if self.images is not None:
            raise ValueError("state_distribution is the physics-only path; this model also reads images")
        return self._head(torch.cat([self._text(instructions)[which], (state - self.feat_mean) / self.feat_std], 1))

    def sample(self, inputs: list[VLAInput], *, deterministic: bool = False, generator=None):
        dist = self.distribution(inputs)
        if deterministic:
            actions = dist.mean
        else:
            actions = dist.mean + dist.stddev * torch.randn(dist.mean.shape, generator=generator)
        return actions.detach(), dist.log_prob(actions).sum(-1).detach()

    def log_prob(self, inputs: list[VLAInput], actions: torch.Tensor) -> torch.Tensor:
        return self.distribution(inputs).log_prob(actions).sum(-1)


def save_small_vla(model: SmallVLA, path: str | Path, **meta: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": model.config, "state_dict": model.state_dict(), "meta": meta}, path)
    return path


def load_small_vla(path: str | Path) -> SmallVLA:
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    model = SmallVLA(**ckpt["config"])
    model.load_state_dict(ckpt["state_dict"])
    return model.eval()


class SmallVLAController:
    """Closed loop: the chunk mean (deterministic) or a sample, from the latest observation."""

    def __init__(self, model: SmallVLA, instruction: str, *, deterministic: bool = True, seed: int = 0):
        self.model, self.instruction, self.deterministic = model, instruction, deterministic
        self.generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def act(self, obs, info) -> np.ndarray:
        actions, _ = self.model.sample(
            [VLAInput.from_obs(obs, self.instruction)], deterministic=self.deterministic, generator=self.generator
        )
        return actions[0].clamp(-1, 1).numpy()


def load_controller_factory(path: str):
    from wmrl_libero.controllers import ControllerFactory

    model = load_small_vla(path)
    torch.set_num_threads(1)
    return ControllerFactory(
        make=lambda task, init: SmallVLAController(model, task.language),
        name=f"small-vla:{Path(path).name}",
        image_size=model.image_size,
    )


class _NoiseController:
    """A sample of the policy, whole chunks executed open loop, with noise drawn in advance.

    Every ``chunk`` steps the policy reads the observation ``o_s`` and the next ``chunk``
    actions are ``a_{s+j} = mu_j(o_s) + sigma * eps_{s+j}`` (j = 0..chunk-1), the way
    ``wmrl-libero eval`` and DAgger run the small VLA (one chunk per observation, executed
    in full). ``eps_t`` is fixed at generation time, so the sampling-time log-prob
    ``sum log N(eps_t; 0, 1) - log sigma`` is known before the episode runs. :meth:`act`
    hands out one action per call, so the controller counts the steps actually executed;
    the observations at chunk starts are recorded so that :meth:`SmallVLAPolicy.log_probs`
    can recompute ``log pi(a_t | o_s)`` under new weights.
    """

    def __init__(self, model: SmallVLA, instruction: str, eps: torch.Tensor):
        self.model, self.instruction, self.eps = model, instruction, eps  # eps: (T, 7)
        self.inputs: list[VLAInput] = []  # one per chunk: the observation it was predicted from
        self.actions: list[torch.Tensor] = []  # one per executed step
        self._planned: torch.Tensor | None = None  # the current chunk (chunk, 7), unclamped

    def _chunk(self, dist: torch.distributions.Normal, row: int, t: int) -> torch.Tensor:
        n = min(self.model.chunk, len(self.eps) - t)
        return dist.mean[row, :n] + dist.stddev[row, :n] * self.eps[t : t + n]

    @torch.no_grad()
    def act(self, obs, info) -> np.ndarray:
        t = len(self.actions)
        if t >= len(self.eps):
            return NOOP_ACTION[None].copy()
        if t % self.model.chunk == 0:
            x = VLAInput.from_obs(obs, self.instruction)
            self._planned = self._chunk(self.model.distribution([x]), 0, t)
            self.inputs.append(x)
        a = self._planned[t % self.model.chunk]
        self.actions.append(a)
        return a.clamp(-1, 1).numpy()[None]

    @torch.no_grad()
    def act_batch(self, obs_list: list[dict], t: int) -> np.ndarray:
        """The chunk each observation would start at step ``t`` (B, chunk, 7), recording nothing
        (the imagination world model's interface; its steps then match real execution when
        its chunk is a multiple of the policy's)."""
        dist = self.model.distribution([VLAInput.from_obs(o, self.instruction) for o in obs_list])
        out = np.tile(NOOP_ACTION, (len(obs_list), self.model.chunk, 1)).astype(np.float32)
        for row in range(len(obs_list)):
            a = self._chunk(dist, row, t).clamp(-1, 1).numpy() if t < len(self.eps) else out[row, :0]
            out[row, : len(a)] = a
        return out


class SmallVLAPolicy(nn.Module):
    """The small VLA as a WMRL policy (GRPO).

    A solution is a controller (see :class:`_NoiseController`) that executes each predicted
    chunk in full, as ``wmrl-libero eval`` and DAgger do (so the base policy's measured
    success is what GRPO starts from); its ``T`` log-prob entries are its actions
    (``T = max_steps``). The mask marks the steps actually executed: it is all ones at
    generation time and :meth:`log_probs` clears the steps after the episode ended (the
    environment runs controllers in this process, so they record what happened).

    :param env: the WMRL environment (unused; for the factory signature).
    :param checkpoint: a behaviour-cloned checkpoint to start from (else random weights).
    :param max_steps: actions per rollout (the environment's episode limit).
    """

    def __init__(self, env=None, *, checkpoint: str | None = None, max_steps: int = 520, **model_kwargs):
        super().__init__()
        self.model = load_small_vla(checkpoint) if checkpoint else SmallVLA(**model_kwargs)
        self.max_steps = max_steps

    def generate(self, tasks, group_size: int):
        from wmrl_core.types import Rollouts

        flat, groups, solutions, old = [], [], [], []
        for g, task in enumerate(tasks):
            for _ in range(group_size):
                eps = torch.randn(self.max_steps, 7)
                sigma = self.model.log_std.clamp(-5, 1).exp().detach()
                old.append(torch.distributions.Normal(0.0, 1.0).log_prob(eps).sum(-1) - sigma.log().sum())
                solutions.append(_NoiseController(self.model, task.description, eps))
                flat.append(task)
                groups.append(g)
        old_lp = torch.stack(old)
        return Rollouts(flat, solutions, np.asarray(groups), old_lp, torch.ones_like(old_lp), extra=None)

    def log_probs(self, rollouts) -> torch.Tensor:
        """``log pi(a_t | o_s)`` per executed step, ``s`` the start of ``t``'s chunk."""
        out = torch.zeros(len(rollouts), self.max_steps)
        k = self.model.chunk
        for i, ctrl in enumerate(rollouts.solutions):
            n = len(ctrl.actions)
            rollouts.mask[i, n:] = 0.0
            if n:
                dist = self.model.distribution(ctrl.inputs)  # (chunks, k, 7)
                steps = torch.arange(n)
                mean, std = dist.mean[steps // k, steps % k], dist.stddev[steps // k, steps % k]
                out[i, :n] = torch.distributions.Normal(mean, std).log_prob(torch.stack(ctrl.actions)).sum(-1)
        return out

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

import math
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

    The record (``inputs``, ``actions``) is the episode that last ran the controller: a real
    execution, or an imagined one (``libero-imagination``); whoever runs it writes through
    :meth:`clear_record`, :meth:`record_input`, :meth:`record_action` and
    :meth:`truncate_record`, which keep ``mask_row`` (this rollout's row of
    ``Rollouts.mask``, a view) equal to 1 exactly at the recorded steps.
    """

    def __init__(
        self,
        model: SmallVLA,
        instruction: str,
        eps: torch.Tensor,
        mask_row: torch.Tensor | None = None,
        *,
        temperature: float = 1.0,
        mask_every: int = 1,
    ):
        self.model, self.instruction, self.eps = model, instruction, eps  # eps: (T, 7)
        self.mask_row = torch.zeros(len(eps)) if mask_row is None else mask_row  # (T,)
        self.temperature = temperature  # sigma is multiplied by it when sampling
        self.mask_every = mask_every  # 1: every step is a draw; chunk: one draw per chunk, masked at its start
        self.inputs: list[VLAInput] = []  # one per chunk: the observation it was predicted from
        self.actions: list[torch.Tensor] = []  # one per executed step
        self._planned: torch.Tensor | None = None  # the current chunk (chunk, 7), unclamped

    def clear_record(self) -> None:
        """Forget the recorded episode (a new execution or imagination of this rollout starts)."""
        self.inputs.clear()
        self.actions.clear()
        self.mask_row.zero_()

    def record_input(self, x: VLAInput) -> None:
        """The observation a new chunk is planned from."""
        self.inputs.append(x)

    def record_action(self, a: torch.Tensor) -> None:
        """The next executed (or imagined) action, unclamped; its mask entry is 1 where it carries a
        draw of its own (every step, or the first of each chunk with one draw per chunk)."""
        t = len(self.actions)
        if t % self.mask_every == 0:
            self.mask_row[t] = 1.0
        self.actions.append(a)

    def truncate_record(self, steps: int) -> None:
        """Keep only the first ``steps`` actions and the chunks they were planned in."""
        del self.inputs[-(-steps // self.model.chunk) :], self.actions[steps:]
        self.mask_row[steps:] = 0.0

    def _distribution(self, inputs: list[VLAInput]) -> torch.distributions.Normal:
        return sampling_distribution(self.model.distribution(inputs), self.temperature)

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
            self._planned = self._chunk(self._distribution([x]), 0, t)
            self.record_input(x)
        a = self._planned[t % self.model.chunk]
        self.record_action(a)
        return a.clamp(-1, 1).numpy()[None]

    @torch.no_grad()
    def act_batch(self, obs_list: list[dict], t: int) -> np.ndarray:
        """The chunk each observation would start at step ``t`` (B, chunk, 7), recording nothing
        (the imagination world model's interface; its steps then match real execution when
        its chunk is a multiple of the policy's)."""
        dist = self._distribution([VLAInput.from_obs(o, self.instruction) for o in obs_list])
        out = np.tile(NOOP_ACTION, (len(obs_list), self.model.chunk, 1)).astype(np.float32)
        for row in range(len(obs_list)):
            a = self._chunk(dist, row, t).clamp(-1, 1).numpy() if t < len(self.eps) else out[row, :0]
            out[row, : len(a)] = a
        return out


def sampling_distribution(dist: torch.distributions.Normal, temperature: float) -> torch.distributions.Normal:
    """The policy's Gaussian with its standard deviation multiplied by ``temperature``: what the
    rollouts are sampled from and what their log-probabilities are computed under (1: unchanged)."""
    if temperature == 1.0:
        return dist
    return torch.distributions.Normal(dist.mean, dist.stddev * temperature)


NOISE_MODES = ("step", "chunk")
"""``step``: a new noise draw for every action; ``chunk``: one draw per action chunk, held for its
steps (smoother, lower-dimensional exploration: one log-probability per chunk)."""


_FALLBACK_INSTRUCTION = "put the object in the basket"
"""The probe set's instruction when the policy is built without an environment."""


class SmallVLAPolicy(nn.Module):
    """The small VLA as a WMRL policy (GRPO).

    A solution is a controller (see :class:`_NoiseController`) that executes each predicted
    chunk in full, as ``wmrl-libero eval`` and DAgger do (so the base policy's measured
    success is what GRPO starts from); its ``T`` log-prob entries are its actions
    (``T = max_steps``). ``old_log_probs`` are known at generation (the noise is drawn in
    advance); the mask is 0 at generation and becomes 1 at each step as the episode is run
    (executed by the environment, in this process, or imagined by ``libero-imagination``),
    so it marks the steps of the recorded episode. :meth:`log_probs` and :meth:`entropy`
    change nothing: they may be called any number of times, before or after execution.

    Diagnostics (:meth:`update_metrics`, logged as ``policy/*`` after each update): the
    standard deviation per action dimension, and how far the update moved the chunk means
    on a fixed probe set of ``probe_size`` observations drawn once at construction (seed
    ``probe_seed``) around the model's feature statistics, with the environment's
    instructions.

    :param env: the WMRL environment (its task instructions make the probe set).
    :param checkpoint: a behaviour-cloned checkpoint to start from (else random weights).
    :param max_steps: actions per rollout (the environment's episode limit).
    :param probe_size: observations in the probe set (0: no action-shift metrics).
    :param probe_seed: seed of the probe set.
    :param sigma_scale: multiplies the checkpoint's action standard deviation at construction
        (``log_std += log(sigma_scale)``), e.g. 3 for a positive control that must recover the
        success lost to wider exploration. A resumed run reads its own ``log_std`` back.
    :param noise: ``step`` (a noise draw per action) or ``chunk`` (one draw per action chunk, held
        for its steps; each rollout then has one log-probability per chunk, at the chunk's first step).
    :param temperature: sample with sigma multiplied by this (1: the behaviour-cloning sigma); the
        log-probabilities and entropy are those of the sampling distribution, so the update stays
        on-policy. Evaluate at 1.
    :param log_std_lr: Adam learning rate of ``log_std`` (``None``: ``grpo.lr``, like every other
        weight). At the rates that keep the network's weights stable ``log_std`` moves by ~lr a
        step, so a change of sigma by a factor e takes ~1/lr steps; a separate rate lets the
        exploration width adapt within a run.
    """

    def __init__(
        self,
        env=None,
        *,
        checkpoint: str | None = None,
        max_steps: int = 520,
        probe_size: int = 32,
        probe_seed: int = 0,
        sigma_scale: float = 1.0,
        log_std_lr: float | None = None,
        noise: str = "step",
        temperature: float = 1.0,
        **model_kwargs,
    ):
        super().__init__()
        if noise not in NOISE_MODES:
            raise ValueError(f"noise must be one of {', '.join(NOISE_MODES)}, got {noise!r}")
        if not (math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"temperature must be a positive number (1: the model's own sigma), got {temperature!r}")
        if not (math.isfinite(sigma_scale) and sigma_scale > 0):
            raise ValueError(f"sigma_scale must be a positive number, got {sigma_scale!r}")
        if log_std_lr is not None and not (math.isfinite(log_std_lr) and log_std_lr >= 0):
            raise ValueError(f"log_std_lr must be a non-negative number or null, got {log_std_lr!r}")
        self.model = load_small_vla(checkpoint) if checkpoint else SmallVLA(**model_kwargs)
        if sigma_scale != 1.0:
            with torch.no_grad():
                self.model.log_std.add_(math.log(sigma_scale))
        self.max_steps = max_steps
        self.log_std_lr = log_std_lr
        self.noise, self.temperature = noise, float(temperature)
        self._probes = _probe_set(self.model, _instructions(env), probe_size, probe_seed)
        self._probe_start = self._probe_means()  # the weights training starts from (also after a resume)
        self._probe_before: torch.Tensor | None = None  # the weights that sampled the current step

    @torch.no_grad()
    def _probe_means(self) -> torch.Tensor | None:
        """The chunk means on the probe set, (P, chunk, 7); ``None`` without probes."""
        return self.model.distribution(self._probes).mean.clone() if self._probes else None

    def _sigma(self) -> torch.Tensor:
        return self.model.log_std.clamp(-5, 1).exp()

    def optimizer_param_groups(self, lr: float) -> list[dict]:
        """Adam's parameter groups: the network at ``lr``, ``log_std`` at ``log_std_lr`` when set."""
        if self.log_std_lr is None:
            return [{"params": [p for p in self.parameters() if p.requires_grad], "lr": lr}]
        log_std = self.model.log_std
        rest = [p for p in self.parameters() if p.requires_grad and p is not log_std]
        return [{"params": rest, "lr": lr}, {"params": [log_std], "lr": self.log_std_lr}]

    @torch.no_grad()
    def generate(self, tasks, group_size: int):
        from wmrl_core.types import Rollouts

        self._probe_before = self._probe_means()
        flat = [task for task in tasks for _ in range(group_size)]
        k, steps = self.model.chunk, self.max_steps
        if self.noise == "step":
            eps = [torch.randn(steps, 7) for _ in flat]  # one draw per rollout, in order; each its own tensor
        else:  # one draw per chunk, held for the chunk's steps
            eps = [torch.randn(-(-steps // k), 7).repeat_interleave(k, 0)[:steps] for _ in flat]
        sigma = self._sigma() if self.temperature == 1.0 else self._sigma() * self.temperature
        old_lp = torch.distributions.Normal(0.0, 1.0).log_prob(torch.stack(eps)).sum(-1) - sigma.log().sum()
        every = 1 if self.noise == "step" else k
        if every > 1:
            old_lp = old_lp * self._draw_steps(steps)
        mask = torch.zeros(len(flat), steps)  # 1 at each step (chunk start) as it is executed or imagined
        solutions = [
            _NoiseController(
                self.model, task.description, eps[i], mask[i], temperature=self.temperature, mask_every=every
            )
            for i, task in enumerate(flat)
        ]
        return Rollouts(flat, solutions, np.repeat(np.arange(len(tasks)), group_size), old_lp, mask, extra=None)

    def _draw_steps(self, n: int) -> torch.Tensor:
        """1.0 at the steps that carry a noise draw of their own (chunk starts), 0.0 elsewhere."""
        return (torch.arange(n) % self.model.chunk == 0).float()

    def log_probs(self, rollouts) -> torch.Tensor:
        """``log pi(a_t | o_s)`` per recorded step, ``s`` the start of ``t``'s chunk (with
        ``noise="chunk"``: at each chunk's first step only, the density of its one draw); 0 at the
        steps not recorded (mask 0). Reads ``rollouts``, writes nothing."""
        out = torch.zeros(len(rollouts), self.max_steps)
        k = self.model.chunk
        for i, ctrl in enumerate(rollouts.solutions):
            n = len(ctrl.actions)
            if n:
                dist = sampling_distribution(self.model.distribution(ctrl.inputs), self.temperature)  # (chunks, k, 7)
                steps = torch.arange(n)
                mean, std = dist.mean[steps // k, steps % k], dist.stddev[steps // k, steps % k]
                lp = torch.distributions.Normal(mean, std).log_prob(torch.stack(ctrl.actions)).sum(-1)
                out[i, :n] = lp if self.noise == "step" else lp * self._draw_steps(n)
        return out

    def entropy(self, rollouts) -> torch.Tensor:
        """(N, T) exact entropy in nats of each step's Gaussian, summed over the 7 action
        dimensions: ``sum_d 0.5 log(2 pi e sigma_d^2)``. sigma does not depend on the
        observation, so every step has the same value (the engine masks the unrecorded ones)."""
        per_step = (0.5 * math.log(2 * math.pi * math.e) + self.model.log_std.clamp(-5, 1)).sum()
        if self.temperature != 1.0:
            per_step = per_step + 7 * math.log(self.temperature)
        return per_step.expand(len(rollouts), self.max_steps)

    @torch.no_grad()
    def update_metrics(self, rollouts, old_log_probs: torch.Tensor, new_log_probs: torch.Tensor) -> dict[str, float]:
        """After the step's update (the engine logs each as ``policy/<name>``): ``sigma_mean`` and
        ``sigma/<d>`` (the standard deviation of action dimension d = 0..6: xyz, rotation,
        gripper), ``action_shift`` (mean absolute change of the chunk means on the probe set
        made by this step's update, in action units) and ``action_shift_from_start`` (since the
        weights training started from)."""
        sigma = self._sigma()
        out = {"sigma_mean": float(sigma.mean()), **{f"sigma/{d}": float(s) for d, s in enumerate(sigma)}}
        now = self._probe_means()
        if now is not None:
            before = self._probe_before
            out["action_shift"] = float((now - before).abs().mean()) if before is not None else math.nan
            out["action_shift_from_start"] = float((now - self._probe_start).abs().mean())
        return out


def _instructions(env) -> list[str]:
    """The environment's task instructions (its train split), in order, each once."""
    tasks = getattr(env, "tasks", None)
    if not callable(tasks):
        return [_FALLBACK_INSTRUCTION]
    return list(dict.fromkeys(t.description for t in tasks("train"))) or [_FALLBACK_INSTRUCTION]


def _probe_set(model: SmallVLA, instructions: list[str], size: int, seed: int) -> list[VLAInput]:
    """``size`` fixed observations: features ``feat_mean + feat_std * z``, z ~ N(0, I) (features
    constant in the behaviour-cloning data held at their value), random images when the model
    reads images, the instructions in turn."""
    gen = torch.Generator().manual_seed(seed)
    std = model.feat_std * (model.feat_std > 1e-3)
    state = (model.feat_mean + std * torch.randn(size, len(std), generator=gen)).numpy().astype(np.float32)
    probes = []
    for j in range(size):
        images = None
        if model.image_size:
            side = model.image_size
            pixels = torch.randint(0, 256, (2, side, side, 3), generator=gen, dtype=torch.uint8).numpy()
            images = {"agentview_image": pixels[0], "wrist_image": pixels[1]}
        probes.append(VLAInput(instructions[j % len(instructions)], state[j, :16], state[j, 16:], images))
    return probes

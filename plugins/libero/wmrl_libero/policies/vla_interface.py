"""The VLA interface: image(s) + instruction + proprioception -> a distribution over action chunks.

Every embodied policy of this plugin implements :class:`VLA`; the WMRL policy wrapper, the
closed-loop controllers and behaviour cloning are written against it only. Log-probs are
per action (summed over the 7 dimensions), shape ``(B, k)`` for ``k``-step chunks, which is
what GRPO needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

__all__ = ["VLAInput", "VLA", "batch_inputs"]


@dataclass
class VLAInput:
    """One observation for a VLA.

    :param instruction: the task's language instruction.
    :param proprio: (16,) eef pos, eef quat (xyzw), gripper qpos, joint angles.
    :param object_state: LIBERO's object-state vector (physics features), or None.
    :param images: camera name -> (H, W, 3) uint8, possibly empty (physics-only policies).
    """

    instruction: str
    proprio: np.ndarray
    object_state: np.ndarray | None = None
    images: dict[str, np.ndarray] | None = None

    @classmethod
    def from_obs(cls, obs: dict[str, np.ndarray], instruction: str) -> VLAInput:
        images = {k: v for k, v in obs.items() if k.endswith("_image")}
        return cls(instruction, obs["proprio"], obs.get("object_state"), images)


class VLA(Protocol):
    chunk: int  # actions per chunk

    def distribution(self, inputs: list[VLAInput]) -> torch.distributions.Distribution:
        """Distribution over action chunks, event shape (k, 7) or discrete tokens."""

    def sample(self, inputs: list[VLAInput], *, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions (B, k, 7) in [-1, 1], log-probs (B, k))."""

    def log_prob(self, inputs: list[VLAInput], actions: torch.Tensor) -> torch.Tensor:
        """Differentiable log-probs (B, k) of given chunks (B, k, 7)."""


def batch_inputs(inputs: list[VLAInput], object_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(proprio (B, 16), object_state (B, object_dim)): zero-padded or cut to object_dim."""
    proprio = torch.as_tensor(np.stack([i.proprio for i in inputs]), dtype=torch.float32)
    objs = torch.zeros(len(inputs), object_dim)
    for row, i in enumerate(inputs):
        if i.object_state is not None:
            v = torch.as_tensor(i.object_state[:object_dim], dtype=torch.float32)
            objs[row, : len(v)] = v
    return proprio, objs

"""Swing a microwave door shut (``Close`` of LIBERO's ``microwave``): not scripted yet."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from wmrl_libero.expert.motion import OPEN, Hand, move_hand

__all__ = ["CloseDoor"]


@dataclass
class CloseDoor:
    microwave: str
    finished: bool = field(default=False, init=False)

    phase = "todo"

    def act(self, hand: Hand, state: dict[str, np.ndarray]) -> np.ndarray:
        self.finished = True
        return move_hand(hand, hand.pos, hand.yaw, OPEN)

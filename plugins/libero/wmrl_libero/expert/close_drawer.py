"""Push a drawer shut (``Close`` of a cabinet drawer region, e.g. ``white_cabinet_1_bottom_region``).

LIBERO's ``white_cabinet`` drawers slide along the cabinet's y axis (open towards -y; range
-0.16 to 0.01 m); a drawer counts as closed when its slide joint is above 0. The hand, its
fingers closed into a paddle, goes down in front of the drawer's handle and pushes along
+y until the joint passes ``CLOSED_M``, then backs off and rises.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

from wmrl_libero.expert.motion import CLOSE, Hand, move_hand, yaw_of

__all__ = ["CloseDrawer"]

CLOSED_M = 0.003  # push until the slide joint passes this (LIBERO: closed above 0)
# Where the fingertips push, relative to the cabinet origin with the drawer shut, cabinet
# frame: on the handle (y -0.109), low on the drawer front (each drawer is 7 cm tall: the
# bottom one from z 0.010 to 0.079) so that the palm, about 5 cm above the fingertips,
# passes under the front of the drawer above.
FRONT_AT_CLOSED_M = {"bottom": np.array([0.0, -0.109, 0.025]), "middle": np.array([0.0, -0.109, 0.095]),
                     "top": np.array([0.0, -0.109, 0.165])}
STANDOFF_M = 0.04  # the hand comes down this far in front of the handle
ABOVE_M = 0.12  # and starts this far above it
OVERSHOOT_M = 0.02  # the push aims this far past the closed position
TIMEOUT = {"approach": 80, "descend": 40, "push": 120, "back_off": 20}


@dataclass
class CloseDrawer:
    """Close the drawer of region ``region`` (``<cabinet>_<level>_region``) of ``cabinet``."""

    region: str
    cabinet: str
    finished: bool = field(default=False, init=False)

    def __post_init__(self):
        self._phase, self._t = "approach", 0
        level = next((k for k in FRONT_AT_CLOSED_M if f"_{k}_" in self.region), "bottom")
        self._front = FRONT_AT_CLOSED_M[level]

    def __eq__(self, other):
        return isinstance(other, CloseDrawer) and self.region == other.region

    @property
    def phase(self) -> str:
        return self._phase

    def _goto(self, phase: str) -> None:
        self._phase, self._t = phase, 0

    def satisfied(self, state: dict[str, np.ndarray]) -> bool:
        return float(state[f"{self.region}/joints"][0]) > 0.0

    def act(self, hand: Hand, state: dict[str, np.ndarray]) -> np.ndarray:
        cabinet = state[self.cabinet]
        turn = Rotation.from_euler("z", yaw_of(cabinet))
        slide = float(state[f"{self.region}/joints"][0])
        handle = cabinet[:3] + turn.apply(self._front + [0, slide, 0])
        outward = turn.apply([0.0, -1.0, 0.0])  # the direction the drawer opens
        # fingers close across the push direction: the hand's long side (20 cm along the
        # closing axis) then runs along the drawer front instead of into the cabinet
        yaw = yaw_of(cabinet) + np.pi / 2
        self._t += 1
        ph, t = self._phase, self._t
        if ph == "approach":
            if t == 1 and self.satisfied(state):
                self.finished = True
            goal = handle + STANDOFF_M * outward + [0, 0, ABOVE_M]
            if np.linalg.norm(goal - hand.pos) < 0.02 or t > TIMEOUT[ph]:
                self._goto("descend")
            return move_hand(hand, goal, yaw, CLOSE)
        if ph == "descend":
            goal = handle + STANDOFF_M * outward
            if np.linalg.norm(goal - hand.pos) < 0.015 or t > TIMEOUT[ph]:
                self._goto("push")
            return move_hand(hand, goal, yaw, CLOSE)
        if ph == "push":
            if slide > CLOSED_M or t > TIMEOUT[ph]:
                self._goto("back_off")
            closed_handle = cabinet[:3] + turn.apply(self._front)
            goal = closed_handle - OVERSHOOT_M * outward
            goal[2] = handle[2]
            return move_hand(hand, goal, yaw, CLOSE)
        goal = handle + 2 * STANDOFF_M * outward + [0, 0, ABOVE_M]
        if np.linalg.norm(goal - hand.pos) < 0.03 or t > TIMEOUT["back_off"]:
            self.finished = self.satisfied(state) or self.finished
            self._goto("approach")
        return move_hand(hand, goal, yaw, CLOSE)

"""Push a drawer shut (``Close`` of a cabinet drawer region, e.g. ``white_cabinet_1_bottom_region``).

LIBERO's ``white_cabinet`` drawers slide along the cabinet's y axis (open towards -y; range
-0.16 to 0.01 m); a drawer counts as closed when its slide joint is above 0. The hand, its
fingers closed into a paddle, comes down in front of the drawer's front panel beside the
handle and pushes it along +y until the joint passes ``CLOSED_M``, then backs off and
rises. The fingers lean forward (``LEAN_RAD``) so that the palm, which sits about 5 cm
above the fingertips, trails behind them and passes under the front of the drawer above.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

from wmrl_libero.expert.motion import CLOSE, Hand, PhasedSkill, move_hand, yaw_of

__all__ = ["CloseDrawer"]

CLOSED_M = 0.003  # push until the slide joint passes this (LIBERO: closed above 0)
# Push point on the drawer's front panel, cabinet frame, drawer shut (measured: the panel's
# outer face is at y -0.071, each drawer is 7 cm tall, the bottom one from z 0.010; its
# handle spans x -0.048..0.041 and sticks out 3 cm, so the push goes 7 cm to its side).
PUSH_POINT_M = {
    "bottom": np.array([0.07, -0.071, 0.035]),
    "middle": np.array([0.07, -0.071, 0.105]),
    "top": np.array([0.07, -0.071, 0.175]),
}
FINGER_RADIUS_M = 0.012  # grip site to the fingertips' front surface
STANDOFF_M = 0.05  # the hand comes down this far in front of the panel
ABOVE_M = 0.10  # starting this far above the push point
OVERSHOOT_M = 0.03  # the push aims this far past the closed position (the joint stops it)
LEAN_RAD = 0.7  # fingers lean 40 degrees towards the cabinet
TIMEOUT = {"approach": 80, "descend": 40, "push": 100, "back_off": 20}


@dataclass
class CloseDrawer(PhasedSkill):
    """Close the drawer of region ``region`` (``<cabinet>_<level>_region``) of ``cabinet``."""

    region: str
    cabinet: str
    max_attempts: int = 2
    finished: bool = field(default=False, init=False)

    def __post_init__(self):
        self._phase, self._t, self._attempt = "approach", 0, 0
        level = next((k for k in PUSH_POINT_M if f"_{k}_" in self.region), "bottom")
        self._push_point = PUSH_POINT_M[level]

    def __eq__(self, other):
        return isinstance(other, CloseDrawer) and self.region == other.region

    def satisfied(self, state: dict[str, np.ndarray]) -> bool:
        return float(state[f"{self.region}/joints"][0]) > 0.0

    def act(self, hand: Hand, state: dict[str, np.ndarray]) -> np.ndarray:
        cabinet = state[self.cabinet]
        turn = Rotation.from_euler("z", yaw_of(cabinet))
        slide = float(state[f"{self.region}/joints"][0])
        closed_panel = cabinet[:3] + turn.apply(self._push_point)
        inward = turn.apply([0.0, 1.0, 0.0])  # the direction the drawer closes
        panel = closed_panel + slide * inward  # slide < 0 while open
        # fingers close across the push: the hand's long side (20 cm along the closing axis)
        # then runs along the drawer front instead of into the cabinet
        yaw = yaw_of(cabinet) + np.pi / 2
        self._t += 1
        ph, t = self._phase, self._t

        def move(goal):
            return move_hand(hand, goal, yaw, CLOSE, lean=inward, lean_rad=LEAN_RAD)

        if ph == "approach":
            if t == 1 and self.satisfied(state):
                self.finished = True
            goal = panel - STANDOFF_M * inward + [0, 0, ABOVE_M]
            if np.linalg.norm(goal - hand.pos) < 0.02 or t > TIMEOUT[ph]:
                self._goto("descend")
            return move(goal)
        if ph == "descend":
            goal = panel - STANDOFF_M * inward
            if np.linalg.norm(goal - hand.pos) < 0.015 or t > TIMEOUT[ph]:
                self._goto("push")
            return move(goal)
        if ph == "push":
            if slide > CLOSED_M or t > TIMEOUT[ph]:
                self._goto("back_off")
            return move(closed_panel + (OVERSHOOT_M - FINGER_RADIUS_M) * inward)
        goal = panel - STANDOFF_M * inward + [0, 0, ABOVE_M]
        if np.linalg.norm(goal - hand.pos) < 0.03 or t > TIMEOUT["back_off"]:
            if self.satisfied(state) or self._attempt >= self.max_attempts:
                self.finished = True
            self._attempt += 1
            self._goto("approach")
        return move(goal)

"""Swing a hinged door shut (``Close microwave_1``).

LIBERO's ``microwave`` door turns about a vertical hinge at the front left corner of the
cavity (microwave frame x -0.1725, y -0.088); its angle runs from -2.094 (wide open, the
door pointing towards the robot) to 0 (shut), and the microwave counts as closed above
-0.005 rad. The hand comes over the door, down on its outer side, and pushes the outer face
``PUSH_RADIUS_M`` from the hinge, always aiming ``LEAD_RAD`` further round the arc than
where the door is: the door swings shut ahead of it and stops at its limit. As in
:mod:`~wmrl_libero.expert.close_drawer`, the fingers are closed into a paddle across the push
(the hand's long side along the door) and lean into it, so the palm trails behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

from wmrl_libero.expert.motion import CLOSE, Hand, PhasedSkill, move_hand, yaw_of

__all__ = ["SwingDoorShut"]

CLOSED_RAD = -0.005  # LIBERO's microwave: closed above this
# Door (``microwave.xml``): hinge point in the microwave frame, and in the door's own frame
# (x along the door from the hinge) the outer face and the height of its middle.
HINGE_M = np.array([-0.1725, -0.088])
OUTER_FACE_Y = -0.025
DOOR_MID_Z = 0.096
DOOR_TOP_Z = 0.1885
# Pushed 11 cm from the hinge: the 20 cm long hand then ends 1.5 cm short of the door's
# handle (a bar at 23.75 cm sticking out 4 cm).
PUSH_RADIUS_M = 0.11
FINGER_RADIUS_M = 0.012  # grip site to the paddle's front surface
STANDOFF_M = 0.05  # the hand comes down this far outside the door
LEAD_RAD = 0.3  # the hand aims this far round the arc ahead of the door
OVERCLOSE_RAD = 0.1  # ... up to this past shut (the limit stops the door; the hand presses it)
TRAVEL_ABOVE_M = 0.08  # crosses over the door this far above its top
LEAN_RAD = 0.7  # fingers lean 40 degrees towards the door
TIMEOUT = {"rise": 30, "approach": 80, "descend": 40, "sweep": 120, "back_off": 30}


@dataclass
class SwingDoorShut(PhasedSkill):
    """Close ``fixture``'s hinged door (privileged ``<fixture>`` pose and ``<fixture>/joints``)."""

    fixture: str
    max_attempts: int = 2
    finished: bool = field(default=False, init=False)

    def __post_init__(self):
        self._phase, self._t, self._attempt = "rise", 0, 0

    def __eq__(self, other):
        return isinstance(other, SwingDoorShut) and self.fixture == other.fixture

    def satisfied(self, state: dict[str, np.ndarray]) -> bool:
        return float(state[f"{self.fixture}/joints"][0]) > CLOSED_RAD

    def act(self, hand: Hand, state: dict[str, np.ndarray]) -> np.ndarray:
        pose = state[self.fixture]
        yaw0 = yaw_of(pose)
        turn = Rotation.from_euler("z", yaw0)
        angle = float(state[f"{self.fixture}/joints"][0])

        def on_door(door_angle: float, along: float, across: float, z: float) -> np.ndarray:
            """World point ``along`` the door from the hinge, ``across`` it (door frame y)."""
            c, s = np.cos(door_angle), np.sin(door_angle)
            local = [HINGE_M[0] + c * along - s * across, HINGE_M[1] + s * along + c * across, z]
            return pose[:3] + turn.apply(local)

        push_dir = turn.apply([-np.sin(angle), np.cos(angle), 0.0])  # the door's inward normal
        yaw = yaw0 + angle - np.pi / 2  # fingers close along the door
        outside = on_door(angle, PUSH_RADIUS_M, OUTER_FACE_Y - FINGER_RADIUS_M - STANDOFF_M, DOOR_MID_Z)
        travel_z = pose[2] + DOOR_TOP_Z + TRAVEL_ABOVE_M
        self._t += 1
        ph, t = self._phase, self._t

        def move(goal):
            return move_hand(hand, goal, yaw, CLOSE, lean=push_dir, lean_rad=LEAN_RAD)

        if ph == "rise":
            if t == 1 and self.satisfied(state):
                self.finished = True
            goal = np.array([hand.pos[0], hand.pos[1], travel_z])
            if hand.pos[2] > travel_z - 0.02 or t > TIMEOUT[ph]:
                self._goto("approach")
            return move(goal)
        if ph == "approach":
            goal = np.array([outside[0], outside[1], travel_z])
            if np.linalg.norm(goal - hand.pos) < 0.02 or t > TIMEOUT[ph]:
                self._goto("descend")
            return move(goal)
        if ph == "descend":
            if np.linalg.norm(outside - hand.pos) < 0.015 or t > TIMEOUT[ph]:
                self._goto("sweep")
            return move(outside)
        if ph == "sweep":
            if self.satisfied(state) or t > TIMEOUT[ph]:
                self._goto("back_off")
            lead = min(angle + LEAD_RAD, OVERCLOSE_RAD)
            return move(on_door(lead, PUSH_RADIUS_M, OUTER_FACE_Y - FINGER_RADIUS_M, DOOR_MID_Z))
        # back off: away from the door and up
        goal = outside + [0, 0, TRAVEL_ABOVE_M]
        if np.linalg.norm(goal - hand.pos) < 0.03 or t > TIMEOUT["back_off"]:
            if self.satisfied(state) or self._attempt >= self.max_attempts:
                self.finished = True
            self._attempt += 1
            self._goto("rise")
        return move(goal)

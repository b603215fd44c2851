"""Swing a hinged door shut (``Close microwave_1``).

LIBERO's ``microwave`` door turns about a vertical hinge at the front left corner of the
cavity (microwave frame x -0.1725, y -0.088); its angle runs from -2.094 (wide open, the
door pointing towards the robot) to 0 (shut), and the microwave counts as closed above
-0.005 rad. The hand comes over the door and down on its outer side, its fingers closed
into a paddle across the push (the hand's long side along the door) and reaching
``OVERLAP_M`` down over the door's top edge while the hand itself stays above it (so
neither the palm nor the door's handle gets in the way). It pushes the outer face
``PUSH_RADIUS_M`` from the hinge, always aiming ``LEAD_RAD`` further round the arc than
where the door is: the door swings shut ahead of the fingers and stops at its limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

from wmrl_libero.expert.motion import CLOSE, Hand, PhasedSkill, move_hand, wrist_safe_yaw, yaw_of

__all__ = ["DOOR_LENGTH_M", "HINGE_M", "SwingDoorShut"]

CLOSED_RAD = -0.005  # LIBERO's microwave: closed above this
# Door (``microwave.xml``): hinge point in the microwave frame; in the door's own frame
# (x along the door from the hinge) its outer face, and the height of its top edge.
HINGE_M = np.array([-0.1725, -0.088])
DOOR_LENGTH_M = 0.259
OUTER_FACE_Y = -0.025
DOOR_TOP_Z = 0.1885
# Pushed 18 cm from the hinge (the door is 26 cm long; its handle, at 23.75 cm, ends 1.7 cm
# below the fingertips anyway).
PUSH_RADIUS_M = 0.18
# The grip site this far below the door's top: the fingertips (1 cm below the grip site)
# overlap the door by 3 cm, the hand (from 3 cm above it) clears it by 1 cm.
OVERLAP_M = 0.02
FINGER_RADIUS_M = 0.012  # grip site to the paddle's front surface
STANDOFF_M = 0.05  # the hand comes down this far outside the door
LEAD_RAD = 0.25  # the hand aims this far round the arc ahead of the door
OVERCLOSE_RAD = 0.1  # ... up to this past shut (the limit stops the door; the hand presses it)
TRAVEL_ABOVE_M = 0.08  # crosses over the door with the grip site this far above its top
TIMEOUT = {"rise": 30, "approach": 80, "descend": 40, "sweep": 120, "back_off": 30}


@dataclass
class SwingDoorShut(PhasedSkill):
    """Close ``fixture``'s hinged door (privileged ``<fixture>`` pose and ``<fixture>/joints``)."""

    fixture: str
    max_attempts: int = 2
    finished: bool = field(default=False, init=False)

    def __post_init__(self):
        self._phase, self._t, self._attempt = "rise", 0, 0
        self._yaw_offset = 0.0

    def __eq__(self, other):
        return isinstance(other, SwingDoorShut) and self.fixture == other.fixture

    def satisfied(self, state: dict[str, np.ndarray]) -> bool:
        return float(state[f"{self.fixture}/joints"][0]) > CLOSED_RAD

    def act(self, hand: Hand, state: dict[str, np.ndarray]) -> np.ndarray:
        pose = state[self.fixture]
        turn = Rotation.from_euler("z", yaw_of(pose))
        angle = float(state[f"{self.fixture}/joints"][0])

        def on_door(door_angle: float, across: float, z: float) -> np.ndarray:
            """World point ``PUSH_RADIUS_M`` along the door from the hinge, ``across`` it."""
            c, s = np.cos(door_angle), np.sin(door_angle)
            along = PUSH_RADIUS_M
            return pose[:3] + turn.apply([HINGE_M[0] + c * along - s * across, HINGE_M[1] + s * along + c * across, z])

        push_z = DOOR_TOP_Z - OVERLAP_M
        outside = on_door(angle, OUTER_FACE_Y - FINGER_RADIUS_M - STANDOFF_M, push_z)
        travel_z = pose[2] + DOOR_TOP_Z + TRAVEL_ABOVE_M
        door_yaw = yaw_of(pose) + angle - np.pi / 2  # fingers close along the door
        self._t += 1
        ph, t = self._phase, self._t
        if ph == "approach" and t == 1:  # which way round the wrist turns, for the whole sweep
            self._yaw_offset = wrist_safe_yaw(hand, door_yaw, turn_after=-angle) - door_yaw

        def move(goal):
            return move_hand(hand, goal, door_yaw + self._yaw_offset, CLOSE, fold=False)

        if ph == "rise":
            if t == 1 and self.satisfied(state):
                self.finished = True
            goal = np.array([hand.pos[0], hand.pos[1], travel_z])
            if hand.pos[2] > travel_z - 0.02 or t > TIMEOUT[ph]:
                self._goto("approach")
            # straight up, not turning yet (turning next to the microwave swings the arm into the door)
            return move_hand(hand, goal, hand.yaw, CLOSE)
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
            return move(on_door(min(angle + LEAD_RAD, OVERCLOSE_RAD), OUTER_FACE_Y - FINGER_RADIUS_M, push_z))
        # back off: away from the door and up
        goal = np.array([outside[0], outside[1], travel_z])
        if np.linalg.norm(goal - hand.pos) < 0.03 or t > TIMEOUT["back_off"]:
            if self.satisfied(state) or self._attempt >= self.max_attempts:
                self.finished = True
            self._attempt += 1
            self._goto("rise")
        return move(goal)

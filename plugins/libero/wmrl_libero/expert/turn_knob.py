"""Turn a stove knob on (``Turnon`` goal predicate of LIBERO's ``flat_stove``).

The knob is a hinge about world z at the stove's origin; LIBERO counts the stove as on when
the hinge angle is at least 0.5 rad (range -0.005 to 2.1). On top of the knob is a ridge
9 cm long and 2.4 cm thick, along the stove's x axis at angle 0. The hand grasps the
ridge across its thickness and turns itself anticlockwise (seen from above) until the
hinge passes ``TARGET_ANGLE_RAD``, then lets go and rises.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from wmrl_libero.expert.motion import (
    CLOSE,
    OPEN,
    Hand,
    PhasedSkill,
    move_hand,
    wrap_half_turn,
    yaw_of,
)

__all__ = ["TurnKnob"]

ON_ANGLE_RAD = 0.5  # LIBERO's flat_stove turn-on threshold
TARGET_ANGLE_RAD = 0.9  # turn past the threshold with margin (the knob springs back a little)
RIDGE_POINT_M = np.array([-0.005, 0.0, 0.03])  # grip point on the ridge, knob frame at angle 0
APPROACH_HEIGHT_M = 0.10
RETREAT_HEIGHT_M = 0.15
TURN_STEP_RAD = 0.25  # yaw the hand leads the knob by while turning (about 0.5 action units)
TIMEOUT = {"approach": 80, "descend": 40, "grasp": 10, "turn": 80, "release": 8, "retreat": 30}


@dataclass
class TurnKnob(PhasedSkill):
    """Turn ``fixture``'s knob (privileged ``<fixture>`` pose and ``<fixture>/joints``) on."""

    fixture: str
    max_attempts: int = 2
    finished: bool = field(default=False, init=False)

    def __post_init__(self):
        self._phase, self._t, self._attempt = "approach", 0, 0

    def __eq__(self, other):
        return isinstance(other, TurnKnob) and self.fixture == other.fixture

    def satisfied(self, state: dict[str, np.ndarray]) -> bool:
        return float(state[f"{self.fixture}/joints"][0]) >= ON_ANGLE_RAD

    def act(self, hand: Hand, state: dict[str, np.ndarray]) -> np.ndarray:
        pose = state[self.fixture]
        angle = float(state[f"{self.fixture}/joints"][0])
        knob_yaw = yaw_of(pose) + angle
        c, s = np.cos(knob_yaw), np.sin(knob_yaw)
        grip = pose[:3] + [
            c * RIDGE_POINT_M[0] - s * RIDGE_POINT_M[1],
            s * RIDGE_POINT_M[0] + c * RIDGE_POINT_M[1],
            RIDGE_POINT_M[2],
        ]
        # fingers (gripper y) across the ridge: the ridge runs along knob x, so yaw = knob yaw
        yaw = wrap_half_turn(knob_yaw)
        self._t += 1
        ph, t = self._phase, self._t
        if ph == "approach":
            if t == 1 and self.satisfied(state):
                self.finished = True
            goal = grip + [0, 0, APPROACH_HEIGHT_M]
            if (np.linalg.norm((goal - hand.pos)[:2]) < 0.008 and abs(goal[2] - hand.pos[2]) < 0.02) or t > TIMEOUT[ph]:
                self._goto("descend")
            return move_hand(hand, goal, yaw, OPEN)
        if ph == "descend":
            if np.linalg.norm(grip - hand.pos) < 0.008 or t > TIMEOUT[ph]:
                self._goto("grasp")
            return move_hand(hand, grip, yaw, OPEN)
        if ph == "grasp":
            if t > TIMEOUT[ph]:
                self._goto("turn")
            return move_hand(hand, grip, yaw, CLOSE)
        if ph == "turn":
            if angle >= TARGET_ANGLE_RAD or t > TIMEOUT[ph]:
                self._goto("release")
            # lead the knob: the hand's yaw is kept a little ahead of the ridge
            return move_hand(hand, grip, hand.yaw + TURN_STEP_RAD, CLOSE)
        if ph == "release":
            if t > TIMEOUT[ph]:
                self._goto("retreat")
            return move_hand(hand, hand.pos, hand.yaw, OPEN)
        goal = np.array([hand.pos[0], hand.pos[1], pose[2] + RETREAT_HEIGHT_M])
        if hand.pos[2] > goal[2] - 0.02 or t > TIMEOUT["retreat"]:
            if self.satisfied(state) or self._attempt >= self.max_attempts:
                self.finished = True
            else:
                self._attempt += 1
            self._goto("approach")
        return move_hand(hand, goal, hand.yaw, OPEN)

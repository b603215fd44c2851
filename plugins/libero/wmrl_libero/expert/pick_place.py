"""Pick an object and put it on or in a target (``On`` / ``In`` goal predicates).

Phases: approach (above the grasp point), descend, grasp, lift, carry (at a safe height,
steering the *object* over the target), lower, release, retreat. A grasp that closed on
nothing, an object that stayed behind on the lift, or one dropped on the way sends the hand
back up to try again (at most ``max_attempts`` retries). The phase is re-read from the
scene where it matters, so the skill also takes over from states it did not drive (a
student policy's): an object already held is carried, an object already in place is left.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from wmrl_libero.expert.grasps import (
    MAX_HELD_GAP_M,
    carry_speed,
    grasp_for,
    placement_point,
)
from wmrl_libero.expert.motion import (
    CLOSE,
    OPEN,
    Hand,
    PhasedSkill,
    move_hand,
    wrap_half_turn,
    yaw_of,
)

__all__ = ["PickPlace"]

APPROACH_HEIGHT_M = 0.12  # the hand first goes this far above the grasp point, then straight down
TRAVEL_XY_M = 0.03  # farther than this from above the grasp point, the hand travels at carry height
CARRY_CLEARANCE_M = 0.18  # carry height above the higher of object and target
RELEASE_HEIGHT_M = {"in": 0.06, "on": 0.03}  # object origin above the target when it is let go
LIFTED_M = 0.05  # the object rose this much with the hand: the grasp holds
DROPPED_M = 0.15  # object this far from the hand while carried: it fell
HELD_RADIUS_M = 0.12  # an object this close to closed fingers counts as held
TAKEOVER_GAP_M = 0.06  # fingers this closed when a skill starts: they hold its object (open: 0.072+)
AT_TARGET_XY_M = 0.012  # carry ends when the object is this close above the target
PLACED_XY_M = 0.04  # an object resting this close to its target needs no more work
ALIGNED_RAD = 0.05  # with ``align_with``, lowering waits until the yaws agree this well
# Phase time limits in control steps (20 Hz): a phase that has not converged moves on.
TIMEOUT = {
    "approach": 80,
    "descend": 40,
    "grasp": 12,
    "lift": 60,
    "carry": 120,
    "lower": 80,
    "release": 10,
    "retreat": 40,
}


@dataclass
class PickPlace(PhasedSkill):
    """Move ``obj`` onto/into ``target`` (an object or a region site).

    :param place_offset: world offset (m) from the target's origin where the object goes
        (spreads several objects over one region).
    :param align_with: while carried, the object is turned until its yaw matches this
        object's (modulo a half turn): a book going into a caddy compartment.
    """

    obj: str
    target: str
    relation: str  # "in" or "on"
    place_offset: np.ndarray = field(default_factory=lambda: np.zeros(3))
    align_with: str | None = None
    max_attempts: int = 2
    finished: bool = field(default=False, init=False)

    def __post_init__(self):
        self.place_offset = np.asarray(self.place_offset, dtype=np.float64)
        self._phase, self._t = "approach", 0
        self._attempt = 0
        self._grasp = None
        self._grip_offset = np.zeros(3)  # hand minus object while held
        self._carry_z = 0.0
        self._grasp_obj_z = 0.0
        self._last_z = None
        self._rest_z = np.inf  # lowest height the object was seen at: where it rests

    def __eq__(self, other):  # plans compare by what they do, not by progress
        return isinstance(other, PickPlace) and (self.obj, self.target, self.relation) == (
            other.obj,
            other.target,
            other.relation,
        )

    def _placed(self, hand: Hand, obj: np.ndarray, target: np.ndarray) -> bool:
        near = np.linalg.norm(obj[:2] - target[:2]) < PLACED_XY_M and abs(obj[2] - target[2]) < 0.12
        return near and not self._held(hand, obj)

    @staticmethod
    def _held(hand: Hand, obj: np.ndarray) -> bool:
        return 0.004 < hand.finger_gap < MAX_HELD_GAP_M and np.linalg.norm(hand.pos - obj) < HELD_RADIUS_M

    def act(self, hand: Hand, state: dict[str, np.ndarray]) -> np.ndarray:
        obj = state[self.obj][:3]
        target = state[self.target][:3] + self.place_offset
        self._t += 1
        ph, t = self._phase, self._t
        first_sight = self._rest_z == np.inf
        self._rest_z = min(self._rest_z, obj[2])
        if ph == "approach" and t == 1:
            if self._placed(hand, obj, target):  # already there (a student put it there)
                self.finished = True
                return move_hand(hand, hand.pos + [0, 0, 0.05], hand.yaw, OPEN)
            self._grasp = grasp_for(self.obj, state, self._attempt)
            # the hand holds the object this far above its origin: a book hangs 9 cm below it
            self._carry_z = max(obj[2], target[2]) + CARRY_CLEARANCE_M + max(self._grasp.offset[2], 0.0)
        # taking over an object already held: seen rising off its support, or, when the skill
        # starts on a student's state, already in clearly closed fingers
        lifted = obj[2] > self._rest_z + LIFTED_M or (first_sight and hand.finger_gap < TAKEOVER_GAP_M)
        if ph in ("approach", "descend") and self._held(hand, obj) and lifted:
            self._grip_offset = hand.pos - obj  # taking over an object already held
            self._goto(ph := "carry")
        grasp_point = obj + self._grasp.offset
        if ph in ("approach", "descend", "grasp", "lift"):
            return self._pick_up(hand, obj, grasp_point, ph, t)
        return self._put_down(hand, state, obj, target, ph, t)

    def _pick_up(self, hand: Hand, obj: np.ndarray, grasp_point: np.ndarray, ph: str, t: int) -> np.ndarray:
        """Approach, descend, grasp and lift phases: the hand takes the object and rises to carry height."""
        yaw = self._grasp.yaw
        if ph == "approach":
            goal = grasp_point + [0, 0, APPROACH_HEIGHT_M]
            if np.linalg.norm((goal - hand.pos)[:2]) > TRAVEL_XY_M:  # travel high: clear of baskets and rims
                goal[2] = max(goal[2], self._carry_z - 0.05)
            if (np.linalg.norm((goal - hand.pos)[:2]) < 0.01 and abs(goal[2] - hand.pos[2]) < 0.02) or t > TIMEOUT[ph]:
                self._goto("descend")
            return move_hand(hand, goal, yaw, OPEN)
        if ph == "descend":
            if np.linalg.norm(grasp_point - hand.pos) < 0.01 or t > TIMEOUT[ph]:
                self._goto("grasp")
            return move_hand(hand, grasp_point, yaw, OPEN)
        if ph == "grasp":
            if t > TIMEOUT[ph]:
                self._grip_offset = hand.pos - obj
                self._grasp_obj_z = obj[2]
                self._retry_or(hand.finger_gap > MAX_HELD_GAP_M, "lift")  # closed on nothing: too wide this way
            return move_hand(hand, grasp_point, yaw, CLOSE)
        # lift: straight up to carry height
        if hand.pos[2] > self._carry_z - 0.03 or t > TIMEOUT[ph]:
            self._retry_or(obj[2] < self._grasp_obj_z + LIFTED_M, "carry")  # the object stayed behind
        return move_hand(hand, [hand.pos[0], hand.pos[1], self._carry_z], hand.yaw, CLOSE, speed=carry_speed(self.obj))

    def _put_down(
        self, hand: Hand, state: dict[str, np.ndarray], obj: np.ndarray, target: np.ndarray, ph: str, t: int
    ) -> np.ndarray:
        """Carry, lower, release and retreat phases: the held object is steered onto the target
        and let go, then the hand rises (after a failure too, before the next attempt)."""
        if ph in ("carry", "lower"):
            if np.linalg.norm(hand.pos - obj) > DROPPED_M:  # dropped on the way: open, rise, regrasp
                self._retry_or(True, "")
                return move_hand(hand, hand.pos + [0, 0, 0.05], hand.yaw, OPEN)
            # the object hangs where it hangs: steer it, not the hand
            self._grip_offset = hand.pos - placement_point(self.obj, state)
            if self.align_with is not None:
                yaw = hand.yaw + wrap_half_turn(yaw_of(state[self.align_with]) - yaw_of(state[self.obj]))
            else:
                yaw = hand.yaw
        if ph == "carry":
            goal = np.array([target[0], target[1], self._carry_z]) + self._grip_offset * [1, 1, 0]
            aligned = self.align_with is None or abs(wrap_half_turn(yaw - hand.yaw)) < ALIGNED_RAD
            if (np.linalg.norm((goal - hand.pos)[:2]) < AT_TARGET_XY_M and aligned) or t > TIMEOUT[ph]:
                self._goto("lower")
            return move_hand(hand, goal, yaw, CLOSE, speed=carry_speed(self.obj))
        if ph == "lower":
            goal = target + [0, 0, RELEASE_HEIGHT_M[self.relation]] + self._grip_offset
            # the object stopped going down: it rests on something (a held pot would otherwise
            # be pressed on while the fingers slide off its handle)
            stalled = self._last_z is not None and t > 5 and self._last_z - obj[2] < 0.0005
            self._last_z = obj[2]
            if abs(goal[2] - hand.pos[2]) < 0.01 or stalled or t > TIMEOUT[ph]:
                self._goto("release")
            return move_hand(hand, goal, yaw, CLOSE, speed=carry_speed(self.obj))
        if ph == "release":
            self._attempt = 0  # placed: the retreat that follows ends the skill
            if t > TIMEOUT[ph]:
                self._goto("retreat")
            return move_hand(hand, hand.pos, hand.yaw, OPEN)
        # retreat: straight up with the fingers open
        if hand.pos[2] > self._carry_z - 0.05 or t > TIMEOUT["retreat"]:
            if self._attempt == 0 or self._attempt > self.max_attempts:
                self.finished = True  # placed, or given up
            self._goto("approach")
        return move_hand(hand, [hand.pos[0], hand.pos[1], self._carry_z], hand.yaw, OPEN)

    def _retry_or(self, failed: bool, next_phase: str) -> None:
        if failed:
            self._attempt += 1
            self._goto("retreat")
        else:
            self._goto(next_phase)

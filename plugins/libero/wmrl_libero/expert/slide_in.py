"""Put a mug into a microwave through its open door (``In <mug> microwave_1_heating_region``).

The cavity of LIBERO's ``microwave`` is 14.4 cm tall and the hand, pointing down, reaches
12 cm above its grip point: a hand that holds the mug cannot follow it inside. So the mug is
grasped by its handle (pointing at the door, the hand outside the cavity), slid in just
above the floor as far as the hand stays outside, set down and let go. Then the fingers,
closed into a paddle and leaning into the cavity (the palm trails outside and below the
ceiling's front edge), push it by the handle until it is deep enough for the door to shut.

Geometry in the microwave's frame (its origin at the bottom of the body, the door at -y;
measured from the collision boxes of ``microwave.xml``) and the mug's frame (origin at its
bottom, the handle along +x; from the collision boxes of ``white_yellow_mug``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

from wmrl_libero.expert.close_door import DOOR_LENGTH_M, HINGE_M
from wmrl_libero.expert.motion import CLOSE, OPEN, Hand, PhasedSkill, move_hand, yaw_of

__all__ = ["MUG_OUTLINES", "SlideIn"]

# The cavity (microwave frame): floor top, ceiling underside, front opening (where the
# closed door's inner face is), and the x of the middle between its side walls.
FLOOR_Z = 0.024
CEILING_Z = 0.168
FRONT_Y = -0.088
CAVITY_MID_X = -0.04  # the side walls' inner faces are at x -0.1435 and +0.0635
TOP_Z = 0.1885  # top of the body and of the door


@dataclass(frozen=True)
class MugOutline:
    """A mug in its own frame (origin at the bottom, handle along +x), metres."""

    handle_grip: np.ndarray  # grip point on the handle's outer bar, closing across it
    handle_tip_x: float  # outer face of the handle
    body_x: float  # axis of the cylindrical body
    body_radius: float


# white_yellow_mug: the handle's outer bar spans x 0.060-0.068, z 0.027-0.085 and is 1.8 cm
# wide; gripped 6.2 cm up, the fingers (reaching 1 cm below the grip point) pass above its
# lower bar (top 3.5 cm) and the hand (from 3 cm above) above its upper bar (top 8.6 cm).
MUG_OUTLINES = {
    "white_yellow_mug": MugOutline(np.array([0.064, 0.0, 0.062]), 0.068, -0.0185, 0.0525),
}

HANDLE_GAP_M = (0.008, 0.03)  # finger gap when the handle (1.8 cm wide) is held
HAND_HALF_THICKNESS_M = 0.037  # the hand's far face from the grip point, across the closing axis
HAND_CLEARANCE_M = 0.008  # ... kept this far in front of the ceiling's front edge
CARRY_ABOVE_FLOOR_M = 0.015  # the mug's bottom clears the cavity floor's front edge by this
# The mug crosses over to the opening with its bottom this far above the microwave's top
# (the open door stands between it and the opening), comes down in front of the opening (its
# back then clears the top's front edge) and slides in just above the floor.
OVER_TOP_M = 0.03
OUTSIDE_M = 0.10  # the mug comes down this far in front of where it is set down
# The hand's 20 cm long side runs across the opening: it comes down this far (x, microwave
# frame) to the right of a door that is less than wide open (above -1.45 rad, the door's
# tip leans over the way in), the mug then right of the cavity's middle (up to MAX_X) ...
HAND_HALF_LENGTH_M = 0.103
DOOR_CLEARANCE_M = 0.01
# ... but the hand's other end must stay left of the front frame beside the opening (from
# x 0.0875), or it cannot push the mug in: (0.0875 - HAND_HALF_LENGTH_M) less 5 mm.
MAX_X = -0.02
APPROACH_HEIGHT_M = 0.10
TRAVEL_XY_M = 0.03  # farther than this from above the grasp point, the hand travels high:
TRAVEL_ABOVE_TOP_M = 0.05  # this far above the microwave (an open door can stand in the way)
RISE_M = 0.05  # after letting go, up this far (fingertips clear the handle's upper bar)
# The push: target depth of the mug's origin, and where the paddle meets the handle.
PUSH_TO_Y = -0.003  # handle tip then 2 cm behind the door; the body's back 1.3 cm off the back wall
PUSH_TOLERANCE_M = 0.004
PUSH_HEIGHT_M = 0.045  # above the mug's bottom, on the handle's outer bar
PUSH_STANDOFF_M = 0.05  # the paddle comes down this far in front of the handle
FINGER_RADIUS_M = 0.012  # grip site to the paddle's front surface
LEAN_RAD = 0.7  # fingers lean 40 degrees into the cavity: the palm stays below the ceiling's front edge
PUSH_SPEED = 0.3  # position action cap while pushing (the mug weighs 31 g and slides freely)
DOOR_MARGIN_M = 0.008  # the mug's front must be this far behind the door's inner face
TIMEOUT = {
    "approach": 80,
    "descend": 40,
    "grasp": 12,
    "lift": 40,
    "over": 80,
    "line_up": 40,
    "slide": 60,
    "lower": 30,
    "release": 10,
    "rise": 20,
    "to_push": 60,
    "push_down": 30,
    "push": 80,
    "back_off": 30,
}


def mug_outline(name: str) -> MugOutline | None:
    return next((o for k, o in MUG_OUTLINES.items() if name.startswith(k)), None)


@dataclass
class SlideIn(PhasedSkill):
    """Put ``obj`` (a mug of :data:`MUG_OUTLINES`) into ``fixture`` (a microwave) via its door;
    ``region`` is the goal's region site (``<fixture>_heating_region``)."""

    obj: str
    region: str
    fixture: str
    max_attempts: int = 2
    finished: bool = field(default=False, init=False)

    def __post_init__(self):
        self.outline = mug_outline(self.obj)
        if self.outline is None:
            raise ValueError(f"no handle outline for {self.obj!r}: measure it into MUG_OUTLINES")
        self._phase, self._t, self._attempt = "approach", 0, 0
        self._grip_offset = np.zeros(3)
        self._last_z = None
        self._rest_z = 0.0
        self._rise_to = np.zeros(3)
        self._line_x = CAVITY_MID_X

    def __eq__(self, other):
        return isinstance(other, SlideIn) and (self.obj, self.region) == (other.obj, other.region)

    # ------------------------------------------------------------------ geometry
    def _frame(self, state) -> tuple[np.ndarray, Rotation]:
        pose = state[self.fixture]
        return pose[:3], Rotation.from_euler("z", yaw_of(pose))

    def _to_world(self, state, local) -> np.ndarray:
        origin, turn = self._frame(state)
        return origin + turn.apply(local)

    def _to_local(self, state, world) -> np.ndarray:
        origin, turn = self._frame(state)
        return turn.inv().apply(np.asarray(world) - origin)

    def _front_y(self, state) -> float:
        """The mug's front-most point (towards the door), microwave frame y."""
        pose = state[self.obj]
        mug = Rotation.from_euler("z", yaw_of(pose))
        tip = self._to_local(state, pose[:3] + mug.apply([self.outline.handle_tip_x, 0, 0]))
        axis = self._to_local(state, pose[:3] + mug.apply([self.outline.body_x, 0, 0]))
        return min(tip[1], axis[1] - self.outline.body_radius)

    def _door_clear_x(self, state, hand_y: float) -> float:
        """Where the mug (and the hand, whose grip point is above its axis) lines up along x so
        that the hand, ``hand_y`` and nearer the robot, clears the open door's inner face."""
        angle = float(state[f"{self.fixture}/joints"][0])
        c, s = np.cos(angle), np.sin(angle)
        # the door's line from the hinge, at the hand's far side (y nearest the robot)
        along = np.clip((hand_y - HAND_HALF_THICKNESS_M - HINGE_M[1]) / min(s, -1e-6), 0.0, DOOR_LENGTH_M)
        door_x = HINGE_M[0] + along * c
        return float(np.clip(door_x + HAND_HALF_LENGTH_M + DOOR_CLEARANCE_M, CAVITY_MID_X, MAX_X))

    def satisfied(self, state, hand: Hand | None = None) -> bool:
        """Resting inside the heating region, its front behind the closed door's inner face."""
        local = self._to_local(state, state[self.obj][:3])
        inside = abs(local[0]) < 0.12 and -0.0735 < local[1] < 0.0935 and FLOOR_Z - 0.01 < local[2] < 0.09
        held = hand is not None and np.linalg.norm(hand.pos - state[self.obj][:3]) < 0.10 and hand.finger_gap < 0.05
        return inside and not held and self._front_y(state) > FRONT_Y + DOOR_MARGIN_M

    # ------------------------------------------------------------------ control
    def act(self, hand: Hand, state: dict[str, np.ndarray]) -> np.ndarray:
        pose = state[self.obj]
        obj = pose[:3]
        mug_yaw = yaw_of(pose)
        _, turn = self._frame(state)
        self._t += 1
        ph, t = self._phase, self._t
        if ph == "approach" and t == 1 and self.satisfied(state, hand):
            self.finished = True
        if ph in ("approach", "descend", "grasp"):
            return self._grasp_handle(hand, state, obj, mug_yaw, ph, t)
        self._grip_offset = hand.pos - obj
        if ph in ("lift", "over", "line_up", "slide", "lower", "release", "rise"):
            return self._carry_in(hand, state, obj, mug_yaw, turn, ph, t)
        return self._push_in(hand, state, obj, mug_yaw, turn, ph, t)

    def _grasp_handle(
        self, hand: Hand, state: dict[str, np.ndarray], obj: np.ndarray, mug_yaw: float, ph: str, t: int
    ) -> np.ndarray:
        """Approach, descend and grasp phases: the fingers close across the mug's handle (or,
        with the mug already set down in the opening, straight on to the push)."""
        grip = obj + Rotation.from_euler("z", mug_yaw).apply(self.outline.handle_grip)
        local = self._to_local(state, obj)
        if ph == "approach":
            if local[2] > FLOOR_Z - 0.01 and abs(local[0]) < 0.2 and local[1] > FRONT_Y - 0.06:
                self._goto("to_push")  # already set down in the opening: only the push is left
                return move_hand(hand, hand.pos + [0, 0, 0.03], hand.yaw, OPEN)
            goal = grip + [0, 0, APPROACH_HEIGHT_M]
            if np.linalg.norm((goal - hand.pos)[:2]) > TRAVEL_XY_M:
                goal[2] = max(goal[2], state[self.fixture][2] + TOP_Z + TRAVEL_ABOVE_TOP_M)
            if (np.linalg.norm((goal - hand.pos)[:2]) < 0.01 and abs(goal[2] - hand.pos[2]) < 0.02) or t > TIMEOUT[ph]:
                self._goto("descend")
            return move_hand(hand, goal, mug_yaw, OPEN)  # fingers close across the handle
        if ph == "descend":
            if np.linalg.norm(grip - hand.pos) < 0.008 or t > TIMEOUT[ph]:
                self._goto("grasp")
            return move_hand(hand, grip, mug_yaw, OPEN)
        # grasp
        if t > TIMEOUT[ph]:
            self._rest_z = obj[2]
            # the handle is 1.8 cm wide: fingers wider apart or nearly shut hold nothing
            self._retry_or(not HANDLE_GAP_M[0] < hand.finger_gap < HANDLE_GAP_M[1], "lift")
        return move_hand(hand, grip, mug_yaw, CLOSE)

    def _carry_in(
        self, hand: Hand, state: dict[str, np.ndarray], obj: np.ndarray, mug_yaw: float, turn: Rotation, ph: str, t: int
    ) -> np.ndarray:
        """Lift, over, line_up, slide, lower, release and rise phases: the held mug goes over the
        microwave, down in front of the opening and in just above the floor, is set down and let
        go; the hand rises off the handle."""
        local = self._to_local(state, obj)
        # the mug's yaw that points its handle at the door; turning the hand turns the mug
        want_yaw = yaw_of(state[self.fixture]) - np.pi / 2
        yaw = hand.yaw + float(np.clip(_wrap_turn(want_yaw - mug_yaw), -0.3, 0.3))
        # the deepest the mug can go with the hand outside (the grip point sits in front of it)
        grip_depth = float(turn.inv().apply(self._grip_offset)[1])
        deepest = FRONT_Y - HAND_CLEARANCE_M - HAND_HALF_THICKNESS_M - grip_depth
        carry_z = FLOOR_Z + CARRY_ABOVE_FLOOR_M
        if ph in ("lift", "over", "line_up", "slide", "lower") and np.linalg.norm(self._grip_offset) > 0.15:
            self._retry_or(True, "")  # dropped
            return move_hand(hand, hand.pos + [0, 0, 0.05], hand.yaw, OPEN)
        high_z = TOP_Z + OVER_TOP_M
        if ph == "lift":  # straight up, above the microwave and its door
            goal_obj = self._to_world(state, [local[0], local[1], high_z])
            if obj[2] > goal_obj[2] - 0.01 or t > TIMEOUT[ph]:
                self._line_x = self._door_clear_x(state, deepest - OUTSIDE_M + grip_depth)
                self._retry_or(obj[2] < self._rest_z + 0.01, "over")  # the mug stayed behind
            return move_hand(hand, goal_obj + self._grip_offset, yaw, CLOSE)
        if ph == "over":  # above the line-up point, in front of the opening
            goal_obj = self._to_world(state, [self._line_x, deepest - OUTSIDE_M, high_z])
            if np.linalg.norm(goal_obj - obj) < 0.015 or t > TIMEOUT[ph]:
                self._goto("line_up")
            return move_hand(hand, goal_obj + self._grip_offset, yaw, CLOSE)
        if ph == "line_up":  # down in front of the opening, the mug just above the floor
            goal_obj = self._to_world(state, [self._line_x, deepest - OUTSIDE_M, carry_z])
            if np.linalg.norm(goal_obj - obj) < 0.01 or t > TIMEOUT[ph]:
                self._goto("slide")
            return move_hand(hand, goal_obj + self._grip_offset, yaw, CLOSE)
        if ph == "slide":
            goal_obj = self._to_world(state, [self._line_x, deepest, carry_z])
            if np.linalg.norm(goal_obj - obj) < 0.008 or t > TIMEOUT[ph]:
                self._goto("lower")
            return move_hand(hand, goal_obj + self._grip_offset, yaw, CLOSE, speed=0.5)
        if ph == "lower":
            goal_obj = self._to_world(state, [local[0], local[1], FLOOR_Z - 0.01])
            stalled = self._last_z is not None and t > 4 and self._last_z - obj[2] < 0.0005
            self._last_z = obj[2]
            if stalled or t > TIMEOUT[ph]:
                self._goto("release")
            return move_hand(hand, goal_obj + self._grip_offset, hand.yaw, CLOSE, speed=0.3)
        if ph == "release":
            if t > TIMEOUT[ph]:
                self._rise_to = hand.pos + [0, 0, RISE_M]
                self._goto("rise")
            return move_hand(hand, hand.pos, hand.yaw, OPEN)
        # rise
        goal = self._rise_to
        if abs(goal[2] - hand.pos[2]) < 0.01 or t > TIMEOUT[ph]:
            self._goto("to_push")
        return move_hand(hand, goal, hand.yaw, OPEN)

    def _push_in(
        self, hand: Hand, state: dict[str, np.ndarray], obj: np.ndarray, mug_yaw: float, turn: Rotation, ph: str, t: int
    ) -> np.ndarray:
        """to_push, push_down, push and back_off phases: the closed fingers, leaning into the
        cavity, push the mug by its handle until it is deep enough for the door to shut; then
        the skill ends, or tries again when the mug is not in place."""
        inward = turn.apply([0.0, 1.0, 0.0])
        local = self._to_local(state, obj)
        # the paddle meets the mug's front on the line through its body's axis
        axis = obj + Rotation.from_euler("z", mug_yaw).apply([self.outline.body_x, 0, 0])
        front = self._to_world(state, [self._to_local(state, axis)[0], self._front_y(state), local[2]])
        contact = front + [0, 0, PUSH_HEIGHT_M] - FINGER_RADIUS_M * inward
        push_yaw = yaw_of(state[self.fixture]) + np.pi / 2  # closing across the push, like a drawer

        def lean_move(goal, speed=1.0):
            return move_hand(hand, goal, push_yaw, CLOSE, lean=inward, lean_rad=LEAN_RAD, speed=speed)

        if ph == "to_push":
            goal = contact - PUSH_STANDOFF_M * inward + [0, 0, RISE_M]
            if np.linalg.norm(goal - hand.pos) < 0.015 or t > TIMEOUT[ph]:
                self._goto("push_down")
            return lean_move(goal)
        if ph == "push_down":
            goal = contact - PUSH_STANDOFF_M * inward
            if np.linalg.norm(goal - hand.pos) < 0.01 or t > TIMEOUT[ph]:
                self._goto("push")
            return lean_move(goal)
        if ph == "push":
            remaining = PUSH_TO_Y - local[1]
            if remaining < PUSH_TOLERANCE_M or t > TIMEOUT[ph]:
                self._goto("back_off")
            return lean_move(contact + remaining * inward, speed=PUSH_SPEED)
        goal = contact - PUSH_STANDOFF_M * inward + [0, 0, RISE_M]
        if np.linalg.norm(goal - hand.pos) < 0.02 or t > TIMEOUT["back_off"]:
            if self.satisfied(state, hand) or self._attempt >= self.max_attempts:
                self.finished = True
            self._attempt += 1
            self._goto("approach")
        return lean_move(goal)

    def _goto(self, phase: str) -> None:
        super()._goto(phase)
        self._last_z = None

    def _retry_or(self, failed: bool, next_phase: str) -> None:
        if failed:
            self._attempt += 1
            if self._attempt > self.max_attempts:
                self.finished = True
            self._goto("approach")
        else:
            self._goto(next_phase)


def _wrap_turn(angle: float) -> float:
    """Angle folded into (-pi, pi]."""
    return float(-((-angle + np.pi) % (2 * np.pi) - np.pi))

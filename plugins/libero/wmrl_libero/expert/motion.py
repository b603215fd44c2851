"""End-effector motion primitives on LIBERO's OSC_POSE action space.

An OSC_POSE action is ``[dx, dy, dz, rx, ry, rz, gripper]`` in [-1, 1]: a position delta
(1 unit = 0.05 m), an axis-angle rotation delta (1 unit = 0.5 rad) and the gripper command
(-1 open, +1 close). The skills steer the hand with a saturating proportional law on the
pose error; the hand always points down, turned by a yaw about world z.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

__all__ = [
    "CLOSE",
    "OPEN",
    "POSITION_GAIN",
    "WRIST_LIMIT_RAD",
    "Hand",
    "move_hand",
    "wrap_half_turn",
    "wrist_safe_yaw",
    "yaw_of",
]

OPEN, CLOSE = -1.0, 1.0
# Action units per metre of position error; saturates (|a| <= 1) beyond 8 cm, so the hand
# moves at full speed (5 cm per step) when far and slows down over the last few centimetres.
POSITION_GAIN = 12.0
# Action units per radian of orientation error (1 unit = 0.5 rad per step: gain 4 closes
# a small error in about two steps without overshoot).
ROTATION_GAIN = 4.0
_POINTING_DOWN = Rotation.from_quat([1.0, 0.0, 0.0, 0.0])  # gripper z along world -z (xyzw)
WRIST_LIMIT_RAD = 2.8973  # the Panda's last joint stops here (both ways)


@dataclass(frozen=True)
class Hand:
    """What the skills read from the robot: grip-site position (m), orientation (xyzw),
    finger opening (m, 0 closed, about 0.078 fully open) and the wrist (the Panda's last
    joint, rad; it turns the hand about its own axis and stops at +-``WRIST_LIMIT_RAD``)."""

    pos: np.ndarray
    quat: np.ndarray
    finger_gap: float
    wrist: float = 0.0

    @classmethod
    def from_proprio(cls, proprio: np.ndarray) -> Hand:
        p = np.asarray(proprio, dtype=np.float64)
        return cls(p[:3], p[3:7], float(p[7] - p[8]), float(p[15]) if len(p) > 15 else 0.0)

    @property
    def yaw(self) -> float:
        """Yaw of the downward-pointing hand about world z (rad)."""
        return float((Rotation.from_quat(self.quat) * _POINTING_DOWN.inv()).as_rotvec()[2])


def move_hand(
    hand: Hand,
    target: np.ndarray,
    yaw: float,
    gripper: float,
    gain: float = POSITION_GAIN,
    lean: np.ndarray | None = None,
    lean_rad: float = 0.0,
    speed: float = 1.0,
    fold: bool = True,
) -> np.ndarray:
    """Action (7,) steering the grip site to ``target`` with the hand down, turned by ``yaw``.

    The gripper is symmetric under a half turn, so of ``yaw`` and ``yaw + pi`` the one
    nearer the hand's current yaw is used (a long turn of the wrist drags the arm off course).
    With ``fold=False`` the hand turns to ``yaw`` as given (a skill that chose which way round
    the wrist goes, :func:`wrist_safe_yaw`). ``speed`` caps the position action (1 = 5 cm per step). With ``lean`` (a horizontal direction) the fingers point ``lean_rad`` away from straight
    down towards it: the fingertips lead and the palm trails behind and above.
    """
    if fold:
        yaw = hand.yaw + wrap_half_turn(yaw - hand.yaw)
    action = np.zeros(7, dtype=np.float32)
    action[:3] = np.clip(gain * (np.asarray(target) - hand.pos), -speed, speed)
    want = Rotation.from_euler("z", yaw) * _POINTING_DOWN
    if lean is not None and lean_rad:
        axis = np.cross([0.0, 0.0, -1.0], lean)  # turning straight down about this moves it towards lean
        want = Rotation.from_rotvec(axis / np.linalg.norm(axis) * lean_rad) * want
    error = (want * Rotation.from_quat(hand.quat).inv()).as_rotvec()
    action[3:6] = np.clip(ROTATION_GAIN * error, -1, 1)
    action[6] = gripper
    return action


def wrist_safe_yaw(hand: Hand, yaw: float, turn_after: float = 0.0) -> float:
    """Of the two ways to turn a down-pointing hand to ``yaw`` (modulo a half turn: less
    or more than a quarter turn, in opposite directions), the one that keeps the wrist
    furthest inside its limits, now and after the hand turns a further ``turn_after`` rad.

    Turning the hand by ``d`` about world z turns the wrist by about ``-d`` (measured on
    LIBERO's Panda). Returns the absolute yaw to steer to with ``move_hand(..., fold=False)``.
    """
    near = wrap_half_turn(yaw - hand.yaw)
    far = near - np.pi if near > 0 else near + np.pi

    def margin(d: float) -> float:
        ends = (hand.wrist - d, hand.wrist - d - turn_after)
        return min(WRIST_LIMIT_RAD - abs(w) for w in ends)

    return hand.yaw + max((near, far), key=margin)


def wrap_half_turn(angle: float) -> float:
    """Angle folded into (-pi/2, pi/2]: a parallel gripper is symmetric under a half turn."""
    a = (angle + np.pi / 2) % np.pi - np.pi / 2
    return float(a if a != -np.pi / 2 else np.pi / 2)


def yaw_of(pose: np.ndarray) -> float:
    """Yaw (rad about world z) of a privileged pose ``[x, y, z, qx, qy, qz, qw]``."""
    return float(Rotation.from_quat(pose[3:7]).as_euler("xyz")[2])


class PhasedSkill:
    """The phase bookkeeping every skill shares: the current phase, the steps spent in it
    (``_t``, compared with the skill's per-phase timeouts) and the attempt number."""

    _phase: str
    _t: int
    _attempt: int

    @property
    def phase(self) -> str:
        """``"<phase>#<attempt>"``, for logs and tests."""
        return f"{self._phase}#{self._attempt}"

    def _goto(self, phase: str) -> None:
        self._phase, self._t = phase, 0

"""Where and how the hand grasps each LIBERO object.

A grasp is a point in the object's frame (the grip site goes there) and the direction,
in the object's horizontal plane, along which the fingers close. The Panda gripper opens
to about 8 cm, so objects are grasped across a side narrower than that. Dimensions come
from the objects' collision boxes (measured in the simulator, body frame, metres).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from wmrl_libero.expert.motion import wrap_half_turn, yaw_of

__all__ = ["MAX_HELD_GAP_M", "Grasp", "carry_speed", "grasp_for", "placement_point"]

# Finger gap (m) above which the fingers closed on (nearly) nothing or on a side too wide.
MAX_HELD_GAP_M = 0.07


@dataclass(frozen=True)
class Grasp:
    """Grip-site point relative to the object origin (world-aligned offset, m) and hand yaw (rad)."""

    offset: np.ndarray
    yaw: float


# Flat boxes lying on the table (cream cheese 8.2 x 4.2 x 1.8 cm, butter 7.6 x 4.0 x 1.8 cm):
# closed across their 4 cm width, i.e. along the box's local y axis. The palm is 20 cm long
# along the closing axis and collides with tall neighbours (the milk carton of task 1), so
# the grasp slides along the box's length (by one of ``_FLAT_BOX_SLIDES_M``) and across it
# (``_FLAT_BOX_SHIFTS_M``: the open fingers, 8 cm apart, still straddle the 4 cm box) to the
# point farthest from the other objects' footprints (the basket of task 1 is 17 cm across).
_FLAT_BOXES = ("cream_cheese", "butter")
_FLAT_BOX_SLIDES_M = (-0.025, -0.0125, 0.0, 0.0125, 0.025)
_FLAT_BOX_SHIFTS_M = (-0.015, 0.0, 0.015)
_PALM_HALF_LENGTH_M = 0.10
_FOOTPRINT_RADIUS_M = {"basket": 0.085}  # others count as points
# Moka pot: its body is about 8.2 cm across (too wide for the fingers); its handle is a bar
# 1.3 cm thick at local y = +7.2 cm, from the base to 5.6 cm up. Grasped there, closing
# along local x, 3 cm above the origin so the palm stays clear of the pot's lid.
_MOKA_HANDLE_POINT = np.array([0.0, 0.072, 0.03])
# Mugs: grasped by the rim (one finger inside, one outside), radius 5 cm, 6 cm above the
# origin; each retry tries a side a quarter turn further round.
_MUG_RIM_RADIUS_M = 0.05
_MUG_RIM_HEIGHT_M = 0.06
# Bowls (akita black bowl: 10.8 cm across, 5 cm tall): too wide to span, grasped by the rim.
_BOWL_RIM_RADIUS_M = 0.048
_BOWL_RIM_HEIGHT_M = 0.035
# Books stand upright (black book: 2.9 cm thick along local x, 11 cm wide along local y,
# 13.7 cm tall from its origin at the bottom; its middle is 1.2 cm to local -y of the
# origin): grasped across the thickness 4.7 cm below the top edge (deeper and the palm
# touches the top), and carried slowly: held by its top it swings like a pendulum.
_BOOK_GRASP_POINT = np.array([0.0, -0.012, 0.09])
_CARRY_SPEED = {"book": 0.3}  # position action cap while carrying (1 = 5 cm per step)
_BOOK_MIDDLE = np.array([0.0, -0.012, 0.0])
# Other boxes: fingers along a face normal.
_OTHER_BOXES = ("pudding",)
# Neighbours closer than this (m) decide the yaw of an unknown object's grasp.
_NEIGHBOUR_RADIUS_M = 0.15


def grasp_for(name: str, state: dict[str, np.ndarray], attempt: int = 0) -> Grasp:
    """The grasp of object ``name`` in privileged state ``state``; ``attempt`` counts retries."""
    pose = state[name]
    yaw = yaw_of(pose)
    turn = Rotation.from_euler("z", yaw)
    if "bowl" in name:  # like a mug's rim, on the side facing the robot (away from shelves and drawers)
        phi = np.pi + attempt * np.pi / 2
        point = np.array([_BOWL_RIM_RADIUS_M * np.cos(phi), _BOWL_RIM_RADIUS_M * np.sin(phi), _BOWL_RIM_HEIGHT_M])
        return Grasp(point, wrap_half_turn(phi + np.pi / 2))
    if "mug" in name:
        phi = attempt * np.pi / 2
        point = np.array([_MUG_RIM_RADIUS_M * np.cos(phi), _MUG_RIM_RADIUS_M * np.sin(phi), _MUG_RIM_HEIGHT_M])
        return Grasp(point, wrap_half_turn(phi + np.pi / 2))
    if any(k in name for k in _FLAT_BOXES):
        # fingers close along gripper y, which is world y at yaw 0: yaw = box yaw closes along box y
        closing, length = turn.apply([0.0, 1.0, 0.0]), turn.apply([1.0, 0.0, 0.0])
        offsets = [d * length + e * closing for d in _FLAT_BOX_SLIDES_M for e in _FLAT_BOX_SHIFTS_M]
        best = max(offsets, key=lambda o: (_palm_clearance(pose[:3] + o, closing, name, state), -np.linalg.norm(o)))
        return Grasp(best, wrap_half_turn(yaw))
    if "book" in name:
        return Grasp(turn.apply(_BOOK_GRASP_POINT), wrap_half_turn(yaw - np.pi / 2))
    if "moka_pot" in name:
        return Grasp(turn.apply(_MOKA_HANDLE_POINT), wrap_half_turn(yaw - np.pi / 2))
    return Grasp(np.zeros(3), _yaw_away_from_neighbours(name, state, attempt))


def _palm_clearance(point: np.ndarray, closing: np.ndarray, name: str, state: dict[str, np.ndarray]) -> float:
    """Horizontal distance (m) from the palm (a segment along the closing axis through
    ``point``) to the nearest other object's footprint (a disc about its origin)."""
    a, b = point[:2] - _PALM_HALF_LENGTH_M * closing[:2], point[:2] + _PALM_HALF_LENGTH_M * closing[:2]
    best = np.inf
    for other, pose in state.items():
        if other == name or "/" in other or "region" in other or other.endswith("_side"):
            continue
        p = pose[:2]
        u = np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0.0, 1.0)
        radius = next((r for k, r in _FOOTPRINT_RADIUS_M.items() if k in other), 0.0)
        best = min(best, float(np.linalg.norm(a + u * (b - a) - p)) - radius)
    return best


def _yaw_away_from_neighbours(name: str, state: dict[str, np.ndarray], attempt: int) -> float:
    """Fingers closing perpendicular to the direction of the nearest neighbouring object (so
    no finger lands on it), snapped to a face normal for boxes, a quarter turn per retry."""
    pos = state[name][:2]
    best, dist = None, _NEIGHBOUR_RADIUS_M
    for other, pose in state.items():
        if other == name or "/" in other or "region" in other or other.endswith("_side"):
            continue
        d = np.linalg.norm(pose[:2] - pos)
        if 1e-6 < d < dist:
            best, dist = pose[:2] - pos, d
    yaw = 0.0 if best is None else float(np.arctan2(best[1], best[0]))
    if any(k in name for k in _OTHER_BOXES):
        box = yaw_of(state[name])
        yaw = min((box + k * np.pi / 2 for k in range(-4, 5)), key=lambda c: abs(wrap_half_turn(c - yaw)))
    return wrap_half_turn(yaw + attempt * np.pi / 2)


def placement_point(name: str, state: dict[str, np.ndarray]) -> np.ndarray:
    """The point of object ``name`` (world, m) that is steered onto the target: its origin,
    or for books their middle (the compartment they go into is only 1.9 cm longer)."""
    pose = state[name]
    if "book" in name:
        return pose[:3] + Rotation.from_euler("z", yaw_of(pose)).apply(_BOOK_MIDDLE)
    return pose[:3]


def carry_speed(name: str) -> float:
    """Cap on the position action while ``name`` is held (1: full speed)."""
    return next((v for k, v in _CARRY_SPEED.items() if k in name), 1.0)

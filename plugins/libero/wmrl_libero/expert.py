"""A scripted expert for LIBERO that reads privileged simulator state (object poses).

It turns the task's BDDL goal into a plan of pick-and-place subgoals (``In``/``On``
predicates) and drives the end effector through approach, descend, grasp, lift, carry,
lower, release and retreat with a proportional controller on LIBERO's OSC_POSE deltas
(position scale 0.05 m per unit action, rotation 0.5 rad per unit). Articulated goals
(``Turnon``, ``Close``, ``Open``) are not scripted yet: tasks that need them fail, which the
evaluation protocol measures and the README states.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from wmrl_libero.controllers import ControllerFactory
from wmrl_libero.suites import TaskInfo

__all__ = ["ScriptedExpert", "PickPlace", "plan_from_goal", "expert_factory", "UNSUPPORTED_PREDICATES"]

UNSUPPORTED_PREDICATES = ("turnon", "turnoff", "open", "close")
_POS_SCALE_M = 0.05
_ROT_SCALE_RAD = 0.5
_DOWN = Rotation.from_quat([1.0, 0.0, 0.0, 0.0])  # gripper pointing down (xyzw)


@dataclass
class PickPlace:
    """Move ``obj`` onto/into ``target`` (an object or a region site)."""

    obj: str
    target: str
    relation: str  # "in" or "on"


def plan_from_goal(goal: list[list[str]]) -> tuple[list[PickPlace], list[list[str]]]:
    """Split BDDL goal predicates into pick-and-place steps and what the expert cannot do."""
    steps, unsupported = [], []
    for pred in goal:
        kind = pred[0].lower()
        if kind in ("in", "on") and len(pred) == 3:
            steps.append(PickPlace(pred[1], pred[2], kind))
        else:
            unsupported.append(pred)
    return steps, unsupported


def _yaw(quat_xyzw: np.ndarray) -> float:
    return float(Rotation.from_quat(quat_xyzw).as_euler("xyz")[2])


@dataclass
class ScriptedExpert:
    """Closed-loop controller: ``act(obs, info) -> (1, 7)``; needs ``info["privileged"]``.

    :param goal: the task's BDDL goal predicates (``LiberoGymEnv.goal_predicates()``).
    :param gain: proportional gain, action units per metre of error (saturates at 1).
    :param max_attempts: extra grasp attempts per subgoal after the object stayed behind.
    """

    goal: list[list[str]]
    gain: float = 12.0
    max_attempts: int = 2
    plan: list[PickPlace] = field(init=False)
    unsupported: list[list[str]] = field(init=False)

    def __post_init__(self):
        self.plan, self.unsupported = plan_from_goal(self.goal)
        self._step = 0
        self._phase = "approach"
        self._phase_t = 0
        self._grip_offset = np.zeros(3)
        self._yaw_target: float | None = None
        self._last_eef = None
        self._carry_z = 0.0
        self._attempt = 0
        self._grasp_obj_z = 0.0
        self._grasp_point = np.zeros(3)

    # ------------------------------------------------------------------ helpers

    def _move(self, eef_pos, eef_quat, target, gripper: float) -> np.ndarray:
        a = np.zeros(7, dtype=np.float32)
        a[:3] = np.clip(self.gain * (target - eef_pos), -1, 1)
        want = _DOWN if self._yaw_target is None else Rotation.from_euler("z", self._yaw_target) * _DOWN
        err = (want * Rotation.from_quat(eef_quat).inv()).as_rotvec()
        a[3:6] = np.clip(err / _ROT_SCALE_RAD * 2.0, -1, 1)
        a[6] = gripper
        return a

    def _next_phase(self, name: str) -> None:
        self._phase, self._phase_t = name, 0

    # ------------------------------------------------------------------ control

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> np.ndarray:
        state = info.get("privileged")
        if state is None:
            raise ValueError("the scripted expert needs privileged state: build the env with privileged_info=True")
        eef_pos = obs["proprio"][:3].astype(np.float64)
        eef_quat = obs["proprio"][3:7].astype(np.float64)
        self._phase_t += 1
        if self._step >= len(self.plan):
            return self._move(eef_pos, eef_quat, eef_pos + [0, 0, 0.01], -1.0)[None]
        sub = self.plan[self._step]
        obj = state[sub.obj][:3]
        target = state[sub.target][:3]
        ph, t = self._phase, self._phase_t
        if ph == "approach" and t == 1:
            # fixed per subgoal: the object rises with the hand once grasped
            self._carry_z = max(obj[2], target[2]) + 0.18
        carry_z = self._carry_z
        if ph == "approach":
            if t == 1:
                # each failed attempt turns the grasp by a quarter turn
                self._grasp_point, yaw = _grasp_pose(sub.obj, state, self._attempt)
                if yaw is None:
                    yaw = self._grasp_yaw(sub.obj, state) + self._attempt * np.pi / 2
                self._yaw_target = _wrap_half_pi(yaw)
            goal = obj + self._grasp_point * [1, 1, 0] + [0, 0, 0.12]
            if (np.linalg.norm((goal - eef_pos)[:2]) < 0.01 and abs(goal[2] - eef_pos[2]) < 0.02) or t > 80:
                self._next_phase("descend")
            return self._move(eef_pos, eef_quat, goal, -1.0)[None]
        if ph == "descend":
            goal = obj + self._grasp_point
            if np.linalg.norm(goal - eef_pos) < 0.01 or t > 40:
                self._next_phase("grasp")
            return self._move(eef_pos, eef_quat, goal, -1.0)[None]
        if ph == "grasp":
            goal = obj + self._grasp_point
            if t > 12:
                self._grip_offset = eef_pos - obj
                self._grasp_obj_z = obj[2]
                finger_gap = float(obs["proprio"][7] - obs["proprio"][8])
                if finger_gap > _MAX_HELD_WIDTH_M:  # closed on (nearly) nothing: too wide this way round
                    self._attempt += 1
                    self._next_phase("retreat")
                else:
                    self._next_phase("lift")
            return self._move(eef_pos, eef_quat, goal, 1.0)[None]
        if ph == "lift":
            goal = np.array([eef_pos[0], eef_pos[1], carry_z])
            if eef_pos[2] > carry_z - 0.03 or t > 60:
                if obj[2] > self._grasp_obj_z + 0.05:
                    self._next_phase("carry")
                else:  # the object stayed behind: open, rise, try again turned
                    self._attempt += 1
                    self._next_phase("retreat")
            return self._move(eef_pos, eef_quat, goal, 1.0)[None]
        if ph in ("carry", "lower"):
            if np.linalg.norm(eef_pos - obj) > 0.15:  # dropped on the way: open, rise, regrasp turned
                self._attempt += 1
                self._next_phase("retreat")
                return self._move(eef_pos, eef_quat, eef_pos + [0, 0, 0.05], -1.0)[None]
            # the object hangs where it hangs: steer the object, not the hand, onto the target
            self._grip_offset = eef_pos - obj
        if ph == "carry":
            goal = np.array([target[0], target[1], carry_z]) + [self._grip_offset[0], self._grip_offset[1], 0]
            if np.linalg.norm((goal - eef_pos)[:2]) < 0.012 or t > 120:
                self._next_phase("lower")
            return self._move(eef_pos, eef_quat, goal, 1.0)[None]
        if ph == "lower":
            release_z = target[2] + (0.06 if sub.relation == "in" else 0.03)
            goal = np.array([target[0], target[1], release_z]) + self._grip_offset
            stalled = self._last_eef is not None and t > 5 and (self._last_eef[2] - eef_pos[2]) < 0.0005 and eef_pos[2] - goal[2] > 0.01
            self._last_eef = eef_pos
            if abs(goal[2] - eef_pos[2]) < 0.01 or stalled or t > 80:
                self._next_phase("release")
            return self._move(eef_pos, eef_quat, goal, 1.0)[None]
        if ph == "release":
            self._attempt = 0  # placed: the retreat that follows moves on to the next subgoal
            if t > 10:
                self._next_phase("retreat")
            return self._move(eef_pos, eef_quat, eef_pos, -1.0)[None]
        # retreat
        goal = np.array([eef_pos[0], eef_pos[1], carry_z])
        if eef_pos[2] > carry_z - 0.05 or t > 40:
            if self._attempt == 0 or self._attempt > self.max_attempts:
                self._step += 1  # placed, or given up on this subgoal
                self._attempt = 0
            self._yaw_target = None
            self._next_phase("approach")
        return self._move(eef_pos, eef_quat, goal, -1.0)[None]

    # ------------------------------------------------------------------ per-object geometry

    @staticmethod
    def _grasp_yaw(name: str, state: dict[str, np.ndarray]) -> float:
        """Gripper yaw (rad, about world z) for the grasp.

        The fingers close along the gripper's y axis, which is world y at yaw 0. They are
        turned perpendicular to the nearest neighbouring object (so a finger does not land on
        it); for boxes, snapped to the nearest face-aligned yaw.
        """
        pos = state[name][:2]
        best, dist = None, 0.15
        for other, pose in state.items():
            if other == name or "/" in other or "region" in other or other.endswith("_side"):
                continue
            d = np.linalg.norm(pose[:2] - pos)
            if 1e-6 < d < dist:
                best, dist = pose[:2] - pos, d
        yaw = 0.0 if best is None else float(np.arctan2(best[1], best[0]))
        if any(k in name for k in _BOX_LIKE):
            box = _yaw(state[name][3:7])
            candidates = [box + k * np.pi / 2 for k in range(-4, 5)]
            yaw = min(candidates, key=lambda c: abs(_wrap_half_pi(c - yaw)))
        return _wrap_half_pi(yaw)


_MAX_HELD_WIDTH_M = 0.07  # finger gap (m) above which the fingers closed on too wide a side
_MUG_RIM_RADIUS_M = 0.05
_MUG_RIM_HEIGHT_M = 0.06


def _grasp_pose(name: str, state: dict[str, np.ndarray], attempt: int) -> tuple[np.ndarray, float | None]:
    """Grasp point relative to the object's body origin (metres) and a yaw override.

    Mugs are grasped by the rim (one finger inside, one outside, fingers radial), tried at
    a different side on each attempt; everything else at the body origin, yaw chosen by
    :meth:`ScriptedExpert._grasp_yaw`.
    """
    if "mug" in name:
        phi = attempt * np.pi / 2
        point = np.array([_MUG_RIM_RADIUS_M * np.cos(phi), _MUG_RIM_RADIUS_M * np.sin(phi), _MUG_RIM_HEIGHT_M])
        return point, phi + np.pi / 2
    return np.zeros(3), None


def _wrap_half_pi(angle: float) -> float:
    """Angle folded into (-pi/2, pi/2]: the gripper is symmetric under a half turn."""
    a = (angle + np.pi / 2) % np.pi - np.pi / 2
    return float(a if a != -np.pi / 2 else np.pi / 2)


_BOX_LIKE = ("cream_cheese", "butter", "book", "pudding")


def expert_factory() -> ControllerFactory:
    """The expert as a controller factory for the evaluation protocol."""

    def make(task: TaskInfo, init_state: int) -> ScriptedExpert:
        from wmrl_libero.suites import goal_predicates

        return ScriptedExpert(goal_predicates(task))

    return ControllerFactory(make=make, name="scripted-expert", privileged=True)

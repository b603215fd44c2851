"""A scripted expert for LIBERO that reads privileged simulator state.

It turns the task's BDDL goal into skills (:mod:`~wmrl_libero.expert.plan`): pick and place
(``In``/``On``; into a microwave by sliding it through the door), turning a stove knob on
(``Turnon``), pushing a drawer shut and swinging a microwave door shut (``Close``), and runs them in order with a proportional controller on
LIBERO's OSC_POSE deltas (:mod:`~wmrl_libero.expert.motion`). Each skill reads where things
are from the privileged state on every step, skips what is already done, and retries a
failed grasp (with a bound), so the expert can also label states a student policy drove
(DAgger).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmrl_libero.controllers import ControllerFactory
from wmrl_libero.expert.close_door import SwingDoorShut
from wmrl_libero.expert.close_drawer import CloseDrawer
from wmrl_libero.expert.motion import OPEN, Hand, move_hand
from wmrl_libero.expert.pick_place import PickPlace
from wmrl_libero.expert.plan import plan_from_goal
from wmrl_libero.expert.slide_in import SlideIn
from wmrl_libero.expert.turn_knob import TurnKnob
from wmrl_libero.suites import TaskInfo

__all__ = [
    "CloseDrawer",
    "PickPlace",
    "ScriptedExpert",
    "SlideIn",
    "SwingDoorShut",
    "TurnKnob",
    "expert_factory",
    "plan_from_goal",
]


@dataclass
class ScriptedExpert:
    """Closed-loop controller: ``act(obs, info) -> (1, 7)``; needs ``info["privileged"]``.

    :param goal: the task's BDDL goal predicates (``LiberoGymEnv.goal_predicates()``).
    :param max_replans: when every skill is finished but the task is not solved
        (``info["success"]`` false: something was undone or misjudged), the plan restarts
        with fresh skills (each skips what is already done), at most this many times.
    """

    goal: list[list[str]]
    max_replans: int = 2
    plan: list = field(init=False)
    unsupported: list[list[str]] = field(init=False)

    def __post_init__(self):
        self._replans = 0
        self.reset()

    def reset(self) -> None:
        """Fresh skills, for a new episode."""
        self.plan, self.unsupported = plan_from_goal(self.goal)

    def current_skill(self):
        return next((s for s in self.plan if not s.finished), None)

    def debug_label(self) -> str:
        skill = self.current_skill()
        return "done" if skill is None else f"{self.plan.index(skill)}:{type(skill).__name__}:{skill.phase}"

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> np.ndarray:
        state = info.get("privileged")
        if state is None:
            raise ValueError("the scripted expert needs privileged state: build the env with privileged_info=True")
        hand = Hand.from_proprio(obs["proprio"])
        skill = self.current_skill()
        if skill is None and not info.get("success", True) and self._replans < self.max_replans:
            self._replans += 1
            self.reset()
            skill = self.current_skill()
        if skill is None:  # done: hold still, open
            return move_hand(hand, hand.pos, hand.yaw, OPEN)[None]
        return skill.act(hand, state)[None]


def expert_factory() -> ControllerFactory:
    """The expert as a controller factory for the evaluation protocol."""

    def make(task: TaskInfo, init_state: int) -> ScriptedExpert:
        from wmrl_libero.suites import goal_predicates

        return ScriptedExpert(goal_predicates(task))

    return ControllerFactory(make=make, name="scripted-expert", privileged=True)

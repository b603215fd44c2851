"""Turn a task's BDDL goal predicates into an ordered list of skills.

Supported: ``In``/``On`` (pick and place; ``In`` a microwave: slid in through its door),
``Turnon`` of a stove, ``Close`` of a cabinet drawer or a microwave door. Not yet: ``Open``,
``Turnoff``, returned as unsupported. Order: knobs are turned first (nothing stands on the stove yet), then objects are placed in
goal order, then doors and drawers are closed (after what goes inside is in). Several
objects ``On`` one region are spread along world x, ``SPREAD_M`` apart, so that each
lands inside the region without touching the others.
"""

from __future__ import annotations

import re

import numpy as np

from wmrl_libero.expert.close_door import SwingDoorShut
from wmrl_libero.expert.close_drawer import CloseDrawer
from wmrl_libero.expert.pick_place import PickPlace
from wmrl_libero.expert.slide_in import SlideIn, mug_outline
from wmrl_libero.expert.turn_knob import TurnKnob

__all__ = ["SPREAD_M", "plan_from_goal"]

# Centre-to-centre distance of objects sharing an ``On`` region: two moka pots (8.2 cm
# across) on a stove's cook region (15 x 15 cm) sit 10 cm apart, 2.5 cm inside its edges.
SPREAD_M = 0.10
_DRAWER_LEVELS = ("_top_region", "_middle_region", "_bottom_region")
# An object put ``In`` an open drawer goes 1 cm towards the drawer's front (world -y for the
# scenes' cabinets) from the region's centre: the part of the drawer outside the cabinet
# runs from the region's front edge (-7.6 cm) to the closed drawer above (about +5.6 cm), so
# a 10.8 cm bowl centred there clears both; it is lowered towards 5 cm below the centre and
# let go when it rests on the floor.
DRAWER_PLACE_OFFSET_M = np.array([0.0, -0.01, -0.05])


def plan_from_goal(goal: list[list[str]]) -> tuple[list, list[list[str]]]:
    """Skills that reach the goal, in execution order, and the predicates no skill handles."""
    knobs, placements, closings, unsupported = [], [], [], []
    for pred in goal:
        kind, args = pred[0].lower(), pred[1:]
        if kind == "in" and len(args) == 2 and _microwave(args[1]) and mug_outline(args[0]) is not None:
            placements.append(SlideIn(args[0], args[1], _microwave(args[1])))
        elif kind in ("in", "on") and len(args) == 2:
            placements.append(PickPlace(args[0], args[1], kind))
        elif kind == "turnon" and "stove" in args[0]:
            knobs.append(TurnKnob(args[0]))
        elif kind == "close" and args[0].endswith(_DRAWER_LEVELS):
            cabinet = next(args[0][: -len(s)] for s in _DRAWER_LEVELS if args[0].endswith(s))
            closings.append(CloseDrawer(args[0], cabinet))
        elif kind == "close" and _microwave(args[0]) == args[0]:
            closings.append(SwingDoorShut(args[0]))
        else:
            unsupported.append(pred)
    pick_places = [p for p in placements if isinstance(p, PickPlace)]
    _spread_shared_targets(pick_places)
    for p in pick_places:
        if p.relation == "in" and p.target.endswith(_DRAWER_LEVELS):
            p.place_offset = DRAWER_PLACE_OFFSET_M.copy()
        if p.relation == "in" and "caddy" in p.target and p.target.endswith("_contain_region"):
            p.align_with = re.match(r"(.*?_\d+)_", p.target).group(1)  # desk_caddy_1_back_... -> desk_caddy_1
    return knobs + placements + closings, unsupported


def _microwave(name: str) -> str | None:
    """The microwave fixture a name belongs to (``microwave_1_heating_region`` -> ``microwave_1``)."""
    match = re.match(r"(microwave_\d+)", name)
    return match.group(1) if match else None


def _spread_shared_targets(placements: list[PickPlace]) -> None:
    """Give objects put ``On`` the same region offsets along world x, centred on the region."""
    by_target: dict[str, list[PickPlace]] = {}
    for p in placements:
        if p.relation == "on":
            by_target.setdefault(p.target, []).append(p)
    for group in by_target.values():
        for i, p in enumerate(group):
            p.place_offset = np.array([(i - (len(group) - 1) / 2) * SPREAD_M, 0.0, 0.0])

"""Registers the CartPole domain with WMRL (entry point ``gymnasium_control`` of group ``wmrl``)."""

from __future__ import annotations

from wmrl_core import hookimpl


@hookimpl
def wmrl_register_environments(table):
    table.add(
        "cartpole-seeds",
        "wmrl_gymnasium_control.environment:CartPoleSeeds",
        description="CartPole-v1 from fixed seeds; an open-loop plan is rolled out in gymnasium",
    )


@hookimpl
def wmrl_register_policies(table):
    table.add(
        "cartpole-linear-plan",
        "wmrl_gymnasium_control.policy:LinearPlanPolicy",
        description="a plan of actions, each step's logits linear in the initial state",
    )


@hookimpl
def wmrl_register_world_models(table):
    table.add(
        "cartpole-lookahead",
        "wmrl_gymnasium_control.world_model:CartPoleLookahead",
        description="CartPole's physics for the first `lookahead` steps, then a guess from the margin",
    )

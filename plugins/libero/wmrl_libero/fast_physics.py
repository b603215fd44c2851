"""A control step of a LIBERO environment with one MuJoCo forward pass per physics substep.

robosuite 1.4.0's ``MujocoEnv.step`` runs, for each of the 25 physics substeps of a 20 Hz
control step: ``sim.forward()``; the controller, whose ``update()`` calls ``sim.forward()``
again on the same state; ``sim.step()`` (``mj_step``, which runs a third forward pass with
the new control before integrating). The first two passes read identical inputs (positions,
velocities, the previous control), so the second is pure repetition; and what the OSC
controller reads (site poses and velocities, Jacobians, the mass matrix, the bias forces) is
fixed by the position and velocity stages alone. MuJoCo's documented split of ``mj_step``
into ``mj_step1`` (position and velocity stages) and ``mj_step2`` (actuation, acceleration,
constraints, integration) therefore computes the same numbers with one pass per substep:
``mj_step1``, the controller, ``mj_step2``.

One exception keeps the result exact: on the first substep of a control step (the "policy
step") robosuite records the wrist force-torque sensor (``recent_ee_forcetorques``), an
acceleration-stage quantity computed by the first forward pass with the previous control.
That substep keeps a full ``mj_forward`` (1 of 25), then ``mj_step2``.

:func:`install_fast_step` replaces the ``step`` method of one environment *instance* (the
robosuite environment inside LIBERO's ``ControlEnv``); installed packages are not modified.
``plugins/libero/tests/test_libero_fast_physics.py`` replays episodes through both paths and
requires bit-identical MuJoCo states and observations.
"""

from __future__ import annotations

import types
import warnings
from typing import Any

import numpy as np

__all__ = ["FAST_STEP_ROBOSUITE", "fast_step", "install_fast_step"]

FAST_STEP_ROBOSUITE = "1.4.0"
"""The robosuite release whose ``MujocoEnv.step`` :func:`fast_step` reproduces."""


def _skip_forward() -> None:
    """Stands in for ``MjSim.forward`` inside the controller: the loop has just run it."""


def fast_step(env: Any, action: np.ndarray):
    """One control step of a LIBERO (``BDDLBaseDomain``) environment, as robosuite 1.4.0's
    ``MujocoEnv.step`` followed by LIBERO's success check, with one forward pass per substep.

    :return: ``(observations, reward, done, info)`` exactly as ``env.step`` would.
    """
    import mujoco

    if env.action_dim == 4 and len(action) > 4:  # LIBERO's OSC_POSITION conversion
        action = np.array(action)
        action = np.concatenate((action[:3], action[-1:]), axis=-1)
    if env.done:
        raise ValueError("executing action in terminated episode")
    env.timestep += 1
    sim = env.sim
    model, data = sim.model._model, sim.data._data
    sim.forward = _skip_forward  # instance attribute: the controllers' update() skips its repeat
    try:
        policy_step = True
        for _ in range(int(env.control_timestep / env.model_timestep)):
            if policy_step:
                mujoco.mj_forward(model, data)  # the force-torque history reads its acceleration stage
            else:
                mujoco.mj_step1(model, data)
            env._pre_action(action, policy_step)
            mujoco.mj_step2(model, data)
            env._update_observables()
            policy_step = False
    finally:
        del sim.forward
    env.cur_time += env.control_timestep
    reward, done, info = env._post_action(action)
    if env.viewer is not None and env.renderer != "mujoco":
        env.viewer.update()
    observations = env.viewer._get_observations() if env.viewer_get_obs else env._get_observations()
    done = env._check_success()
    return observations, reward, done, info


def install_fast_step(env: Any) -> bool:
    """Make ``env.step`` (a LIBERO ``BDDLBaseDomain`` instance) use :func:`fast_step`.

    Installed only where it reproduces the original: robosuite :data:`FAST_STEP_ROBOSUITE`,
    an environment class that does not override LIBERO's ``step``, the Euler integrator
    (``mj_step2`` integrates like ``mj_step`` for it) and no on-screen viewer; otherwise warns
    and leaves the environment as it is.

    :return: whether it was installed.
    """
    import mujoco
    import robosuite
    from libero.libero.envs.bddl_base_domain import BDDLBaseDomain

    reasons = []
    if robosuite.__version__ != FAST_STEP_ROBOSUITE:
        reasons.append(f"robosuite {robosuite.__version__} (the fast step reproduces {FAST_STEP_ROBOSUITE})")
    if type(env).step is not BDDLBaseDomain.step:
        reasons.append(f"{type(env).__name__} overrides step()")
    if env.sim.model._model.opt.integrator != mujoco.mjtIntegrator.mjINT_EULER:
        reasons.append("the model does not use the Euler integrator")
    if env.viewer is not None:
        reasons.append("an on-screen viewer is attached")
    if reasons:
        warnings.warn(f"robosuite's own step is kept: {'; '.join(reasons)}", RuntimeWarning, stacklevel=2)
        return False
    env.step = types.MethodType(fast_step, env)
    return True

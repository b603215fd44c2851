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
Two more repetitions are skipped, with the same results:

- The controller's state read (``Controller.update``: end-effector pose and velocity, joint
  state, Jacobians, mass matrix) goes through robosuite's name look-ups and attribute
  wrappers on every call; :func:`_controller_update` does the same MuJoCo calls and array
  copies with those looked up once per control step. The OSC maths is robosuite's own.
- The observables. robosuite calls every observable's ``update`` on every substep (41 in a
  LIBERO scene, 25 substeps); each one samples its sensor once per sampling period and
  otherwise only advances a timer. :func:`_timer_course` replays that timer (the same float
  operations in the same order) once for each group of observables whose timers agree, and
  the real ``update`` runs only on the substeps where it would sample, in robosuite's order,
  after the timer is set to the value it would have; the final timers are written back.
  Observables with a delayer keep robosuite's per-substep call.
- The arm's action between policy steps. :func:`_substep_action` is ``RobotEnv._pre_action``
  and ``SingleArm.control`` for ``policy_step=False`` with what cannot change within a
  control step (the action's slices, the torque limits, the gripper's actuator ids and
  control-range scaling, all read from the model) computed once per control step instead of
  25 times. For LIBERO's Panda with the OSC_POSE controller the OSC torques and the gripper's
  integrated command are computed by :class:`~wmrl_libero.fast_controller.CompiledArm`
  (compiled kernels around numpy's own matrix products, see there); with ``compiled=False``
  the controller's ``run_controller`` and the gripper's ``format_action`` run on every
  substep, as robosuite runs them.

After the substeps, LIBERO evaluates its goal predicates twice (the reward, then ``done``)
on the same state, and the gym environment twice more; :func:`_success_once` answers the
second from the first, and :class:`~wmrl_libero.gym_env.LiberoGymEnv` takes ``done`` as its
success flag. On every reset robosuite builds a new controller, whose constructor runs two
forward passes before the objects are placed; :func:`_controller_load_without_contacts`
makes them without collision detection (nothing reads their contacts).

``plugins/libero/tests/test_libero_fast_physics.py`` replays whole episodes through both paths
and requires bit-identical MuJoCo states, observations, rewards, success flags, observable
timers and controller state.
"""

from __future__ import annotations

import functools
import types
import warnings
from typing import Any

import numpy as np

__all__ = ["FAST_STEP_ROBOSUITE", "fast_step", "install_fast_step"]

FAST_STEP_ROBOSUITE = "1.4.0"
"""The robosuite release whose ``MujocoEnv.step`` :func:`fast_step` reproduces."""

_SIDE_EFFECT_PREDICATES = frozenset({"turnon", "turnoff"})
"""LIBERO goal predicates that write something (an object's visualisation flag) besides
answering; a goal with one of them is checked as often as LIBERO checks it."""


def _skip_forward() -> None:
    """Stands in for ``MjSim.forward`` inside the controller: the loop has just run it."""


def fast_step(env: Any, action: np.ndarray, *, compiled: bool = True):
    """One control step of a LIBERO (``BDDLBaseDomain``) environment, as robosuite 1.4.0's
    ``MujocoEnv.step`` followed by LIBERO's success check, with one forward pass per substep.

    :param compiled: the arm's substeps compiled (:mod:`wmrl_libero.fast_controller`, where it
        applies) and the goal predicates evaluated once; ``False``: the arm's substeps in
        Python and the predicates evaluated as often as LIBERO does (the first version of this
        step, kept as the speed benchmark's reference). The same numbers either way.
    :return: ``(observations, reward, done, info)`` exactly as ``env.step`` would.
    """
    if env.action_dim == 4 and len(action) > 4:  # LIBERO's OSC_POSITION conversion
        action = np.array(action)
        action = np.concatenate((action[:3], action[-1:]), axis=-1)
    if env.done:
        raise ValueError("executing action in terminated episode")
    env.timestep += 1
    _run_substeps(env, action, compiled)
    env.cur_time += env.control_timestep
    return _after_substeps(env, action, compiled)


def _run_substeps(env: Any, action: np.ndarray, compiled: bool) -> None:
    """The physics substeps of one control step with the robots' controls: robosuite's loop of
    ``_pre_action`` and ``sim.step`` with one forward pass each (see the module docstring)."""
    import mujoco

    sim = env.sim
    model, data = sim.model._model, sim.data._data
    substeps = int(env.control_timestep / env.model_timestep)
    finish_action = _no_finish
    observables = _ObservableSchedule(env, substeps)
    sim.forward = _skip_forward  # instance attribute: the controllers' update() skips its repeat
    controllers = [robot.controller for robot in env.robots]
    for controller in controllers:
        update = _controller_update(controller)
        if update is not None:
            controller.update = update  # instance attribute, removed after the step
    try:
        # the policy step: a full forward pass, since the force-torque history reads its acceleration stage
        mujoco.mj_forward(model, data)
        env._pre_action(action, True)
        mujoco.mj_step2(model, data)
        observables.update(0)
        substep_action, finish_action = _substep_action(env, action, compiled)  # reads the goal the policy step set
        for k in range(1, substeps):
            mujoco.mj_step1(model, data)
            substep_action()
            mujoco.mj_step2(model, data)
            observables.update(k)
    finally:
        del sim.forward
        for controller in controllers:
            controller.__dict__.pop("update", None)
        finish_action()
        observables.finish()


def _after_substeps(env: Any, action: np.ndarray, compiled: bool):
    """robosuite's ``_post_action`` (the reward), the observations and LIBERO's success check
    (``done``), with the goal predicates evaluated once for both (:func:`_success_once`;
    ``compiled=False``: twice, as LIBERO does)."""
    once = _success_once(env) if compiled else None
    if once is not None:
        env._check_success = once  # instance attribute, removed below
    try:
        reward, done, info = env._post_action(action)
        if env.viewer is not None and env.renderer != "mujoco":
            env.viewer.update()
        observations = env.viewer._get_observations() if env.viewer_get_obs else env._get_observations()
        done = env._check_success()
    finally:
        if once is not None:
            del env._check_success
    return observations, reward, done, info


def _success_once(env: Any):
    """``env._check_success`` for the end of one control step: the first call (the reward's)
    evaluates LIBERO's goal predicates, the second (``done``, after ``_post_process``) returns
    the same answer, since the MuJoCo state is the same and the predicates read nothing
    ``_post_process`` writes (it sets visualisation flags and site colours). ``None`` (check
    every time, as LIBERO does) for a goal with a predicate that writes a flag
    (:data:`_SIDE_EFFECT_PREDICATES`: the last check decides what the flag holds after the
    step) or a success check that is not one of LIBERO's problem classes'."""
    check = type(env)._check_success
    goal = env.parsed_problem["goal_state"] if hasattr(env, "parsed_problem") else None
    if "_check_success" in env.__dict__ or goal is None:
        return None  # an instance's own check, or not a BDDL problem
    if not check.__module__.startswith("libero.libero.envs.problems"):
        return None
    if any(str(predicate[0]).lower() in _SIDE_EFFECT_PREDICATES for predicate in goal):
        return None
    answers = []

    def once() -> bool:
        if not answers:
            answers.append(check(env))
        return answers[0]

    return once


def _no_finish() -> None:
    """Nothing to write back: the substeps ran robosuite's own objects."""


def _substep_action(env: Any, action: Any, compiled: bool = True):
    """``env._pre_action(action, policy_step=False)`` as a closure, for the substeps of one
    control step after its policy step, and the function that ends them.

    For LIBERO's single Panda arm with robosuite's OSC_POSE controller it is
    :class:`~wmrl_libero.fast_controller.CompiledArm` (``compiled``, where it applies); for
    another single arm, :func:`_python_substep`; any other robot or override keeps the method call.

    :return: ``(substep, finish)``.
    """
    from wmrl_libero.fast_controller import compiled_arm

    robot = _plain_single_arm(env)
    if robot is None:
        return (lambda: env._pre_action(action, False)), _no_finish
    gripper_action = action[0 : robot.action_dim][robot.controller.control_dim :]
    arm = compiled_arm(env) if compiled else None
    if arm is not None:
        arm.start(gripper_action)
        return arm.substep, arm.finish
    return _python_substep(env, robot, gripper_action), _no_finish


def _plain_single_arm(env: Any):
    """The robot of an environment whose ``_pre_action`` is robosuite 1.4.0's for one
    ``SingleArm`` with a gripper (no override on the way), else ``None``."""
    from libero.libero.envs.bddl_base_domain import BDDLBaseDomain
    from robosuite.environments.robot_env import RobotEnv
    from robosuite.robots.manipulator import Manipulator
    from robosuite.robots.single_arm import SingleArm

    robots = env.robots
    robot = robots[0] if len(robots) == 1 else None
    if (
        robot is None
        or type(env)._pre_action is not BDDLBaseDomain._pre_action
        or super(BDDLBaseDomain, env)._pre_action.__func__ is not RobotEnv._pre_action
        or type(robot).control is not SingleArm.control
        or type(robot).grip_action is not Manipulator.grip_action
        or not robot.has_gripper
    ):
        return None
    return robot


def _python_substep(env: Any, robot: Any, gripper_action: np.ndarray):
    """robosuite 1.4.0's ``RobotEnv._pre_action`` and ``SingleArm.control`` (with
    ``Manipulator.grip_action``) for ``policy_step=False``, line for line, less the dimension
    asserts (the policy step checked the same action) and with the model-constant values
    (torque limits, the gripper's actuator ids and control-range scaling) computed once per
    control step instead of 25 times."""
    controller, gripper = robot.controller, robot.gripper
    ctrl = env.sim.data._data.ctrl
    low, high = robot.torque_limits
    joint_ids = robot._ref_joint_actuator_indexes
    gripper_ids = [env.sim.model.actuator_name2id(actuator) for actuator in gripper.actuators]
    ctrl_range = env.sim.model.actuator_ctrlrange[gripper_ids]
    bias = 0.5 * (ctrl_range[:, 1] + ctrl_range[:, 0])
    weight = 0.5 * (ctrl_range[:, 1] - ctrl_range[:, 0])

    def substep() -> None:
        robot.torques = np.clip(controller.run_controller(), low, high)
        ctrl[gripper_ids] = bias + weight * gripper.format_action(gripper_action)
        ctrl[joint_ids] = robot.torques

    return substep


def _controller_update(controller: Any):
    """robosuite 1.4.0's ``Controller.update`` for one control step, as a function to put on
    the controller instance, or ``None`` where the controller's class overrides it.

    The same arrays from the same MuJoCo calls (``mj_jacSite`` once for the position and once
    for the rotation Jacobian, where robosuite asks twice for each, a deterministic call with
    the same inputs), with the site id, the array views and the index lists looked up once per
    control step instead of through robosuite's name and attribute wrappers on every substep.
    The ``sim.forward()`` that it starts with is the loop's (see :func:`_skip_forward`).
    """
    import mujoco
    from robosuite.controllers.base_controller import Controller

    if type(controller).update is not Controller.update:
        return None
    sim = controller.sim
    model, data = sim.model._model, sim.data._data
    site = sim.model.site_name2id(controller.eef_name)
    nv = model.nv
    site_xpos, site_xmat, qpos, qvel, qM = data.site_xpos, data.site_xmat, data.qpos, data.qvel, data.qM
    qpos_index, qvel_index = controller.qpos_index, controller.qvel_index
    n_qvel = len(qvel)

    def update(force: bool = False) -> None:
        if controller.new_update or force:
            controller.ee_pos = np.array(site_xpos[site])
            controller.ee_ori_mat = np.array(site_xmat[site].reshape([3, 3]))
            jacp, jacr = np.zeros((3, nv)), np.zeros((3, nv))
            mujoco.mj_jacSite(model, data, jacp, None, site)
            mujoco.mj_jacSite(model, data, None, jacr, site)
            controller.ee_pos_vel = np.array(np.dot(jacp, qvel))
            controller.ee_ori_vel = np.array(np.dot(jacr, qvel))
            controller.joint_pos = np.array(qpos[qpos_index])
            controller.joint_vel = np.array(qvel[qvel_index])
            controller.J_pos = np.array(jacp.reshape((3, -1))[:, qvel_index])
            controller.J_ori = np.array(jacr.reshape((3, -1))[:, qvel_index])
            controller.J_full = np.array(np.vstack([controller.J_pos, controller.J_ori]))
            mass_matrix = np.ndarray(shape=(nv, nv), dtype=np.float64, order="C")
            mujoco.mj_fullM(model, mass_matrix, qM)
            mass_matrix = np.reshape(mass_matrix, (n_qvel, n_qvel))
            controller.mass_matrix = mass_matrix[qvel_index, :][:, qvel_index]
            controller.new_update = False

    return update


def _timer_course(elapsed: float, sampled: bool, delay: float, period: float, dt: float, n: int):
    """n calls of robosuite 1.4.0's ``Observable.update(dt, cache)`` on a timer, without the
    sensor: the same float operations as there, for an observable without a delayer.

    :return: ``(samples, after)``: ``samples`` maps each call that reads the sensor to the
        timer ``(elapsed, sampled)`` just before it; ``after[k]`` is the timer after call k.
    """
    samples, after = {}, []
    for k in range(n):
        before = (elapsed, sampled)
        elapsed += dt
        reads = not sampled and period - delay >= elapsed
        if reads:
            sampled, delay = True, 0.0  # NO_DELAY's next delay
        if elapsed >= period:
            if not sampled:  # robosuite's "sampling rate too low" branch reads the sensor too
                reads, delay = True, 0.0
            elapsed %= period
            sampled = False
        if reads:
            samples[k] = before
        after.append((elapsed, sampled))
    return samples, after


class _ObservableSchedule:
    """``env._update_observables()`` on each substep of one control step, calling the real
    ``Observable.update`` only where it reads its sensor (see the module docstring)."""

    def __init__(self, env: Any, substeps: int):
        from robosuite.utils.observables import NO_DELAY

        self._dt, self._cache = env.model_timestep, env._obs_cache
        courses: dict[tuple, tuple] = {}
        self._calls: dict[int, list] = {}  # substep -> [(observable, timer before or None)], robosuite's order
        self._timed: list[tuple] = []  # (observable, course) for the timers written back
        self._done = -1
        for observable in env._observables.values():
            if not observable._enabled:
                continue  # its update() does nothing
            if observable._delayer is not NO_DELAY:
                for k in range(substeps):
                    self._calls.setdefault(k, []).append((observable, None))
                continue
            elapsed = observable._time_since_last_sample
            key = (
                type(elapsed),
                elapsed,
                observable._sampled,
                observable._current_delay,
                observable._sampling_timestep,
            )
            if key not in courses:
                courses[key] = _timer_course(elapsed, key[2], key[3], key[4], self._dt, substeps)
            samples, after = courses[key]
            for k, before in samples.items():
                self._calls.setdefault(k, []).append((observable, before))
            self._timed.append((observable, after))

    def update(self, k: int) -> None:
        """The observables' part of substep k (0-based) of the control step."""
        for observable, before in self._calls.get(k, ()):
            if before is not None:
                observable._time_since_last_sample, observable._sampled = before
            observable.update(timestep=self._dt, obs_cache=self._cache)
        self._done = k

    def finish(self) -> None:
        """Leave every timer as the substeps run so far would have."""
        if self._done < 0:
            return
        for observable, after in self._timed:
            observable._time_since_last_sample, observable._sampled = after[self._done]


def install_fast_step(env: Any, *, compiled: bool = True) -> bool:
    """Make ``env.step`` (a LIBERO ``BDDLBaseDomain`` instance) use :func:`fast_step` (with
    ``compiled``, see there).

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
    env.step = types.MethodType(functools.partial(fast_step, compiled=compiled), env)
    if compiled:
        for robot in env.robots:
            robot._load_controller = _controller_load_without_contacts(robot, robot._load_controller)
    return True


def _controller_load_without_contacts(robot: Any, load):
    """``robot._load_controller`` (run on every reset) with the two forward passes of the new
    controller's constructor made without contacts (:func:`_forward_without_contacts`).

    They run before the reset places the objects, with every object at the model's default
    position (some 1,600 contacts in a LIBERO-10 scene, about 24 ms each, most of a reset's
    cost), and what the constructor reads (the end effector's pose, Jacobians, mass matrix:
    kinematics and inertia) does not depend on contacts. Nothing reads their contact results:
    the reset's next full forward pass (after the objects are placed) recomputes everything
    from positions and velocities, and a forward pass leaves the solver's warm start alone.
    """

    def load_controller() -> None:
        sim = robot.sim
        sim.forward = functools.partial(_forward_without_contacts, sim)  # instance attribute, removed below
        try:
            load()
        finally:
            sim.__dict__.pop("forward", None)

    return load_controller


def _forward_without_contacts(sim: Any) -> None:
    """``mj_forward`` with collision detection disabled for the call (the model's flags are
    restored after it): positions, kinematics, inertia and bias forces as a full pass has them."""
    import mujoco

    model = sim.model._model
    flags = model.opt.disableflags
    model.opt.disableflags = flags | int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    try:
        mujoco.mj_forward(model, sim.data._data)
    finally:
        model.opt.disableflags = flags

"""robosuite 1.4.0's OSC_POSE controller and Panda gripper on the substeps of a control step,
compiled where that cannot change a bit and left to numpy where it could.

Between two policy steps robosuite runs, on each of 24 substeps, ``Controller.update`` (copies
of the end-effector pose, joint state, Jacobians and mass matrix), ``OperationalSpaceController
.run_controller`` (about 20 numpy operations and three calls of robosuite's numba functions)
and the gripper's ``format_action``: some 80 microseconds of Python per substep, most of it
call and allocation overhead around a few hundred floating-point operations.
:class:`CompiledArm` does the same arithmetic with two compiled kernels per substep:

- :func:`_osc_prepare`: the copies (pure data movement, the same values by construction), the
  position and orientation errors and the desired force and torque (elementwise products and
  sums in robosuite's order: IEEE arithmetic, no fused multiply-add, gives the same bits in
  any implementation), and robosuite's own numba ``opspace_matrices`` and
  ``orientation_error``, called on arrays of the layouts robosuite passes them (so the same
  specialisations and the same LAPACK calls run).
- numpy's ``np.dot`` for the five matrix-vector products robosuite does with numpy (the
  end-effector velocities, the decoupled force and torque, the joint torques). These stay in
  numpy on purpose: numba's ``np.dot`` calls the BLAS bundled with scipy, numpy calls its own
  (another OpenBLAS build; 0.3.30 against 0.3.31 here), and a different kernel or summation
  order would change the last bit of a torque.
- :func:`_osc_apply`: gravity compensation, robosuite's numba ``nullspace_torques``, the clip to
  the torque limits, the gripper's integrated command (``format_action``: add ``±speed·sign``,
  clip to [-1, 1]) and the actuator controls.

What robosuite leaves on the controller, robot and gripper after a control step (the last
substep's state read, torques and gripper command) is written back by :meth:`CompiledArm.finish`.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numba
import numpy as np
from robosuite.utils.control_utils import nullspace_torques, opspace_matrices, orientation_error

__all__ = ["CompiledArm", "compiled_arm"]

_ARM_DOF = 7
# CompiledArm's work buffer (float64): where each array starts, in this order, and its size.
_EE_POS = 0  # 3
_EE_ORI = _EE_POS + 3  # 3 x 3
_JOINT_POS = _EE_ORI + 9  # 7
_JOINT_VEL = _JOINT_POS + _ARM_DOF  # 7
_J_POS = _JOINT_VEL + _ARM_DOF  # 3 x 7
_J_ORI = _J_POS + 3 * _ARM_DOF  # 3 x 7
_J_FULL = _J_ORI + 3 * _ARM_DOF  # 6 x 7
_MASS = _J_FULL + 6 * _ARM_DOF  # 7 x 7
_FORCE = _MASS + _ARM_DOF * _ARM_DOF  # 3: the desired force
_TORQUE = _FORCE + 3  # 3: the desired torque
_WORK_SIZE = _TORQUE + 3


@numba.njit(cache=True)
def _views(work):
    """The work buffer's arrays, with the shapes and memory layouts robosuite's arrays have
    (the Jacobians and the mass matrix Fortran-ordered, as its fancy indexing leaves them)."""
    ee_pos = work[_EE_POS:_EE_ORI]
    ee_ori = work[_EE_ORI:_JOINT_POS].reshape((3, 3))
    joint_pos = work[_JOINT_POS:_JOINT_VEL]
    joint_vel = work[_JOINT_VEL:_J_POS]
    j_pos = work[_J_POS:_J_ORI].reshape((7, 3)).T
    j_ori = work[_J_ORI:_J_FULL].reshape((7, 3)).T
    j_full = work[_J_FULL:_MASS].reshape((7, 6)).T
    mass = work[_MASS:_FORCE].reshape((7, 7)).T
    return ee_pos, ee_ori, joint_pos, joint_vel, j_pos, j_ori, j_full, mass


@numba.njit(cache=True)
def _osc_prepare(work, data, site, jacp, jacr, vel_p, vel_r, index, mass_index, goal_pos, goal_ori, kp, kd):
    """``Controller.update`` and ``run_controller`` up to the decoupling products: the state
    copies into ``work``, the desired force and torque into ``work`` (robosuite's expressions
    element by element), and ``opspace_matrices`` on the copies.

    ``data``: MuJoCo's ``(site_xpos, site_xmat, qpos, qvel, qM)``; ``index``: the arm's qpos and
    qvel indexes (2, 7); ``vel_p``, ``vel_r``: numpy's ``jacp @ qvel`` and ``jacr @ qvel``.
    :return: ``(lambda_pos, lambda_ori, nullspace_matrix)`` as ``opspace_matrices`` returns them.
    """
    site_xpos, site_xmat, qpos, qvel, qm = data
    ee_pos, ee_ori, joint_pos, joint_vel, j_pos, j_ori, j_full, mass = _views(work)
    for i in range(3):
        ee_pos[i] = site_xpos[site, i]
        for j in range(3):
            ee_ori[i, j] = site_xmat[site, 3 * i + j]
    for j in range(_ARM_DOF):
        joint_pos[j] = qpos[index[0, j]]
        joint_vel[j] = qvel[index[1, j]]
        for i in range(3):
            j_pos[i, j] = jacp[i, index[1, j]]
            j_ori[i, j] = jacr[i, index[1, j]]
            j_full[i, j] = j_pos[i, j]
            j_full[3 + i, j] = j_ori[i, j]
        for i in range(_ARM_DOF):
            mass[i, j] = qm[mass_index[i, j]]
    ori_error = orientation_error(goal_ori, ee_ori)
    force, torque = work[_FORCE:_TORQUE], work[_TORQUE:_WORK_SIZE]
    for i in range(3):
        # position_error * kp + vel_pos_error * kd, with vel_pos_error = -ee_pos_vel (robosuite's order)
        force[i] = (goal_pos[i] - ee_pos[i]) * kp[i] + (-vel_p[i]) * kd[i]
        torque[i] = ori_error[i] * kp[3 + i] + (-vel_r[i]) * kd[3 + i]
    _, lambda_pos, lambda_ori, nullspace = opspace_matrices(mass, j_full, j_pos, j_ori)
    return lambda_pos, lambda_ori, nullspace


@numba.njit(cache=True)
def _clip(x, low, high):
    """``np.clip`` for one float (NaN passes through, as there)."""
    if x < low:
        return low
    if x > high:
        return high
    return x


@numba.njit(cache=True)
def _osc_apply(
    work, wrench_torques, nullspace, qfrc_bias, index, initial_joint, limits, torques, ctrl, actuators, grip
):
    """The rest of ``run_controller``, ``SingleArm.control``'s clip and the gripper's substep.

    ``wrench_torques``: numpy's ``J_full.T @ decoupled_wrench``; ``limits``: the torque limits
    (2, 7); ``torques``: out, (2, 7): the controller's torques and the clipped ones;
    ``actuators``: the arm's and the gripper's actuator ids; ``grip``: (4, n): the gripper's
    command (updated in place), its per-substep increment, the control range's bias and weight.
    """
    _, _, joint_pos, joint_vel, _, _, _, mass = _views(work)
    arm, fingers = actuators
    for j in range(_ARM_DOF):
        torques[0, j] = wrench_torques[j] + qfrc_bias[index[1, j]]
    torques[0] += nullspace_torques(mass, nullspace, initial_joint, joint_pos, joint_vel)
    for j in range(_ARM_DOF):
        torques[1, j] = _clip(torques[0, j], limits[0, j], limits[1, j])
    for g in range(grip.shape[1]):
        grip[0, g] = _clip(grip[0, g] + grip[1, g], -1.0, 1.0)
        ctrl[fingers[g]] = grip[2, g] + grip[3, g] * grip[0, g]
    for j in range(_ARM_DOF):
        ctrl[arm[j]] = torques[1, j]


def _mass_index(model: Any, qvel_index) -> np.ndarray | None:
    """Where each entry of the arm's block of the dense mass matrix sits in MuJoCo's sparse
    ``qM`` (``mj_fullM`` only copies entries, so gathering them is the same matrix), or
    ``None`` if the block has an entry that is structurally zero."""
    probe = np.arange(1, model.nM + 1, dtype=np.float64)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, full, probe)
    block = full[np.ix_(qvel_index, qvel_index)]
    if np.any(block == 0):
        return None
    return block.astype(np.int64) - 1


class CompiledArm:
    """The compiled substep of one robosuite ``SingleArm`` with an OSC_POSE controller and a
    Panda gripper (built by :func:`compiled_arm`, which checks that it applies).

    Per control step: :meth:`start` after the policy step (reads the goal, the gains and the
    gripper command it set), :meth:`substep` on each later substep, :meth:`finish` at the end.
    """

    def __init__(self, env: Any, robot: Any, mass_index: np.ndarray):
        self.robot, self.controller, self.gripper = robot, robot.controller, robot.gripper
        self.sim = env.sim
        model, data = self.sim.model._model, self.sim.data._data
        self.model, self.data = model, data
        controller = self.controller
        self.site = self.sim.model.site_name2id(controller.eef_name)
        self.index = np.array([controller.qpos_index, controller.qvel_index], dtype=np.int64)
        self.mass_index = mass_index
        low, high = robot.torque_limits
        self.limits = np.array([low, high], dtype=np.float64)
        fingers = [self.sim.model.actuator_name2id(a) for a in self.gripper.actuators]
        self.actuators = (
            np.asarray(robot._ref_joint_actuator_indexes, dtype=np.int64),
            np.asarray(fingers, dtype=np.int64),
        )
        ctrl_range = self.sim.model.actuator_ctrlrange[fingers]
        self.grip = np.zeros((4, len(fingers)))
        self.grip[2] = 0.5 * (ctrl_range[:, 1] + ctrl_range[:, 0])
        self.grip[3] = 0.5 * (ctrl_range[:, 1] - ctrl_range[:, 0])
        self.jacp, self.jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        self.work = np.zeros(_WORK_SIZE)
        self.j_full = self.work[_J_FULL:_MASS].reshape((7, 6)).T  # numpy's view of the kernel's J_full
        self.torques = np.zeros((2, _ARM_DOF))

    def start(self, gripper_action: np.ndarray) -> None:
        """Read what the policy step set: the goal, gains, the gripper's command and increment
        (``np.array([-1.0, 1.0]) * speed * np.sign(action)``, robosuite's expression)."""
        controller, data = self.controller, self.data
        self.goal = (np.array(controller.goal_pos), np.array(controller.goal_ori))
        self.gains = (controller.kp, controller.kd)
        self.initial_joint = np.ascontiguousarray(controller.initial_joint, dtype=np.float64)
        self.grip[0] = self.gripper.current_action
        self.grip[1] = np.array([-1.0, 1.0]) * self.gripper.speed * np.sign(gripper_action)
        self.arrays = (data.site_xpos, data.site_xmat, data.qpos, data.qvel, data.qM)
        self.qvel, self.qfrc_bias, self.ctrl = data.qvel, data.qfrc_bias, data.ctrl
        self.substeps = 0

    def substep(self) -> None:
        """One substep's controls (after ``mj_step1``): ``SingleArm.control`` with
        ``policy_step=False``, the same numbers as robosuite's."""
        jacp, jacr = self.jacp, self.jacr
        mujoco.mj_jacSite(self.model, self.data, jacp, jacr, self.site)
        self.vel = (np.dot(jacp, self.qvel), np.dot(jacr, self.qvel))
        (goal_pos, goal_ori), (kp, kd) = self.goal, self.gains
        lambda_pos, lambda_ori, nullspace = _osc_prepare(
            self.work,
            self.arrays,
            self.site,
            jacp,
            jacr,
            *self.vel,
            self.index,
            self.mass_index,
            goal_pos,
            goal_ori,
            kp,
            kd,
        )
        work = self.work
        wrench = np.concatenate([np.dot(lambda_pos, work[_FORCE:_TORQUE]), np.dot(lambda_ori, work[_TORQUE:])])
        _osc_apply(
            work,
            np.dot(self.j_full.T, wrench),
            nullspace,
            self.qfrc_bias,
            self.index,
            self.initial_joint,
            self.limits,
            self.torques,
            self.ctrl,
            self.actuators,
            self.grip,
        )
        self.substeps += 1

    def finish(self) -> None:
        """Leave on the controller, robot and gripper what robosuite's last substep leaves."""
        if not self.substeps:
            return
        c, work = self.controller, self.work
        c.ee_pos = work[_EE_POS:_EE_ORI].copy()
        c.ee_ori_mat = work[_EE_ORI:_JOINT_POS].reshape((3, 3)).copy()
        c.ee_pos_vel, c.ee_ori_vel = self.vel
        c.joint_pos = work[_JOINT_POS:_JOINT_VEL].copy()
        c.joint_vel = work[_JOINT_VEL:_J_POS].copy()
        c.J_pos = work[_J_POS:_J_ORI].reshape((7, 3)).T.copy(order="F")
        c.J_ori = work[_J_ORI:_J_FULL].reshape((7, 3)).T.copy(order="F")
        c.J_full = self.j_full.copy(order="F")
        c.mass_matrix = work[_MASS:_FORCE].reshape((7, 7)).T.copy(order="F")
        c.torques = self.torques[0].copy()
        c.new_update = True
        self.robot.torques = self.torques[1].copy()
        self.gripper.current_action = self.grip[0].copy()


def compiled_arm(env: Any) -> CompiledArm | None:
    """A :class:`CompiledArm` for ``env``'s robot, or ``None`` where it would not reproduce
    robosuite: another controller, impedance mode or interpolator, coupled position and
    orientation, robosuite's numba disabled (its functions would run as numpy), another
    gripper, or a mass-matrix block with structural zeros. Cached on ``env`` for its robot's
    current controller (robosuite builds a new one on every reset)."""
    robot = env.robots[0]
    cached = env.__dict__.get("_wmrl_compiled_arm")
    if cached is not None and cached.controller is robot.controller and cached.sim is env.sim:
        return cached
    arm = _build(env, robot)
    env.__dict__["_wmrl_compiled_arm"] = arm
    return arm


def _build(env: Any, robot: Any) -> CompiledArm | None:
    """A :class:`CompiledArm` if ``robot`` is the configuration it reproduces (see :func:`compiled_arm`)."""
    from robosuite.controllers.base_controller import Controller
    from robosuite.controllers.osc import OperationalSpaceController
    from robosuite.models.grippers.panda_gripper import PandaGripper

    controller = robot.controller
    exact = (
        type(controller) is OperationalSpaceController
        and type(controller).update is Controller.update
        and "run_controller" not in controller.__dict__
        and "format_action" not in robot.gripper.__dict__
        and controller.impedance_mode == "fixed"
        and controller.interpolator_pos is None
        and controller.interpolator_ori is None
        and controller.uncoupling
        and controller.control_dim == 6
        and len(controller.qvel_index) == _ARM_DOF
        and type(robot.gripper) is PandaGripper
        and all(isinstance(f, numba.core.registry.CPUDispatcher) for f in (opspace_matrices, orientation_error))
        and isinstance(nullspace_torques, numba.core.registry.CPUDispatcher)
    )
    if not exact:
        return None
    mass_index = _mass_index(env.sim.model._model, list(controller.qvel_index))
    return None if mass_index is None else CompiledArm(env, robot, mass_index)

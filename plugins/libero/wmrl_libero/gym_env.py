"""One LIBERO task behind the gymnasium API.

``reset(seed=, options={"init_state": i})`` restores stored init state ``i`` (one of 50 per
task; drawn with the env's RNG when not given) and lets objects settle for
``settle_steps`` no-op steps (the LIBERO evaluation convention; they do not count towards
the episode limit). ``step(action)`` takes a 7-dim action in [-1, 1]: end-effector position
delta (3), rotation delta as axis-angle (3), gripper (-1 open, +1 close), LIBERO's OSC_POSE
controller at 20 Hz. With ``action_chunk=k`` an action is ``(k, 7)`` and runs k control
steps (stopping early at success). Success is LIBERO's own goal predicate check;
``terminated`` is success, ``truncated`` is the episode limit (520 steps for LIBERO-10).

Observations (a ``Dict`` space):

- ``proprio`` (16,) float32: eef position (3, m), eef quaternion (4, xyzw), gripper finger
  positions (2, m), arm joint angles (7, rad).
- ``object_state`` (task-dependent,) float32: LIBERO's ``object-state`` vector (pose of every
  object, and pose relative to the end effector); ``include_object_state=False`` drops it.
- ``agentview_image`` / ``wrist_image`` (H, W, 3) uint8, upright, only when ``image_size``
  is set; ``image_size=None`` is physics only (no renderer, about 10x faster on CPU).

``info["privileged"]`` (when ``privileged_info=True``) maps every object, fixture and
region site of the scene to its world pose ``[x, y, z, qx, qy, qz, qw]`` and every
articulated object to its joint positions; the scripted expert uses it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from wmrl_libero.fast_physics import install_fast_step
from wmrl_libero.runtime import import_libero
from wmrl_libero.suites import MAX_EPISODE_STEPS, load_init_states, task_info

__all__ = ["LiberoGymEnv", "ACTION_DIM", "PROPRIO_DIM", "NOOP_ACTION"]

ACTION_DIM = 7
PROPRIO_DIM = 16
NOOP_ACTION = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float32)
_CAMERAS = {"agentview_image": "agentview", "wrist_image": "robot0_eye_in_hand"}


class LiberoGymEnv(gym.Env):
    """A LIBERO task as a ``gymnasium.Env``.

    :param suite: LIBERO suite name (``libero_10``, ``libero_spatial``, ...).
    :param task_index: task of the suite, 0-based in LIBERO's order.
    :param image_size: side of the square camera images in pixels; ``None``: physics only.
    :param include_object_state: add the ``object_state`` vector to observations.
    :param action_chunk: control steps per ``step`` call; 1 means plain (7,) actions.
    :param max_episode_steps: control-step limit; default the suite's (520 for LIBERO-10).
    :param settle_steps: no-op control steps after each reset, not counted.
    :param privileged_info: put the scene's object poses in ``info["privileged"]``.
    :param fast_physics: step with one MuJoCo forward pass per physics substep and the arm's
        controller compiled (:mod:`wmrl_libero.fast_physics`, :mod:`wmrl_libero.fast_controller`;
        bit-identical states, 1.4-1.6x less CPU per control step than the Python substeps);
        ``"python"``: the fast step with the Python substeps and LIBERO's goal predicates
        checked four times a step (the speed benchmark's "today"); ``False`` keeps robosuite's
        own step (the reference the exactness tests compare against).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        suite: str = "libero_10",
        task_index: int = 0,
        *,
        image_size: int | None = None,
        include_object_state: bool = True,
        action_chunk: int = 1,
        max_episode_steps: int | None = None,
        settle_steps: int = 10,
        privileged_info: bool = False,
        render_mode: str | None = None,
        fast_physics: bool | str = True,
    ):
        if action_chunk < 1:
            raise ValueError(f"action_chunk must be >= 1, got {action_chunk}")
        if image_size is not None and image_size < 8:
            raise ValueError(f"image_size must be >= 8 pixels or None (physics only), got {image_size}")
        if render_mode is not None and image_size is None:
            raise ValueError("render_mode='rgb_array' needs cameras: set image_size")
        import_libero()
        from libero.libero.envs.env_wrapper import ControlEnv

        self.task = task_info(suite, task_index)
        self.suite, self.task_index = suite, task_index
        self.image_size = image_size
        self.include_object_state = include_object_state
        self.action_chunk = action_chunk
        self.max_episode_steps = max_episode_steps or MAX_EPISODE_STEPS.get(suite, 600)
        self.settle_steps = settle_steps
        self.privileged_info = privileged_info
        self.render_mode = render_mode
        self.language_instruction = self.task.language
        self.init_states = load_init_states(suite, task_index)
        cameras = image_size is not None
        self._env = ControlEnv(
            bddl_file_name=self.task.bddl_file,
            has_renderer=False,
            has_offscreen_renderer=cameras,
            use_camera_obs=cameras,
            camera_names=list(_CAMERAS.values()),
            camera_heights=image_size or 128,
            camera_widths=image_size or 128,
            # The init state overwrites the whole sim state, so re-parsing the XML on every
            # reset (hard_reset=True, about 4 s) buys nothing.
            hard_reset=False,
            ignore_done=True,
        )
        if fast_physics not in (True, False, "python"):
            raise ValueError(f"fast_physics must be True, False or 'python', got {fast_physics!r}")
        compiled = fast_physics != "python"
        self.fast_physics = bool(fast_physics) and install_fast_step(self._env.env, compiled=compiled)
        self._reuse_success = self.fast_physics and compiled  # the step's own check stands for is_success()
        self._env.seed(0)
        raw = self._env.reset()
        self._elapsed = 0
        self._last_raw = raw
        obs_spaces: dict[str, spaces.Space] = {
            "proprio": spaces.Box(-np.inf, np.inf, (PROPRIO_DIM,), np.float32),
        }
        if include_object_state:
            n = int(np.asarray(raw["object-state"]).shape[0])
            obs_spaces["object_state"] = spaces.Box(-np.inf, np.inf, (n,), np.float32)
        if cameras:
            for key in _CAMERAS:
                obs_spaces[key] = spaces.Box(0, 255, (image_size, image_size, 3), np.uint8)
        self.observation_space = spaces.Dict(obs_spaces)
        shape = (ACTION_DIM,) if action_chunk == 1 else (action_chunk, ACTION_DIM)
        self.action_space = spaces.Box(-1.0, 1.0, shape, np.float32)

    # ------------------------------------------------------------------ observations

    def _observe(self, raw: dict[str, Any]) -> dict[str, np.ndarray]:
        proprio = np.concatenate(
            [raw["robot0_eef_pos"], raw["robot0_eef_quat"], raw["robot0_gripper_qpos"], raw["robot0_joint_pos"]]
        ).astype(np.float32)
        obs = {"proprio": proprio}
        if self.include_object_state:
            obs["object_state"] = np.asarray(raw["object-state"], dtype=np.float32)
        if self.image_size is not None:
            for key, cam in _CAMERAS.items():
                # robosuite renders bottom-up (OpenGL); flip to the usual top-down layout
                obs[key] = np.ascontiguousarray(raw[f"{cam}_image"][::-1])
        return obs

    def privileged_state(self) -> dict[str, np.ndarray]:
        """World pose ``[x, y, z, qx, qy, qz, qw]`` of every object, fixture and region site,
        and ``<name>/joints`` (joint positions) of every articulated object."""
        inner = self._env.env
        state: dict[str, np.ndarray] = {}
        for name, obj_state in inner.object_states_dict.items():
            geom = obj_state.get_geom_state()
            quat = np.asarray(geom["quat"], dtype=np.float64)
            if getattr(obj_state, "object_state_type", "") != "site":
                quat = quat[[1, 2, 3, 0]]  # MuJoCo body quaternions are wxyz; sites come as xyzw
            state[name] = np.concatenate([geom["pos"], quat]).astype(np.float64)
            # hinge/slide joints only (one qpos each); free joints of movable objects are poses
            joints = [inner.sim.data.get_joint_qpos(j) for j in (getattr(inner.get_object(name), "joints", None) or [])]
            hinges = [float(q) for q in joints if np.size(q) == 1]
            if hinges:
                state[f"{name}/joints"] = np.asarray(hinges, dtype=np.float64)
        return state

    def sim_state(self) -> np.ndarray:
        """The flattened MuJoCo state (time, qpos, qvel), as in LIBERO's stored init states."""
        return np.asarray(self._env.get_sim_state(), dtype=np.float64)

    def goal_predicates(self) -> list[list[str]]:
        """The task's BDDL goal, e.g. ``[["in", "alphabet_soup_1", "basket_1_contain_region"]]``."""
        return [list(p) for p in self._env.env.parsed_problem["goal_state"]]

    def is_success(self) -> bool:
        """LIBERO's own check of the goal predicates in the current state."""
        return bool(self._env.check_success())

    def _info(self, success: bool | None = None) -> dict[str, Any]:
        """``success``: the check the last step already made (the state has not changed since);
        ``None`` evaluates LIBERO's goal predicates."""
        if success is None:
            success = self.is_success()
        info: dict[str, Any] = {"success": bool(success), "elapsed_steps": self._elapsed}
        if self.privileged_info:
            info["privileged"] = self.privileged_state()
        return info

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        index = options.get("init_state")
        if index is None:
            index = int(self.np_random.integers(len(self.init_states)))
        if not 0 <= int(index) < len(self.init_states):
            raise ValueError(f"init_state must be in 0..{len(self.init_states) - 1}, got {index}")
        self.init_state_index = int(index)
        self._env.seed(int(self.np_random.integers(2**31 - 1)))
        self._env.reset()
        # The gripper's command integrates the gripper actions (robosuite's format_action) and
        # only a model build (hard reset) zeroes it: without this line an episode would start
        # with the previous episode's gripper command, and its outcome would depend on what
        # the environment ran before.
        for robot in self._env.env.robots:
            if getattr(robot, "gripper", None) is not None:
                robot.gripper.current_action = np.zeros(robot.gripper.dof)
        raw = self._env.set_init_state(self.init_states[self.init_state_index])
        for _ in range(self.settle_steps):
            raw, _, _, _ = self._env.step(NOOP_ACTION)
        self._elapsed = 0
        self._last_raw = raw
        info = self._info()
        info["init_state"] = self.init_state_index
        return self._observe(raw), info

    def step(self, action):
        actions = np.asarray(action, dtype=np.float64).reshape(-1, ACTION_DIM)
        if actions.shape[0] != self.action_chunk:
            raise ValueError(f"expected {self.action_space.shape} action, got shape {np.shape(action)}")
        success = False
        raw = self._last_raw
        for a in actions:
            # LIBERO's step returns its own success check of the state it leaves (``done``)
            raw, _, done, _ = self._env.step(np.clip(a, -1.0, 1.0))
            self._elapsed += 1
            success = bool(done) if self._reuse_success else self.is_success()
            if success or self._elapsed >= self.max_episode_steps:
                break
        self._last_raw = raw
        info = self._info(success if self._reuse_success else None)
        truncated = (not success) and self._elapsed >= self.max_episode_steps
        return self._observe(raw), float(success), success, truncated, info

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        return np.ascontiguousarray(self._last_raw["agentview_image"][::-1])

    def close(self):
        if getattr(self, "_env", None) is not None:
            self._env.close()
            self._env = None

"""The fast control step, the asynchronous schedule and chunked round trips leave every
episode bit-identical.

Whole episodes (a stored init state and a fixed action sequence to the episode limit, or the
scripted expert closed loop to success, once on a task whose goal turns a stove on) are
replayed through robosuite's own step and through :func:`wmrl_libero.fast_physics.fast_step`
(with the compiled arm, :mod:`wmrl_libero.fast_controller`, and in its Python version), and
through the lockstep and the asynchronous episode runner with one action or a whole chunk per
round trip; MuJoCo states, observations, rewards and success flags must be equal with
``np.array_equal``, not approximately, and so must every observable's sampling timer,
robosuite's observation cache and the scene's visualisation flags after every step. Skipped
without LIBERO, failed under ``CI=true``.
"""

import numpy as np
import pytest
from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require

pytestmark = pytest.mark.slow


def _need_libero():
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")


def _physics(env) -> dict[str, np.ndarray]:
    """Every part of the MuJoCo state that the next step reads, the sensors, and robosuite's
    observables: each one's sampling timer, its current value and the observation cache."""
    data = env._env.env.sim.data._data
    robot = env._env.env.robots[0]
    observables = {}
    for name, observable in env._env.env._observables.items():
        observables[f"timer {name}"] = np.array(
            [observable._time_since_last_sample, observable._sampled, observable._current_delay]
        )
        observables[f"value {name}"] = np.asarray(observable._current_observed_value).copy()
    for name, value in env._env.env._obs_cache.items():
        observables[f"cache {name}"] = np.asarray(value).copy()
    return (
        observables
        | _visualisation(env)
        | _controller_state(env)
        | {
            "time": np.array([data.time]),
            "qpos": data.qpos.copy(),
            "qvel": data.qvel.copy(),
            "act": data.act.copy(),
            "ctrl": data.ctrl.copy(),
            "qacc_warmstart": data.qacc_warmstart.copy(),
            "sensordata": data.sensordata.copy(),
            "gripper_command": np.asarray(robot.gripper.current_action).copy(),
            "ee_forcetorque_history": robot.recent_ee_forcetorques.current.copy(),
        }
    )


_CONTROLLER_STATE = (
    "ee_pos ee_ori_mat ee_pos_vel ee_ori_vel joint_pos joint_vel J_pos J_ori J_full mass_matrix torques "
    "goal_pos goal_ori initial_joint initial_ee_pos initial_ee_ori_mat"
).split()


def _controller_state(env) -> dict[str, np.ndarray]:
    """What the OSC controller and the arm hold after a step (the compiled arm writes it back at
    the end of the step) or a reset (its constructor's state read)."""
    robot = env._env.env.robots[0]
    state = {f"controller {name}": np.array(getattr(robot.controller, name)) for name in _CONTROLLER_STATE}
    return state | {"robot torques": np.array(robot.torques)}


def _visualisation(env) -> dict[str, np.ndarray]:
    """What LIBERO's goal predicates and ``_post_process`` write besides answering: the objects'
    visualisation flags (a stove's burner) and the sites' colours."""
    inner = env._env.env
    flags = {}
    for name in inner.visualization_sites_list:
        for key, (site, visible) in inner.get_object(name).object_properties["vis_site_names"].items():
            flags[f"flag {name} {key} {site}"] = np.array([visible])
    return flags | {"site_rgba": inner.sim.model.site_rgba.copy()}


def _assert_same_step(t, ref, new):
    (obs_a, r_a, te_a, tr_a, info_a), (obs_b, r_b, te_b, tr_b, info_b) = ref[0], new[0]
    assert (r_a, te_a, tr_a, info_a["success"]) == (r_b, te_b, tr_b, info_b["success"]), f"step {t}"
    assert obs_a.keys() == obs_b.keys()
    for key in obs_a:
        assert np.array_equal(obs_a[key], obs_b[key]), f"step {t}: observation {key} differs"
    assert ref[1].keys() == new[1].keys(), f"step {t}: observables or cache entries differ"
    for key, value in ref[1].items():
        assert np.array_equal(value, new[1][key]), f"step {t}: {key} differs"
    for key, value in ref[2].items():  # robosuite's own observation dict, every key
        assert np.array_equal(value, new[2][key]), f"step {t}: raw observation {key} differs"


def _replay_both(task_index: int, init_state: int, steps: int, actions_from, fast=True) -> tuple[int, bool]:
    """Run one episode in two environments of the task, robosuite's step and the fast one
    (``fast``: its ``fast_physics`` setting); ``actions_from(obs, info)`` gives each action from
    the reference environment's observation (a closed-loop recording).

    :return: the steps compared and whether the episode succeeded."""
    from wmrl_libero.fast_controller import compiled_arm
    from wmrl_libero.gym_env import LiberoGymEnv

    ref = LiberoGymEnv("libero_10", task_index, fast_physics=False, privileged_info=True)
    new = LiberoGymEnv("libero_10", task_index, fast_physics=fast, privileged_info=True)
    try:
        assert new.fast_physics and not ref.fast_physics
        assert compiled_arm(new._env.env) is not None, "the compiled arm does not apply: nothing of it is tested"
        obs, info = ref.reset(seed=7, options={"init_state": init_state})
        obs_new, _ = new.reset(seed=7, options={"init_state": init_state})
        assert all(np.array_equal(obs[k], obs_new[k]) for k in obs)
        after_reset = _physics(new)  # the fast reset builds the controller without contacts
        for key, value in _physics(ref).items():
            assert np.array_equal(value, after_reset[key]), f"after the reset: {key} differs"
        for t in range(steps):
            action = actions_from(obs, info)
            a = ref.step(action)
            b = new.step(action)
            _assert_same_step(t, (a, _physics(ref), ref._last_raw), (b, _physics(new), new._last_raw))
            obs, info = a[0], a[4]
            if a[2] or a[3]:
                return t + 1, bool(a[2])
        return steps, False
    finally:
        ref.close()
        new.close()


def _expert(task_index: int):
    """The scripted expert for a LIBERO-10 task, and the list its gripper commands go to."""
    from wmrl_libero.expert import ScriptedExpert
    from wmrl_libero.gym_env import LiberoGymEnv

    probe = LiberoGymEnv("libero_10", task_index)
    goal = probe.goal_predicates()
    probe.close()
    expert = ScriptedExpert(goal)
    gripper_closed = []

    def act(obs, info):
        action = expert.act(obs, info)[0]
        gripper_closed.append(action[6] > 0)
        return action

    return act, gripper_closed


def test_fast_step_replays_scripted_expert_episodes_to_success_bit_for_bit():
    """Two whole episodes to success (the reward and success flag turn 1 at the same step):
    a pick-and-place, and turning the stove on (a goal predicate with a side effect)."""
    _need_libero()
    for task_index in (0, 2):
        act, gripper_closed = _expert(task_index)
        steps, success = _replay_both(task_index, 0, 520, act)
        assert success and steps >= 100, f"task {task_index}: the expert should succeed ({steps} steps)"
        assert any(gripper_closed), "the recording should include a grasp"


def test_fast_step_replays_noisy_whole_episodes_bit_for_bit():
    """Noisy actions to the episode limit (520 steps, truncated), the gripper toggling often."""
    _need_libero()
    from wmrl_libero.gym_env import NOOP_ACTION

    for task_index, init_state in ((3, 5), (9, 2)):
        rng = np.random.default_rng(task_index)
        actions = np.clip(NOOP_ACTION + rng.normal(0, 0.5, (520, 7)), -1, 1)
        it = iter(actions)
        steps, success = _replay_both(task_index, init_state, len(actions), lambda obs, info, it=it: next(it))
        assert (steps, success) == (len(actions), False)


def test_python_substeps_replay_bit_for_bit():
    """The fast step's Python version (the speed benchmark's "today") is exact too."""
    _need_libero()
    from wmrl_libero.gym_env import NOOP_ACTION

    rng = np.random.default_rng(4)
    actions = np.clip(NOOP_ACTION + rng.normal(0, 0.5, (60, 7)), -1, 1)
    it = iter(actions)
    assert _replay_both(4, 1, len(actions), lambda obs, info: next(it), fast="python") == (len(actions), False)


class _Recorder:
    """Replays one action per step and records what it was shown (state before each action)."""

    def __init__(self, actions):
        self.actions, self.t = actions, 0
        self.sim_states, self.obs = [], []

    def act(self, obs, info):
        self.sim_states.append(info["sim_state"])
        self.obs.append({k: v.copy() for k, v in obs.items()})
        action = self.actions[min(self.t, len(self.actions) - 1)]
        self.t += 1
        return action[None]


def test_async_runner_with_fast_step_gives_the_lockstep_runners_episodes():
    """Five recorded episodes on two workers: robosuite's step in lockstep against the fast step
    with workers that do not wait for each other (so slots take the jobs in another order)."""
    _need_libero()
    from wmrl_libero.controllers import ControllerFactory
    from wmrl_libero.episode_runner import EpisodeJob, run_episodes
    from wmrl_libero.gym_env import NOOP_ACTION

    rng = np.random.default_rng(0)
    jobs = [
        EpisodeJob("libero_10", t, s, seed=s, max_episode_steps=n, record_sim_state=True, record_states=True)
        for t, s, n in ((0, 0, 40), (0, 3, 25), (4, 1, 35), (4, 2, 20), (0, 7, 30))
    ]
    actions = [np.clip(NOOP_ACTION + rng.normal(0, 0.4, (j.max_episode_steps, 7)), -1, 1) for j in jobs]
    factory = ControllerFactory(make=None, name="replay")
    runs = {}
    for name, setting in {
        "before": dict(schedule="lockstep", fast_physics=False),
        "after": dict(schedule="async", fast_physics=True),
    }.items():
        recorders = [_Recorder(a) for a in actions]
        results = run_episodes(jobs, factory, num_workers=2, controllers=recorders, **setting)
        runs[name] = (results, recorders)
    for (a, ra), (b, rb) in zip(zip(*runs["before"]), zip(*runs["after"])):
        assert (
            (a.status, a.success, a.steps) == (b.status, b.success, b.steps) == ("ok", False, a.job.max_episode_steps)
        )
        assert len(ra.sim_states) == len(rb.sim_states) == a.steps
        for t, (x, y) in enumerate(zip(ra.sim_states, rb.sim_states)):
            assert np.array_equal(x, y), f"{a.job}: MuJoCo state (time, qpos, qvel) before step {t} differs"
        for t, (x, y) in enumerate(zip(ra.obs, rb.obs)):
            assert all(np.array_equal(x[k], y[k]) for k in x), f"{a.job}: observation before step {t} differs"
        for key in ("proprio", "object_state"):  # includes the state after the final action
            assert all(np.array_equal(x, y) for x, y in zip(a.states[key], b.states[key]))
        assert a.cpu_s > 0 and b.cpu_s > 0


def test_an_episode_does_not_depend_on_what_its_environment_ran_before():
    """robosuite keeps the gripper's integrated command across soft resets; the env zeroes it,
    so an episode replayed after another one is the same as in a fresh environment."""
    _need_libero()
    from wmrl_libero.gym_env import NOOP_ACTION, LiberoGymEnv

    rng = np.random.default_rng(1)
    actions = np.clip(NOOP_ACTION + rng.normal(0, 0.5, (30, 7)), -1, 1)

    def episode(env, init_state):
        obs, _ = env.reset(seed=0, options={"init_state": init_state})
        states = [obs["proprio"]]
        for a in actions:
            states.append(env.step(a)[0]["proprio"])
        return np.array(states)

    env = LiberoGymEnv("libero_10", 0)
    try:
        fresh = episode(env, 1)
        episode(env, 0)  # leaves the gripper command somewhere else
        again = episode(env, 1)
    finally:
        env.close()
    assert np.array_equal(fresh, again)


class _ChunkRecorder:
    """Replays a fixed action sequence in chunks of ``size`` and records what it was shown
    each time it acts (the observation and the MuJoCo state before the chunk)."""

    def __init__(self, actions, size: int):
        self.actions, self.size, self.t = actions, size, 0
        self.seen = []

    def act(self, obs, info):
        self.seen.append((info.get("sim_state"), {k: v.copy() for k, v in obs.items()}, info["elapsed_steps"]))
        chunk = self.actions[self.t : self.t + self.size]
        self.t += self.size
        return chunk if len(chunk) else self.actions[-1:]


def _expert_actions(task_index: int, init_state: int) -> np.ndarray:
    """The scripted expert's actions of one successful episode, recorded closed loop."""
    from wmrl_libero.gym_env import LiberoGymEnv

    act, _ = _expert(task_index)
    env = LiberoGymEnv("libero_10", task_index, privileged_info=True)
    try:
        obs, info = env.reset(seed=init_state, options={"init_state": init_state})
        actions = []
        for _ in range(env.max_episode_steps):
            actions.append(act(obs, info))
            obs, _, terminated, truncated, info = env.step(actions[-1])
            if terminated or truncated:
                break
    finally:
        env.close()
    assert terminated, "the expert should succeed"
    return np.array(actions, dtype=np.float32)


def test_chunked_round_trips_give_the_one_action_round_trips_episodes():
    """Chunks of several sizes, an episode that succeeds inside a chunk (the expert's actions
    replayed open loop), one truncated inside a chunk and one cut by ``stop_after`` inside a
    chunk: every step's state, every observation and MuJoCo state a controller is shown, and
    every outcome equal with chunks, with one action per round trip, and in-process."""
    _need_libero()
    from wmrl_libero.controllers import ControllerFactory
    from wmrl_libero.episode_runner import EpisodeJob, run_episodes
    from wmrl_libero.gym_env import NOOP_ACTION

    rng = np.random.default_rng(3)
    expert = _expert_actions(0, 0)
    size = 8 if len(expert) % 8 else 7  # the success falls inside a chunk
    jobs = [
        EpisodeJob("libero_10", 0, 0, seed=0, record_states=True),
        EpisodeJob("libero_10", 4, 1, seed=1, max_episode_steps=23, record_states=True, record_sim_state=True),
        EpisodeJob("libero_10", 0, 3, seed=3, record_states=True, stop_after=17),
        EpisodeJob("libero_10", 4, 2, seed=2, max_episode_steps=9, record_states=True, record_sim_state=True),
    ]
    noisy = [np.clip(NOOP_ACTION + rng.normal(0, 0.4, (30, 7)), -1, 1).astype(np.float32) for _ in range(3)]
    plans = [(expert, size), (noisy[0], 5), (noisy[1], 6), (noisy[2], 1)]
    factory = ControllerFactory(make=None, name="replay", privileged=True)
    runs = {}
    for name, setting in {
        "one action per round trip": dict(num_workers=2, chunks=False),
        "chunks": dict(num_workers=2, chunks=True),
        "chunks in-process": dict(num_workers=0, chunks=True),
    }.items():
        controllers = [_ChunkRecorder(a, k) for a, k in plans]
        runs[name] = (run_episodes(jobs, factory, controllers=controllers, **setting), controllers)
    (ref, ref_seen) = runs.pop("one action per round trip")
    outcomes = [(r.status, r.success, r.steps) for r in ref]
    assert outcomes == [("ok", True, len(expert)), ("ok", False, 23), ("ok", False, 17), ("ok", False, 9)]
    for name, (results, seen) in runs.items():
        assert [(r.status, r.success, r.steps) for r in results] == outcomes, name
        for a, b in zip(ref, results):
            for key in ("proprio", "object_state"):
                assert len(a.states[key]) == len(b.states[key]) == a.steps + 1
                assert all(np.array_equal(x, y) for x, y in zip(a.states[key], b.states[key])), f"{name}: {key}"
        for x, y in zip(ref_seen, seen):
            assert len(x.seen) == len(y.seen), f"{name}: the controller was asked a different number of times"
            for (state_a, obs_a, t_a), (state_b, obs_b, t_b) in zip(x.seen, y.seen):
                assert t_a == t_b and (state_a is None) == (state_b is None)
                assert state_a is None or np.array_equal(state_a, state_b), f"{name}: MuJoCo state at step {t_a}"
                assert all(np.array_equal(obs_a[k], obs_b[k]) for k in obs_a), f"{name}: observation at step {t_a}"

"""The fast control step and the asynchronous schedule leave every episode bit-identical.

Recorded episodes (a stored init state and a fixed action sequence; one of them the scripted
expert's, which grasps and carries an object) are replayed through robosuite's own step and
through :func:`wmrl_libero.fast_physics.fast_step`, and through the lockstep and the
asynchronous episode runner; MuJoCo states and observations must be equal with
``np.array_equal``, not approximately, and so must every observable's sampling timer and
robosuite's observation cache after every step. Skipped without LIBERO, failed under ``CI=true``.
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
    return observables | {
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


def _replay_both(task_index: int, init_state: int, steps: int, actions_from) -> int:
    """Run one episode in two environments of the task, robosuite's step and the fast one;
    ``actions_from(obs, info)`` gives each action from the reference environment's
    observation (a closed-loop recording). Returns the steps compared."""
    from wmrl_libero.gym_env import LiberoGymEnv

    ref = LiberoGymEnv("libero_10", task_index, fast_physics=False, privileged_info=True)
    new = LiberoGymEnv("libero_10", task_index, fast_physics=True, privileged_info=True)
    try:
        assert new.fast_physics and not ref.fast_physics
        obs, info = ref.reset(seed=7, options={"init_state": init_state})
        obs_new, _ = new.reset(seed=7, options={"init_state": init_state})
        assert all(np.array_equal(obs[k], obs_new[k]) for k in obs)
        for t in range(steps):
            action = actions_from(obs, info)
            a = ref.step(action)
            b = new.step(action)
            _assert_same_step(t, (a, _physics(ref), ref._last_raw), (b, _physics(new), new._last_raw))
            obs, info = a[0], a[4]
            if a[2] or a[3]:
                return t + 1
        return steps
    finally:
        ref.close()
        new.close()


def test_fast_step_replays_a_scripted_expert_episode_bit_for_bit():
    _need_libero()
    from wmrl_libero.expert import ScriptedExpert
    from wmrl_libero.gym_env import LiberoGymEnv

    probe = LiberoGymEnv("libero_10", 0)
    goal = probe.goal_predicates()
    probe.close()
    expert = ScriptedExpert(goal)
    gripper_closed = []

    def act(obs, info):
        action = expert.act(obs, info)[0]
        gripper_closed.append(action[6] > 0)
        return action

    steps = _replay_both(0, 0, 220, act)
    assert steps >= 150 and any(gripper_closed), "the recording should include a grasp"


def test_fast_step_replays_noisy_action_sequences_bit_for_bit():
    _need_libero()
    from wmrl_libero.gym_env import NOOP_ACTION

    for task_index, init_state in ((3, 5), (9, 2)):
        rng = np.random.default_rng(task_index)
        actions = np.clip(NOOP_ACTION + rng.normal(0, 0.5, (80, 7)), -1, 1)  # gripper toggles often
        it = iter(actions)
        assert _replay_both(task_index, init_state, len(actions), lambda obs, info, it=it: next(it)) == len(actions)


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

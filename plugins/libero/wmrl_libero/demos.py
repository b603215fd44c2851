"""Record scripted-expert demonstrations in LIBERO's HDF5 layout.

Layout (that of LIBERO's released datasets, robomimic style)::

    data                      attrs: problem_info (JSON: language_instruction, problem_name),
                                     bddl_file_name, env_args (JSON), num_demos, total
    data/demo_<i>             attrs: num_samples, init_state (index), task_index, success
    data/demo_<i>/actions          (T, 7) float64, the 7-dim actions taken
    data/demo_<i>/states           (T, S) float64, flattened MuJoCo state before each action
    data/demo_<i>/robot_states     (T, 9) gripper qpos (2), eef pos (3), eef quat (4)
    data/demo_<i>/rewards, dones   (T,) uint8; 1 at the final step of a success
    data/demo_<i>/obs/ee_pos (T,3), ee_ori (T,3 axis-angle), ee_states (T,6),
                      gripper_states (T,2), joint_states (T,7), object_state (T,O),
                      proprio (T,16) (this plugin's observation, for behaviour cloning),
                      agentview_rgb / eye_in_hand_rgb (T,H,W,3) uint8 when images are on

Demos of several tasks go in one file, each demo naming its task (LIBERO's own files hold
one task each; split with ``task_index`` if needed, or record one file per task). Recording
appends episode by episode and resumes: see :func:`record_demonstrations`; each demo also
stores ``repeat`` (its index among the episodes from the same init state) and
``executed_actions`` (the labels plus any execution noise).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

from wmrl_libero.expert import ScriptedExpert
from wmrl_libero.gym_env import LiberoGymEnv

__all__ = ["record_demonstrations", "load_demonstrations", "write_demo", "write_file_attributes"]


def _episode(env: LiberoGymEnv, init_state: int, seed: int, noise: float = 0.0, rng=None):
    """One expert episode; ``noise`` > 0 perturbs the executed actions, not the recorded labels."""
    obs, info = env.reset(seed=seed, options={"init_state": init_state})
    expert = ScriptedExpert(env.goal_predicates())
    rows: dict[str, list] = {
        k: []
        for k in (
            "actions",
            "executed_actions",
            "states",
            "proprio",
            "object_state",
            "agentview_rgb",
            "eye_in_hand_rgb",
        )
    }
    success = False
    while True:
        action = expert.act(obs, info)[0]
        executed = action if noise == 0 else np.clip(action + rng.normal(0.0, noise, action.shape), -1, 1)
        rows["states"].append(env.sim_state())
        rows["proprio"].append(obs["proprio"])
        rows["object_state"].append(obs["object_state"])
        if "agentview_image" in obs:
            rows["agentview_rgb"].append(obs["agentview_image"])
            rows["eye_in_hand_rgb"].append(obs["wrist_image"])
        rows["actions"].append(action)
        rows["executed_actions"].append(executed)
        obs, _, terminated, truncated, info = env.step(executed)
        if terminated or truncated:
            success = bool(terminated)
            break
    return rows, success


def write_demo(
    data,
    index: int,
    rows: dict[str, list],
    *,
    init_state: int,
    task_index: int,
    success: bool,
    instruction: str,
    extra: dict[str, np.ndarray] | None = None,
    attrs: dict | None = None,
    extra_obs: dict[str, np.ndarray] | None = None,
) -> None:
    """Write one episode as ``data/demo_<index>`` in the layout above.

    :param rows: per-step lists ``actions``, ``states``, ``proprio``, ``object_state`` (and
        ``agentview_rgb`` / ``eye_in_hand_rgb``, possibly empty).
    :param extra: more per-step datasets of the demo group (e.g. DAgger's executed actions).
    :param attrs: more attributes of the demo group.
    :param extra_obs: more datasets of the demo's ``obs`` group (e.g. the state after the last action).
    """
    g = data.create_group(f"demo_{index}")
    T = len(rows["actions"])
    proprio = np.asarray(rows["proprio"], dtype=np.float64)
    ee_pos, ee_quat, grip, joints = proprio[:, :3], proprio[:, 3:7], proprio[:, 7:9], proprio[:, 9:16]
    ee_ori = Rotation.from_quat(ee_quat).as_rotvec()
    g.attrs.update(
        num_samples=T,
        init_state=init_state,
        task_index=task_index,
        success=success,
        language_instruction=instruction,
        **(attrs or {}),
    )
    g.create_dataset("actions", data=np.asarray(rows["actions"], dtype=np.float64))
    g.create_dataset("states", data=np.asarray(rows["states"]))
    g.create_dataset("robot_states", data=np.concatenate([grip, ee_pos, ee_quat], axis=1))
    done = np.zeros(T, dtype=np.uint8)
    done[-1] = 1 if success else 0
    g.create_dataset("rewards", data=done.copy())
    g.create_dataset("dones", data=done)
    o = g.create_group("obs")
    o.create_dataset("ee_pos", data=ee_pos)
    o.create_dataset("ee_ori", data=ee_ori)
    o.create_dataset("ee_states", data=np.concatenate([ee_pos, ee_ori], axis=1))
    o.create_dataset("gripper_states", data=grip)
    o.create_dataset("joint_states", data=joints)
    o.create_dataset("object_state", data=np.asarray(rows["object_state"], dtype=np.float32))
    o.create_dataset("proprio", data=proprio.astype(np.float32))  # this plugin's layout
    if rows.get("agentview_rgb"):
        o.create_dataset("agentview_rgb", data=np.asarray(rows["agentview_rgb"]), compression="gzip")
        o.create_dataset("eye_in_hand_rgb", data=np.asarray(rows["eye_in_hand_rgb"]), compression="gzip")
    for key, value in (extra_obs or {}).items():
        o.create_dataset(key, data=np.asarray(value))
    for key, value in (extra or {}).items():
        g.create_dataset(key, data=np.asarray(value))


def write_file_attributes(
    data,
    suite: str,
    instructions: dict[int, str],
    *,
    bddl_file_name: str = "",
    image_size: int | None = None,
    num_demos: int,
    total: int,
) -> None:
    """The ``data`` group's attributes (LIBERO's ``problem_info``, ``env_args``, counts)."""
    first = next(iter(instructions.values()), "")
    data.attrs.update(
        problem_info=json.dumps({"language_instruction": first, "tasks": {str(k): v for k, v in instructions.items()}}),
        bddl_file_name=bddl_file_name,
        env_args=json.dumps(
            {
                "env_name": suite,
                "type": 1,
                "env_kwargs": {
                    "controller": "OSC_POSE",
                    "control_freq": 20,
                    "camera_heights": image_size,
                    "camera_widths": image_size,
                },
            }
        ),
        num_demos=num_demos,
        total=total,
    )


def _episode_key(task: int, init_state: int, repeat: int) -> str:
    return f"{task}:{init_state}:{repeat}"


def _open_for_append(out: Path, image_size: int | None):
    """Open ``out`` for appending; drop a demo group cut short by an interrupted run.

    :return: the file, its ``data`` group, and the episode keys already tried (kept or failed).
    """
    import h5py

    f = h5py.File(out, "a")
    data = f.require_group("data")
    if "env_args" in data.attrs:
        stored = json.loads(data.attrs["env_args"])["env_kwargs"].get("camera_heights")
        if stored != image_size:
            f.close()
            raise ValueError(
                f"{out} holds demos with image size {stored}, this run asks for {image_size}; "
                "pass the same --image-size or write to another --out file"
            )
    tried = set(json.loads(data.attrs.get("failed_episodes", "[]")))
    for name in list(data):
        g = data[name]
        if "obs" not in g or "proprio" not in g["obs"] or "repeat" not in g.attrs:
            del data[name]  # written only in part when the previous run stopped
            continue
        tried.add(_episode_key(int(g.attrs["task_index"]), int(g.attrs["init_state"]), int(g.attrs["repeat"])))
    return f, data, tried


def record_demonstrations(
    out: str | Path,
    *,
    suite: str = "libero_10",
    task_indices: Sequence[int] | None = None,
    init_states: Sequence[int] = range(10),
    per_task: int | None = None,
    noise: float = 0.05,
    image_size: int | None = None,
    keep_failures: bool = False,
    log=print,
) -> Path:
    """Run the scripted expert from the given init states, appending each episode to ``out``.

    Resumable: every episode is written (and the file flushed) as soon as it ends, and a rerun
    with the same ``out`` skips the episodes already tried (kept demos, and failures listed in
    the ``failed_episodes`` attribute), so an interrupted run loses at most one episode.

    :param per_task: successful demos wanted per task (default: one episode per init state).
        Episode ``j`` starts from ``init_states[j % n]``; its ``repeat`` ``j // n`` > 0 adds
        Gaussian noise of std ``noise`` to the actions executed (the stored labels stay the
        expert's clean actions, as in DART), so repeats of an init state differ. At most
        ``2 * per_task`` episodes are tried per task.
    :return: the file written; its ``data`` attrs say how many demos it holds.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    task_indices = list(range(10)) if task_indices is None else list(task_indices)
    init_states = [int(s) for s in init_states]
    if not init_states:
        raise ValueError("no init states given; pass e.g. --init-states 0-39")
    f, data, tried = _open_for_append(out, image_size)
    try:
        problems, failed, n = _recorded_so_far(data)
        for t in task_indices:
            wanted = per_task if per_task is not None else len(init_states)
            attempts = 2 * per_task if per_task is not None else len(init_states)
            have = sum(int(data[k].attrs["task_index"]) == t and bool(data[k].attrs["success"]) for k in data)
            env = None
            try:
                for j in range(attempts):
                    if have >= wanted:
                        break
                    s, repeat = init_states[j % len(init_states)], j // len(init_states)
                    key = _episode_key(t, s, repeat)
                    if key in tried:
                        continue
                    if env is None:
                        env = LiberoGymEnv(suite, t, image_size=image_size, privileged_info=True)
                        problems[t] = env.language_instruction
                    rng = np.random.default_rng([t, s, repeat])
                    executed_noise = noise if repeat else 0.0
                    rows, success = _episode(env, s, seed=s, noise=executed_noise, rng=rng)
                    log(
                        f"task {t} init {s} repeat {repeat}: {'success' if success else 'failure'} "
                        f"({len(rows['actions'])} steps)",
                    )
                    tried.add(key)
                    if success or keep_failures:
                        _write_recorded_demo(data, n, rows, t, s, repeat, success, problems[t], executed_noise)
                        n += 1
                        have += int(success)
                    if not success:
                        failed.append(key)
                    _save_progress(f, data, suite, problems, env.task.bddl_file, image_size, n, failed)
            finally:
                if env is not None:
                    env.close()
            if have < wanted:
                log(f"task {t}: only {have} of {wanted} demos succeeded")
    finally:
        f.close()
    return out


def _recorded_so_far(data) -> tuple[dict[int, str], list[str], int]:
    """What an earlier run left in ``data``: each task's instruction, the keys of the episodes
    that failed, and the index of the next demo."""
    problems = json.loads(data.attrs.get("problem_info", "{}")).get("tasks", {})
    problems = {int(k): v for k, v in problems.items()}
    failed = json.loads(data.attrs.get("failed_episodes", "[]"))
    n = max((int(k.split("_")[1]) + 1 for k in data), default=0)
    return problems, failed, n


def _write_recorded_demo(
    data, n: int, rows, task: int, init_state: int, repeat: int, success: bool, instruction: str, executed_noise: float
) -> None:
    """Write one recorded episode as ``demo_<n>``, with its repeat, execution noise and executed actions."""
    write_demo(
        data,
        n,
        rows,
        init_state=init_state,
        task_index=task,
        success=success,
        instruction=instruction,
        attrs={"repeat": repeat, "executed_noise": executed_noise},
        extra={"executed_actions": np.asarray(rows["executed_actions"], dtype=np.float64)},
    )


def _save_progress(
    f, data, suite: str, problems: dict[int, str], bddl_file: str, image_size: int | None, n: int, failed: list[str]
) -> None:
    """Update the file's attributes (demo count, total steps, failed episodes) and flush it, so
    that an interrupted run loses at most the episode in progress."""
    write_file_attributes(
        data,
        suite,
        problems,
        bddl_file_name=bddl_file,
        image_size=image_size,
        num_demos=n,
        total=int(sum(data[k].attrs["num_samples"] for k in data)),
    )
    data.attrs["failed_episodes"] = json.dumps(failed)
    f.flush()


def load_demonstrations(path: str | Path) -> list[dict[str, np.ndarray]]:
    """Read every demo of a file written by :func:`record_demonstrations`."""
    import h5py

    demos = []
    with h5py.File(path, "r") as f:
        for key in sorted(f["data"], key=lambda k: int(k.split("_")[1])):
            g = f["data"][key]
            demo = {
                "actions": g["actions"][()],
                "task_index": int(g.attrs["task_index"]),
                "init_state": int(g.attrs["init_state"]),
                "language_instruction": str(g.attrs["language_instruction"]),
            }
            for k in g["obs"]:
                demo[k] = g["obs"][k][()]
            demos.append(demo)
    return demos

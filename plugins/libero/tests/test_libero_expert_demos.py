"""Scripted expert: planning from BDDL goals, and one real solved episode recorded to HDF5."""

import numpy as np
from wmrl_libero.expert import CloseDrawer, PickPlace, SwingDoorShut, TurnKnob, plan_from_goal
from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require


def test_plan_orders_knobs_first_placements_then_closings():
    steps, unsupported = plan_from_goal([["Close", "microwave_1"], ["In", "mug_1", "microwave_1_heating_region"]])
    # a mug whose outline the expert does not know is picked and placed (SlideIn needs the outline)
    assert steps == [PickPlace("mug_1", "microwave_1_heating_region", "in"), SwingDoorShut("microwave_1")]
    assert unsupported == []
    steps, _ = plan_from_goal(
        [["close", "white_cabinet_1_bottom_region"], ["in", "bowl_1", "white_cabinet_1_bottom_region"]]
    )
    assert steps == [
        PickPlace("bowl_1", "white_cabinet_1_bottom_region", "in"),
        CloseDrawer("white_cabinet_1_bottom_region", "white_cabinet_1"),
    ]
    steps, _ = plan_from_goal([["on", "pot_1", "stove_1_cook_region"], ["turnon", "flat_stove_1"]])
    assert steps == [TurnKnob("flat_stove_1"), PickPlace("pot_1", "stove_1_cook_region", "on")]
    _, unsupported = plan_from_goal([["open", "window_1"]])
    assert unsupported == [["open", "window_1"]]


def test_objects_sharing_an_on_region_are_spread_apart():
    steps, _ = plan_from_goal(
        [["on", "moka_pot_1", "flat_stove_1_cook_region"], ["on", "moka_pot_2", "flat_stove_1_cook_region"]]
    )
    offsets = [s.place_offset for s in steps]
    assert np.allclose(offsets[0] + offsets[1], 0.0) and np.linalg.norm(offsets[0] - offsets[1]) > 0.08


def test_expert_solves_libero10_task0_and_demo_is_written_in_libero_layout(tmp_path):
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    import h5py
    from wmrl_libero.demos import load_demonstrations, record_demonstrations

    path = record_demonstrations(tmp_path / "demo.hdf5", task_indices=[0], init_states=[0], log=lambda *_: None)
    with h5py.File(path, "r") as f:
        assert f["data"].attrs["num_demos"] == 1, "the scripted expert no longer solves task 0 from init state 0"
        g = f["data/demo_0"]
        T = g.attrs["num_samples"]
        assert 100 < T < 520 and bool(g.attrs["success"])
        assert g["actions"].shape == (T, 7) and g["robot_states"].shape == (T, 9)
        assert g["states"].shape[0] == T and g["dones"][-1] == 1
        for key in ("ee_pos", "ee_ori", "ee_states", "gripper_states", "joint_states", "object_state", "proprio"):
            assert g["obs"][key].shape[0] == T
    demo = load_demonstrations(path)[0]
    assert demo["language_instruction"] == "put both the alphabet soup and the tomato sauce in the basket"
    assert np.abs(demo["actions"]).max() <= 1.0
    # a rerun resumes: the episode already recorded is skipped (no simulator is even built)
    log = []
    record_demonstrations(path, task_indices=[0], init_states=[0], log=log.append)
    assert log == [] and len(load_demonstrations(path)) == 1


def test_resume_drops_a_demo_cut_short_and_remembers_failures(tmp_path):
    import json

    import h5py
    from wmrl_libero.demos import _open_for_append

    with h5py.File(tmp_path / "d.hdf5", "w") as f:
        done = f.create_group("data/demo_0")
        done.attrs.update(task_index=2, init_state=5, repeat=1)
        done.create_dataset("obs/proprio", data=np.zeros((3, 16)))
        f.create_group("data/demo_1").create_dataset("actions", data=np.zeros((3, 7)))  # interrupted write
        f["data"].attrs["failed_episodes"] = json.dumps(["2:6:0"])
    f, data, tried = _open_for_append(tmp_path / "d.hdf5", image_size=None)
    try:
        assert list(data) == ["demo_0"] and tried == {"2:5:1", "2:6:0"}
    finally:
        f.close()

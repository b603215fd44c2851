"""Scripted expert: planning from BDDL goals, and one real solved episode recorded to HDF5."""

import numpy as np
from wmrl_core.testing import require

from wmrl_libero.expert import PickPlace, plan_from_goal
from wmrl_libero.runtime import libero_available


def test_plan_from_goal_splits_supported_and_articulated_predicates():
    steps, unsupported = plan_from_goal([["Close", "microwave_1"], ["In", "mug_1", "microwave_1_heating_region"]])
    assert steps == [PickPlace("mug_1", "microwave_1_heating_region", "in")]
    assert unsupported == [["Close", "microwave_1"]]


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

"""The simulator benchmark runs end to end on a tiny batch: every setting reproduces the reference's
episodes bit for bit, and the table prints the ceiling, each setting and the ratios."""

from wmrl_libero.runtime import libero_available

from wmrl_core.testing import require


def test_bench_sim_measures_every_setting_beside_the_ceiling_on_identical_episodes():
    require(libero_available(), "LIBERO is not installed: run `bash plugins/libero/ci/setup.sh`")
    from wmrl_libero.experiments.benchmark_speed import measure_simulator_speed, simulator_speed_table

    lines = []
    result = measure_simulator_speed(
        task_indices=(0,), init_states=(0,), num_workers=1, max_episode_steps=6, reps=1, chunk=4, progress=lines.append
    )
    assert {row["setting"] for row in result["batches"]} == set(result["settings"]) >= {"today", "new"}
    assert all(row["same_outcomes"] for row in result["batches"])
    assert all(row["worker_cpu_s_per_episode"] > 0 for row in result["batches"])
    assert result["bare"][0]["cpu_s_per_episode"] > 0 and len(lines) == 1 + len(result["settings"])
    table = simulator_speed_table(result)
    assert "bare MuJoCo" in table and "today" in table and "new" in table

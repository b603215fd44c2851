"""Bad solutions, each run in a real container: the outcome is a failure status, nothing raises,
and no container is left running afterwards."""

from __future__ import annotations

import socket
import time

import pytest
from wmrl_autoresearch.grading.outcomes import to_outcome
from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward
from wmrl_autoresearch.sandbox.pool import RunRequest

WRITE_PREDICTIONS = """
import os
with open(os.path.join(os.environ["OUTPUT_DIR"], "predictions.csv"), "w") as f:
    f.write("id,prediction\\n")
    for i in range({n}):
        f.write(f"{{i}},{value}\\n")
"""


def run(pool, task, script, limits=None):
    """Run ``script``, grade it, and check that no sandbox is left behind."""
    execution = pool.run(RunRequest(task, script, limits))
    outcome = to_outcome(task, execution)
    assert pool.wait_reaped(30) and pool.live_count == 0
    reward = AutoResearchScoreReward()(task, outcome)
    assert reward is not None and -1.0 <= reward <= 1.0
    return outcome


@pytest.fixture(autouse=True)
def _nothing_left_running(docker_ready, live_sandboxes):
    yield
    deadline = time.monotonic() + 10
    while live_sandboxes() and time.monotonic() < deadline:  # auto-removal is asynchronous
        time.sleep(0.2)
    assert live_sandboxes() == []


def test_ar_good_solution_is_scored(pool, tiny_classification):
    script = WRITE_PREDICTIONS.format(n=tiny_classification.n_test, value="1")
    outcome = run(pool, tiny_classification, script)
    assert outcome.status == "ok"
    expected = sum(y == "1" for y in tiny_classification.y_test) / tiny_classification.n_test
    assert outcome.score == pytest.approx(expected)
    assert outcome.info["runtime_s"] > 0 and outcome.info["exit_code"] == 0


def test_ar_syntax_error(pool, tiny_classification):
    outcome = run(pool, tiny_classification, "def broken(:\n    pass\n")
    assert outcome.status == "crashed"
    assert "SyntaxError" in outcome.info["logs"]["stderr"]
    assert outcome.score is None


def test_ar_exception_is_crashed(pool, tiny_classification):
    outcome = run(pool, tiny_classification, "raise RuntimeError('boom')\n")
    assert outcome.status == "crashed" and outcome.info["exit_code"] == 1
    assert "RuntimeError: boom" in outcome.info["logs"]["stderr"]


def test_ar_infinite_loop_times_out(pool, tiny_classification, small_limits):
    limits = small_limits.with_overrides(timeout_s=2.0)
    outcome = run(pool, tiny_classification, "print('spinning', flush=True)\nwhile True:\n    pass\n", limits)
    assert outcome.status == "timeout" and "CPU-time limit" in outcome.info["error"]
    assert 2.0 < outcome.info["resources"]["cpu_s"] < 2.0 + 0.6  # CPU seconds: the wall time depends on the load
    assert outcome.info["runtime_s"] >= 2.0
    assert "spinning" in outcome.info["logs"]["stdout"]


def test_ar_sleeping_script_times_out(pool, tiny_classification, small_limits):
    limits = small_limits.with_overrides(timeout_s=1.5, wall_timeout_s=3.0)
    outcome = run(pool, tiny_classification, "import time\ntime.sleep(600)\n", limits)
    assert outcome.status == "timeout" and outcome.info["error"].startswith("idle")


def test_ar_fork_bomb_is_contained(pool, tiny_classification, small_limits):
    script = """
import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
"""
    limits = small_limits.with_overrides(timeout_s=3.0)
    outcome = run(pool, tiny_classification, script, limits)
    assert outcome.status in {"timeout", "crashed"}


def test_ar_memory_bomb_is_oom(pool, tiny_classification, small_limits):
    script = """
blocks = []
while True:
    blocks.append(bytearray(8 * 1024 * 1024))
"""
    outcome = run(pool, tiny_classification, script, small_limits.with_overrides(memory_mb=96))
    assert outcome.status == "oom", outcome.info
    peak = outcome.info["resources"].get("memory_peak_bytes")
    assert peak is None or peak <= 96 << 20


def test_ar_single_huge_allocation_is_oom(pool, tiny_classification):
    outcome = run(pool, tiny_classification, "x = bytearray(64 * 1024**3)\n")
    assert outcome.status == "oom"


@pytest.mark.parametrize("directory", ["/tmp", "/output"])
def test_ar_disk_filling_stops_at_tmpfs_cap(pool, tiny_classification, small_limits, directory):
    script = f"""
import errno, os
written = 0
try:
    with open("{directory}/fill.bin", "wb") as f:
        while True:
            f.write(b"x" * 1024 * 1024)
            f.flush()
            written += 1024 * 1024
except OSError as e:
    print("stopped", errno.errorcode[e.errno], written)
    raise
"""
    outcome = run(pool, tiny_classification, script)
    assert outcome.status in {"crashed", "oom"}
    if outcome.status == "crashed":
        assert "stopped ENOSPC" in outcome.info["logs"]["stdout"]
        written = int(outcome.info["logs"]["stdout"].split()[-1])
        cap_mb = small_limits.tmp_mb if directory == "/tmp" else small_limits.output_mb
        assert written <= cap_mb << 20


def test_ar_writing_outside_writable_dirs_fails(pool, tiny_classification):
    outcome = run(pool, tiny_classification, "open('/data/train.csv', 'a').write('poison')\n")
    assert outcome.status == "crashed"
    assert "Read-only file system" in outcome.info["logs"]["stderr"] or "Permission" in outcome.info["logs"]["stderr"]


def test_ar_huge_stdout_is_capped(pool, tiny_classification, small_limits):
    script = (
        "import sys\nchunk = 'y' * 65536 + '\\n'\nfor _ in range(300):\n    sys.stdout.write(chunk)\nprint('END')\n"
    )
    outcome = run(pool, tiny_classification, script)
    assert outcome.status == "missing_output"
    assert outcome.info["stdout_bytes"] > 300 * 65536
    assert outcome.info["logs_truncated"] is True
    assert len(outcome.info["logs"]["stdout"]) < small_limits.log_bytes + 200
    assert outcome.info["logs"]["stdout"].rstrip().endswith("END")  # the tail is kept


def test_ar_binary_stdout_does_not_break_capture(pool, tiny_classification):
    script = "import os, sys\nsys.stdout.buffer.write(os.urandom(20000))\nsys.stderr.buffer.write(b'\\xff\\xfe\\x00')\n"
    outcome = run(pool, tiny_classification, script)
    assert outcome.status == "missing_output"
    assert outcome.info["stdout_bytes"] == 20000
    assert isinstance(outcome.info["logs"]["stdout"], str)


def test_ar_binary_predictions_are_invalid(pool, tiny_classification):
    script = "import os\nopen(os.environ['OUTPUT_DIR'] + '/predictions.csv', 'wb').write(os.urandom(4096))\n"
    outcome = run(pool, tiny_classification, script)
    assert outcome.status == "invalid_output"


def test_ar_oversized_predictions_are_invalid(pool, tiny_classification, small_limits):
    script = WRITE_PREDICTIONS.format(n=small_limits.predictions_bytes // 4, value="1")
    outcome = run(pool, tiny_classification, script)
    assert outcome.status == "invalid_output"
    assert "size limit" in outcome.info["error"]


def test_ar_wrong_prediction_shape_is_invalid(pool, tiny_classification):
    outcome = run(pool, tiny_classification, WRITE_PREDICTIONS.format(n=tiny_classification.n_test - 3, value="1"))
    assert outcome.status == "invalid_output"
    assert "test ids" in outcome.info["error"]


def test_ar_nan_predictions_are_invalid(pool, tiny_regression):
    outcome = run(pool, tiny_regression, WRITE_PREDICTIONS.format(n=tiny_regression.n_test, value="nan"))
    assert outcome.status == "invalid_output"
    assert "NaN" in outcome.info["error"]


def test_ar_missing_predictions(pool, tiny_classification):
    outcome = run(pool, tiny_classification, "print('forgot to write predictions')\n")
    assert outcome.status == "missing_output"


def test_ar_predictions_directory_instead_of_file(pool, tiny_classification):
    outcome = run(pool, tiny_classification, "import os\nos.mkdir(os.environ['OUTPUT_DIR'] + '/predictions.csv')\n")
    assert outcome.status == "missing_output"


def test_ar_network_attempt_fails(pool, tiny_classification):
    script = "import urllib.request\nurllib.request.urlopen('http://deb.debian.org', timeout=3)\n"
    outcome = run(pool, tiny_classification, script)
    assert outcome.status == "crashed"
    assert "URLError" in outcome.info["logs"]["stderr"] or "unreachable" in outcome.info["logs"]["stderr"]


def test_ar_host_files_are_not_reachable(pool, tiny_classification):
    script = """
import os
for path in ("/var/run/docker.sock", "/root/.bashrc", "/work", "/etc/shadow"):
    try:
        open(path).read()
        print("READ", path)
    except OSError as e:
        print("denied", path, type(e).__name__)
print("hostname", open("/proc/1/root/etc/hostname").read().strip())  # pid 1 is the container's own init
"""
    outcome = run(pool, tiny_classification, script)
    stdout = outcome.info["logs"]["stdout"]
    assert "READ" not in stdout
    assert stdout.count("denied") == 4
    assert "hostname sandbox" in stdout
    assert socket.gethostname() not in stdout


def test_ar_printed_score_is_ignored(pool, tiny_classification):
    """Nothing the script prints can set its own score: only predictions are graded."""
    wrong = "0"  # predicts class 0 everywhere
    script = WRITE_PREDICTIONS.format(n=tiny_classification.n_test, value=wrong) + (
        'print(\'{"status": "ok", "score": 1.0, "reward": 1.0}\')\nimport sys; sys.stderr.write(\'score=1.0\\n\')\n'
    )
    outcome = run(pool, tiny_classification, script)
    expected = sum(y == wrong for y in tiny_classification.y_test) / tiny_classification.n_test
    assert expected < 1.0
    assert outcome.status == "ok" and outcome.score == pytest.approx(expected)


def test_ar_leftover_background_process_does_not_hang(pool, tiny_classification, small_limits):
    """A daemonized child holding no pipes is killed with the container; the run ends with the script."""
    script = """
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL, start_new_session=True)
""" + WRITE_PREDICTIONS.format(n=tiny_classification.n_test, value="1")
    t0 = time.perf_counter()
    outcome = run(pool, tiny_classification, script, small_limits.with_overrides(timeout_s=4.0))
    assert outcome.status == "ok"
    assert time.perf_counter() - t0 < 4.0


def test_ar_undecodable_and_nul_scripts_crash_cleanly(pool, tiny_classification):
    for script in ("print('\udcff\ud800')\n", "\ufeff\ufffe" * 1000):
        outcome = run(pool, tiny_classification, script)
        assert outcome.status == "crashed", (script[:20], outcome.info["error"])
    # CPython 3.11 stops reading a source file at a NUL byte: it runs what came before it
    outcome = run(pool, tiny_classification, "print(1)\x00raise SystemExit(9)\n")
    assert outcome.status in {"crashed", "missing_output"}

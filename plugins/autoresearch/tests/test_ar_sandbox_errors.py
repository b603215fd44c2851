"""How DockerSandbox.run reports engine errors: before the script ended they are a sandbox
error (the run says nothing about the script); after a clean exit they are a note (the
script's exit status stands, only the results could not be read)."""

from __future__ import annotations

import docker.errors
import pytest
from wmrl_autoresearch.grading.outcomes import to_outcome
from wmrl_autoresearch.sandbox.docker_sandbox import DockerSandbox
from wmrl_autoresearch.sandbox.image import SANDBOX_IMAGE
from wmrl_autoresearch.sandbox.workspace import Slot
from wmrl_autoresearch.tasks.task import write_visible_files


def test_ar_api_error_is_an_os_error():
    """The reason for the order of the except clauses in DockerSandbox.run."""
    assert issubclass(docker.errors.APIError, OSError)


def _sandbox_with_engine_error(tmp_path, small_limits, *, exit_code):
    """A sandbox whose exec reports ``exit_code`` (None: the exec itself failed) and whose
    engine then answers the results read with an APIError. The engine calls are replaced:
    only the routing of the error in ``run`` is under test here; the real engine case is
    ``test_ar_engine_error_after_clean_exit_on_a_real_engine``."""
    sandbox = DockerSandbox(None, SANDBOX_IMAGE, small_limits, Slot(tmp_path / "slot"), lifetime_s=600)
    sandbox.container = sandbox._handle = object()

    def run_script(result, limits, preimport):
        if exit_code is None:
            raise docker.errors.APIError("500 Server Error: exec failed")
        result.exit_code = exit_code

    def collect(result):
        raise docker.errors.APIError("409 Conflict: container is paused")

    sandbox._run_script, sandbox._collect = run_script, collect
    return sandbox


def test_ar_engine_error_after_clean_exit_is_a_note(tmp_path, small_limits, tiny_classification):
    task_dir = write_visible_files(tiny_classification, tmp_path / "task")
    result = _sandbox_with_engine_error(tmp_path, small_limits, exit_code=0).run(task_dir, "print('ok')\n")
    assert result.sandbox_error is None
    assert result.exit_code == 0
    assert any("reading results failed" in note and "paused" in note for note in result.notes), result.notes


def test_ar_engine_error_before_the_exit_is_a_sandbox_error(tmp_path, small_limits, tiny_classification):
    task_dir = write_visible_files(tiny_classification, tmp_path / "task")
    result = _sandbox_with_engine_error(tmp_path, small_limits, exit_code=None).run(task_dir, "print('ok')\n")
    assert result.sandbox_error is not None and result.sandbox_error.startswith("docker engine error")
    assert to_outcome(tiny_classification, result).status == "sandbox_error"


@pytest.mark.slow
def test_ar_engine_error_after_clean_exit_on_a_real_engine(
    docker_client, pool, small_limits, tiny_classification, tmp_path
):
    """A real engine refuses the results exec of a paused container (409 Conflict, an APIError)."""
    sandbox = DockerSandbox(docker_client, SANDBOX_IMAGE, small_limits, pool.workspace.new_slot(), lifetime_s=600)
    collect = sandbox._collect

    def pause_then_collect(result):
        sandbox._handle.pause()
        try:
            collect(result)
        finally:
            sandbox._handle.unpause()

    sandbox._collect = pause_then_collect
    sandbox.start()
    try:
        result = sandbox.run(write_visible_files(tiny_classification, tmp_path / "task"), "print('ok')\n")
    finally:
        sandbox.remove()
    assert result.exit_code == 0 and result.sandbox_error is None, result
    assert any("reading results failed" in note for note in result.notes), result.notes
    assert to_outcome(tiny_classification, result).status != "sandbox_error"


@pytest.mark.slow
def test_ar_a_sandbox_that_fails_before_the_script_starts_is_retried_once(
    docker_ready, monkeypatch, small_limits, tiny_classification
):
    """The first container start fails (as an engine error under load would); the pool runs the
    script in a new sandbox, the outcome stands, and the failed start is charged nothing. A
    second failure is the run's sandbox error."""
    from wmrl_autoresearch.sandbox.docker_sandbox import SandboxStartError
    from wmrl_autoresearch.sandbox.pool import RunRequest, SandboxPool

    real_start, failures = DockerSandbox.start, {"left": 1}

    def flaky_start(self):
        if failures["left"] > 0:
            failures["left"] -= 1
            raise SandboxStartError("could not start sandbox container: 500 Server Error (injected)")
        return real_start(self)

    monkeypatch.setattr(DockerSandbox, "start", flaky_start)
    script = (
        "import os\nopen(os.path.join(os.environ['OUTPUT_DIR'], 'predictions.csv'), 'w').write('id,prediction\\n')\n"
    )
    with SandboxPool("docker", limits=small_limits, max_parallel=1, warm=0, gpus="none") as pool:
        ex = pool.run(RunRequest(tiny_classification, script))
        assert ex.sandbox_error is None and ex.script_started and ex.exit_code == 0 and ex.attempts == 2
        assert any("first attempt: sandbox failed before the script started" in n and "injected" in n for n in ex.notes)
        assert ex.resources["cpu_s_attempts"][0] == 0.0
        failures["left"] = 2
        twice = pool.run(RunRequest(tiny_classification, script))
        assert twice.attempts == 2 and "injected" in twice.sandbox_error
        assert to_outcome(tiny_classification, twice).status == "sandbox_error"

"""``fake-remote``: the client of a remote sandbox service (SandboxFusion-like), registered through
``wmrl_register_sandboxes``; the AutoResearch plugin knows nothing of it.

The "service" is :class:`FakeSandboxService` in this process, reached only through
:meth:`FakeSandboxService.handle` with JSON bytes, as an HTTP client would reach it: the client
ships the task's files and the script in the request and gets the logs and the predictions back
in the reply; the two share no directory. It runs each script in a subprocess of its own. A remote
service reports no CPU time, so the registration says ``charges="wall_s"``: its runs are charged
their wall seconds.
"""

from __future__ import annotations

import atexit
import base64
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from wmrl_autoresearch.sandbox.backend import ProcessProvider, SandboxStartError
from wmrl_autoresearch.sandbox.result import PREDICTIONS_FILENAME, CappedBuffer, Execution

from wmrl_core import hookimpl

NAME = "fake-remote"


class FakeSandboxService:
    """The remote end: ``POST /sandboxes``, ``POST /sandboxes/ID/run``, ``DELETE /sandboxes/ID``."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="wmrl-fake-remote-"))
        atexit.register(shutil.rmtree, self.root, True)
        self.sandboxes: set[str] = set()
        self.runs: list[dict] = []  # every run request as it arrived: what went over the wire
        self.down = False

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if self.down:
            return 503, b'{"error": "service unavailable"}'
        parts = path.strip("/").split("/")
        if (method, parts) == ("POST", ["sandboxes"]):
            sandbox_id = uuid.uuid4().hex[:12]
            self.sandboxes.add(sandbox_id)
            return 201, json.dumps({"id": sandbox_id}).encode()
        if method == "POST" and len(parts) == 3 and parts[2] == "run" and parts[1] in self.sandboxes:
            request = json.loads(body)
            self.runs.append(request)
            return 200, json.dumps(self._run(parts[1], request)).encode()
        if method == "DELETE" and len(parts) == 2:
            self.sandboxes.discard(parts[1])
            shutil.rmtree(self.root / parts[1], ignore_errors=True)
            return 204, b"{}"
        return 404, b'{"error": "no such route"}'

    def _run(self, sandbox_id: str, request: dict) -> dict:
        work = self.root / sandbox_id
        data, output = work / "data", work / "output"
        for name, content in request["files"].items():
            (data / name).parent.mkdir(parents=True, exist_ok=True)
            (data / name).write_bytes(base64.b64decode(content))
        output.mkdir(parents=True)
        (work / "solution.py").write_text(request["script"])
        env = {**os.environ, "DATA_DIR": str(data), "OUTPUT_DIR": str(output), "TASK_FILE": str(data / "task.json")}
        t0 = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "solution.py"], cwd=work, env=env, capture_output=True, timeout=request["wall_s"]
            )
            exit_code, stdout, stderr, timed_out = done.returncode, done.stdout, done.stderr, False
        except subprocess.TimeoutExpired as exc:  # killed by subprocess.run
            exit_code, stdout, stderr, timed_out = -9, exc.stdout or b"", exc.stderr or b"", True
        predictions = output / PREDICTIONS_FILENAME
        return {
            "exit_code": exit_code,
            "timed_out": timed_out,
            "runtime_s": time.perf_counter() - t0,
            "stdout": base64.b64encode(stdout).decode(),
            "stderr": base64.b64encode(stderr).decode(),
            "predictions": base64.b64encode(predictions.read_bytes()).decode() if predictions.is_file() else None,
        }


SERVICE = FakeSandboxService()
"""The service every ``fake-remote`` pool talks to (its address, for a real one)."""


def _call(method: str, path: str, payload: dict | None = None) -> dict:
    status, body = SERVICE.handle(method, path, json.dumps(payload or {}).encode())
    reply = json.loads(body)
    if status >= 300:
        raise SandboxStartError(f"{NAME}: {method} {path} answered {status}: {reply.get('error')}")
    return reply


class RemoteSandbox:
    """One sandbox of the service for one run (a :class:`~wmrl_autoresearch.sandbox.backend.Sandbox`)."""

    def __init__(self, limits, slot):
        self.limits, self.slot = limits, slot
        self.sandbox_id: str | None = None
        self.name = f"{NAME}-{slot.path.name}"

    def start(self) -> None:
        self.sandbox_id = _call("POST", "/sandboxes")["id"]

    def run(self, task_dir: Path, script: str, timeout_s: float | None = None) -> Execution:
        limits = self.limits.with_overrides(timeout_s=timeout_s)
        files = {
            str(p.relative_to(task_dir)): base64.b64encode(p.read_bytes()).decode()
            for p in sorted(task_dir.rglob("*"))
            if p.is_file()
        }
        request = {"files": files, "script": script, "wall_s": float(limits.timeout_s)}
        result = Execution(backend=NAME)
        try:
            reply = _call("POST", f"/sandboxes/{self.sandbox_id}/run", request)
        except SandboxStartError as exc:
            result.sandbox_error = str(exc)
            return result
        stdout, stderr = CappedBuffer(self.limits.log_bytes), CappedBuffer(self.limits.log_bytes)
        stdout.write(base64.b64decode(reply["stdout"]))
        stderr.write(base64.b64decode(reply["stderr"]))
        result.capture_logs(stdout, stderr)
        result.script_started, result.exit_code, result.runtime_s = True, reply["exit_code"], reply["runtime_s"]
        if reply["timed_out"]:
            result.timed_out, result.timeout_reason = True, f"killed at {limits.timeout_s:g} s of wall time"
        elif reply["predictions"] is not None and reply["exit_code"] == 0:
            data = base64.b64decode(reply["predictions"])
            result.predictions = data[: self.limits.predictions_bytes]
            result.predictions_truncated = len(data) > self.limits.predictions_bytes
        return result  # no resources["cpu_s"]: the service cannot tell, so wall seconds are charged

    def remove(self) -> None:
        if self.sandbox_id is not None:
            SERVICE.handle("DELETE", f"/sandboxes/{self.sandbox_id}", b"")
            self.sandbox_id = None
        self.slot.remove()

    def remaining_lifetime_s(self) -> float:
        return math.inf


class RemoteProvider(ProcessProvider):
    """What the registration's factory returns: sandboxes of :data:`SERVICE`."""

    def __init__(self, settings):
        self.settings = settings

    def sandbox(self, limits, slot, *, lifetime_s, gpu_ids, preimport) -> RemoteSandbox:
        return RemoteSandbox(limits, slot)

    def answers(self) -> bool:
        return not SERVICE.down


@hookimpl
def wmrl_register_sandboxes(table) -> None:
    table.add(
        NAME,
        RemoteProvider,
        isolated=False,  # a stand-in: the "remote" service runs scripts as local processes
        description="a fake remote sandbox service: JSON requests to an in-process endpoint (tests only)",
        charges="wall_s",
    )

"""One ``docker exec`` in a sandbox container, with its stdout and stderr captured (capped)."""

from __future__ import annotations

import threading
import time

from wmrl_autoresearch.sandbox.result import CappedBuffer

__all__ = ["ExecProcess"]


class ExecProcess:
    """A process started with ``docker exec``; a thread copies its output into capped buffers.

    :param client: a ``docker.DockerClient``.
    :param container_id: the container to run in.
    :param argv: the command line.
    :param log_bytes: bytes kept of stdout and of stderr each (head and tail).
    :param name: name of the output thread (for debugging).
    :param ready_marker: bytes the process writes first on stdout once it is ready; they are not
        captured, and :attr:`ready` is set when they arrive.
    """

    def __init__(
        self,
        client,
        container_id: str,
        argv: list[str],
        log_bytes: int,
        name: str = "exec",
        ready_marker: bytes | None = None,
    ):
        self.client = client
        self.stdout, self.stderr = CappedBuffer(log_bytes), CappedBuffer(log_bytes)
        self.ready = threading.Event()
        self._marker = ready_marker
        self._before_ready = b""
        if ready_marker is None:
            self.ready.set()
        self.exec_id = client.api.exec_create(container_id, argv, workdir="/tmp")["Id"]
        self._stream = client.api.exec_start(self.exec_id, stream=True, demux=True)
        self.reader_error: list[BaseException] = []
        self._reader = threading.Thread(target=self._pump, name=f"{name}-logs", daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        try:
            for out, err in self._stream:
                if out and not self.ready.is_set():
                    out = self._strip_marker(out)
                if out:
                    self.stdout.write(out)
                if err:
                    self.stderr.write(err)
        except BaseException as exc:  # the stream breaks when the container is killed
            self.reader_error.append(exc)

    def _strip_marker(self, chunk: bytes) -> bytes:
        """Hold stdout back until the marker has arrived whole; return what follows it."""
        self._before_ready += chunk
        head, found, tail = self._before_ready.partition(self._marker)
        if not found:
            return b""
        self._before_ready = b""
        self.ready.set()
        return head + tail  # nothing precedes the marker unless the process wrote before it

    @property
    def alive(self) -> bool:
        """Whether the process (its output stream) is still open."""
        return self._reader.is_alive()

    def join(self, timeout_s: float) -> None:
        self._reader.join(max(0.0, timeout_s))

    def close(self) -> None:
        """Stop reading (after the container was killed)."""
        self._reader.join(5.0)
        try:
            self._stream.close()
        except Exception:  # already closed by the engine
            pass

    def exit_code(self, wait_s: float = 5.0) -> int | None:
        """The exit status once the engine reports the process ended (``None`` if it never does)."""
        deadline = time.monotonic() + wait_s
        while True:
            info = self.client.api.exec_inspect(self.exec_id)
            if not info.get("Running") or time.monotonic() > deadline:
                return info.get("ExitCode")
            time.sleep(0.02)

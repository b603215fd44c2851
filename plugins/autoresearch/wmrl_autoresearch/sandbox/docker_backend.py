"""The ``docker`` sandbox backend: hardened containers (:class:`~.docker_sandbox.DockerSandbox`) on
the local Docker engine.

One :class:`DockerProvider` per pool holds the engine client; starting it sweeps the containers
that crashed processes left behind (:mod:`.orphans`), and an engine that stops answering is waited
for and cleaned up after (:mod:`.engine_outage`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from wmrl_autoresearch.sandbox.backend import ProviderSettings
from wmrl_autoresearch.sandbox.docker_sandbox import DockerSandbox
from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.sandbox.workspace import Slot

__all__ = ["DockerProvider"]


class DockerProvider:
    """Containers on the engine of ``settings.client`` (or of the environment: ``DOCKER_HOST``).

    :raises DockerUnavailableError: when no engine answers, naming the fix.
    """

    def __init__(self, settings: ProviderSettings):
        from wmrl_autoresearch.sandbox.docker_client import docker_client
        from wmrl_autoresearch.sandbox.orphans import sweep_orphans

        self.image = settings.image
        self._owns_client = settings.client is None  # a client we made is ours to close
        self.client = settings.client or docker_client()
        self.swept = sweep_orphans(self.client)

    def sandbox(
        self, limits: SandboxLimits, slot: Slot, *, lifetime_s: float, gpu_ids: tuple[str, ...], preimport: bool
    ) -> DockerSandbox:
        return DockerSandbox(self.client, self.image, limits, slot, lifetime_s, gpu_ids, preimport=preimport)

    def answers(self) -> bool:
        from wmrl_autoresearch.sandbox.engine_outage import engine_answers

        return engine_answers(self.client)

    def recover(self, wait_s: float, keep: Callable[[], Iterable[str]]) -> None:
        from wmrl_autoresearch.sandbox.engine_outage import recover_from_outage

        recover_from_outage(self.client, wait_s, keep=keep)

    def close(self) -> None:
        if self._owns_client:
            self.client.close()  # its HTTP connection pool (an unclosed socket otherwise)

"""What a sandbox backend is: the interfaces the pool (:mod:`.pool`) drives, whatever runs the scripts.

A backend is registered by name through the ``wmrl_register_sandboxes`` hook (:mod:`.registry`);
its factory is called once per pool with :class:`ProviderSettings` and returns a
:class:`SandboxProvider`, which makes one :class:`Sandbox` per run. The hardened Docker containers
(:mod:`.docker_backend`) and the NOT isolated local processes (:mod:`.local_sandbox`) are the
plugin's own two; a Kubernetes pod or a remote HTTP sandbox service is a third, in its own package.

What a run charges: :meth:`Sandbox.run` returns an :class:`~.result.Execution` whose
``resources["cpu_s"]`` is the script's CPU seconds, what the compute ledger charges for it
(:func:`~wmrl_autoresearch.grading.outcomes.charged_cpu_s`); a backend that cannot measure CPU
time leaves it out, and the run's wall seconds (``runtime_s``) are charged instead. The
registration declares which (``charges="cpu_s"`` or ``"wall_s"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from wmrl_autoresearch.sandbox.limits import SandboxLimits
from wmrl_autoresearch.sandbox.result import Execution
from wmrl_autoresearch.sandbox.workspace import Slot
from wmrl_core.errors import ComponentError

__all__ = [
    "LIFETIME_GRACE_S",
    "ProviderSettings",
    "Sandbox",
    "SandboxProvider",
    "SandboxStartError",
    "ProcessProvider",
]

LIFETIME_GRACE_S = 10.0
"""Extra lifetime of a sandbox that ends by itself (a container), beyond its run's wall-clock limit, seconds."""


class SandboxStartError(ComponentError):
    """A sandbox could not be created or started (image missing, engine or service down ...): the
    script has not run, so the pool retries it once in a new sandbox."""


@runtime_checkable
class Sandbox(Protocol):
    """One sandbox that runs exactly one solution script, then is removed.

    ``gpu_ids`` (the devices it holds, given back to the pool when it is removed) and ``ready``
    (a warm sandbox has finished its start-up work) are optional attributes.
    """

    name: str
    """Unique among the pool's live sandboxes; what logs and the outage recovery's ``keep`` name."""

    def start(self) -> None:
        """Create and start it; afterwards it idles until :meth:`run`.

        :raises SandboxStartError: naming the cause and the fix.
        """

    def run(self, task_dir: Path, script: str, timeout_s: float | None = None) -> Execution:
        """Run ``script`` with the task's visible files of ``task_dir`` as ``$DATA_DIR``; its
        ``$OUTPUT_DIR/predictions.csv`` comes back as ``predictions``. Never raises for a bad script:
        a failure of the sandbox itself is ``sandbox_error`` (with ``script_started`` false when the
        script never ran).

        :param timeout_s: the script's CPU-time limit, CPU seconds (default: its limits' ``timeout_s``).
        :return: the run; ``resources["cpu_s"]`` is what it charges (see the module docstring).
        """
        ...

    def remove(self) -> None:
        """Stop it and remove everything it holds (processes, containers, host directories); idempotent."""

    def remaining_lifetime_s(self) -> float:
        """Seconds before it ends by itself (``inf``: never); a warm sandbox is used only while a run fits."""
        ...


@dataclass(frozen=True)
class ProviderSettings:
    """What the pool gives a backend's factory.

    :param image: the image sandboxes start from: the pool's ``image``, else the registration's
        ``image`` (``None`` for a backend registered without one).
    :param client: a client of the backend's engine to reuse (Docker: a ``docker.DockerClient``);
        ``None``: the provider makes its own, and closes it in :meth:`SandboxProvider.close`.
    """

    image: str | None = None
    client: Any = None


@runtime_checkable
class SandboxProvider(Protocol):
    """Makes a pool's sandboxes: what a registered backend's factory returns (one per pool)."""

    def sandbox(
        self, limits: SandboxLimits, slot: Slot, *, lifetime_s: float, gpu_ids: tuple[str, ...], preimport: bool
    ) -> Sandbox:
        """A new, not yet started sandbox.

        :param limits: its limits.
        :param slot: its host directories (:class:`~.workspace.Slot`), removed with it.
        :param lifetime_s: it may end by itself after this many seconds (backends whose sandboxes never
            do ignore it).
        :param gpu_ids: NVIDIA devices it holds exclusively (empty unless registered with ``uses_gpus``).
        :param preimport: a warm sandbox: start the pre-importing runner (:mod:`.runner`), if it has one.
        """
        ...

    def answers(self) -> bool:
        """Whether the engine or service that runs the sandboxes answers now (asked before each batch)."""
        ...

    def recover(self, wait_s: float, keep: Callable[[], Iterable[str]]) -> None:
        """After it did not answer, or a batch had sandbox errors: wait up to ``wait_s`` seconds for it,
        then remove this process's sandboxes that died with it, except those ``keep()`` names.

        :raises WMRLError: when it is not back in time, with the fix.
        """

    def close(self) -> None:
        """Release what the provider holds (its client) when the pool closes; safe to call twice."""


class ProcessProvider:
    """A base for providers without an engine to watch: it always answers and holds nothing."""

    def answers(self) -> bool:
        return True

    def recover(self, wait_s: float, keep: Callable[[], Iterable[str]]) -> None:
        return None

    def close(self) -> None:
        return None

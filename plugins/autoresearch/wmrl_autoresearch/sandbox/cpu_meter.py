"""CPU seconds used by a container, read from its cgroup on the host (v1 or v2) or the stats API.

The CPU time of a container is what the kernel charged to its cgroup: every process and
thread in it, children included. It does not grow while the container waits for a CPU, so
it is the same on an idle and on a loaded machine (up to cache effects); the sandbox limits
and charges a script by it.

* cgroup v1 (``cpuacct`` controller): ``<mount>/<path>/cpuacct.usage``, nanoseconds;
* cgroup v2: ``<mount>/<path>/cpu.stat``, line ``usage_usec``, microseconds;
* anything else (a remote engine, a host without access to ``/proc``): the engine's stats
  API (``cpu_stats.cpu_usage.total_usage``, nanoseconds), one request per reading.

``<path>`` comes from ``/proc/<pid>/cgroup`` of the container's main process and ``<mount>``
from ``/proc/self/mountinfo``, so the cgroup driver (cgroupfs or systemd) does not matter.
"""

from __future__ import annotations

import logging
from pathlib import Path

__all__ = ["CpuMeter", "CpuWatch", "cgroup_cpu_file", "read_cpu_file_s"]

log = logging.getLogger(__name__)


def _mount_points(mountinfo: str) -> tuple[dict[str, str], str | None]:
    """(cgroup v1 controller -> mount point, cgroup v2 mount point) from ``/proc/self/mountinfo``."""
    v1: dict[str, str] = {}
    v2 = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, extra = left.split(), right.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        root, mount_point, fs_type = fields[3], fields[4], extra[0]
        if root != "/":  # a cgroup namespace view of a sub-tree: paths in /proc/<pid>/cgroup do not apply
            continue
        if fs_type == "cgroup2":
            v2 = v2 or mount_point
        elif fs_type == "cgroup":
            for option in extra[2].split(","):
                v1.setdefault(option, mount_point)
    return v1, v2


def cgroup_cpu_file(proc_cgroup: str, mountinfo: str) -> Path | None:
    """The host file holding the CPU usage of the cgroup described by ``/proc/<pid>/cgroup``.

    :param proc_cgroup: text of ``/proc/<pid>/cgroup`` (lines ``id:controllers:path``).
    :param mountinfo: text of ``/proc/self/mountinfo``.
    :return: ``.../cpuacct.usage`` (v1) or ``.../cpu.stat`` (v2), or ``None`` when neither is mounted.
    """
    v1, v2 = _mount_points(mountinfo)
    unified_path = None
    for line in proc_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            unified_path = path
        elif "cpuacct" in controllers.split(",") and "cpuacct" in v1:
            return Path(v1["cpuacct"]) / path.lstrip("/") / "cpuacct.usage"
    if unified_path is not None and v2 is not None:
        return Path(v2) / unified_path.lstrip("/") / "cpu.stat"
    return None


def read_cpu_file_s(path: Path) -> float:
    """CPU seconds in a ``cpuacct.usage`` (nanoseconds) or ``cpu.stat`` (``usage_usec``) file."""
    text = path.read_text()
    if path.name == "cpuacct.usage":
        return int(text.strip()) / 1e9
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise ValueError(f"{path} has no usage_usec line")


class CpuMeter:
    """Reads the CPU seconds used so far by one running container.

    :param client: a ``docker.DockerClient``.
    :param container_id: the container's full id.
    """

    def __init__(self, client, container_id: str):
        self.client = client
        self.container_id = container_id
        self.source = "stats-api"
        self._file: Path | None = None
        try:
            pid = int(client.api.inspect_container(container_id)["State"]["Pid"])
            if pid > 0:
                path = cgroup_cpu_file(
                    Path(f"/proc/{pid}/cgroup").read_text(), Path("/proc/self/mountinfo").read_text()
                )
                if path is not None:
                    read_cpu_file_s(path)  # readable and parsable, or fall back
                    self._file, self.source = path, f"cgroup:{path.name}"
        except (OSError, ValueError, KeyError) as exc:  # remote engine, other pid namespace, no cgroup fs
            log.debug("container %s: cgroup file unavailable (%s); using the stats API", container_id[:12], exc)

    def read_s(self) -> float | None:
        """CPU seconds used by the container since it started; ``None`` if it cannot be read."""
        if self._file is not None:
            try:
                return read_cpu_file_s(self._file)
            except (OSError, ValueError):
                return None  # the cgroup is gone: the container was removed
        try:
            stats = self.client.api.stats(self.container_id, stream=False, one_shot=True)
            return int(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e9
        except Exception:  # the engine's errors vary by version; a missing figure is not fatal
            return None


IDLE_WINDOW_FRACTION = 0.1
"""The last this fraction of the wall-clock limit (at least :data:`IDLE_WINDOW_MIN_S`) is examined."""
IDLE_WINDOW_MIN_S = 5.0
IDLE_CPU_FRACTION = 0.02
"""Below this many CPU seconds per second in the window, a script killed at the wall limit was idle
(the window may be short and hold the interpreter's start-up)."""
IDLE_WINDOW_CPU_FRACTION = 0.01
"""Below this many CPU seconds per second over its idle window (``SandboxLimits.idle_window_s``),
a script is idle and stopped."""


class CpuWatch:
    """Decides, from CPU readings during a run, whether and why the script must stop.

    Verdicts: ``"cpu"`` -- it used more than ``cpu_limit_s`` CPU seconds (its ``timeout``);
    ``"idle"`` -- it used less than :data:`IDLE_WINDOW_CPU_FRACTION` of a core over the last
    ``idle_window_s`` seconds (stopped then, before the wall limit), or it reached the wall-clock
    limit using less than :data:`IDLE_CPU_FRACTION` of a core over the last
    ``max(IDLE_WINDOW_MIN_S, IDLE_WINDOW_FRACTION * wall_limit_s)``
    seconds (sleeping, deadlocked: also its ``timeout``); ``"starved"`` -- it reached the wall
    limit while still computing, short of its CPU limit: the host did not give it CPU, not its
    fault; ``"wall"`` -- it reached the wall limit and CPU time could not be measured.

    :param cpu_limit_s: the script's CPU-time limit, CPU seconds.
    :param wall_limit_s: the wall-clock safety net, seconds.
    :param start_cpu_s: the container's CPU counter when the script was released (``None``: unmeasurable).
    :param idle_window_s: wall seconds under :data:`IDLE_WINDOW_CPU_FRACTION` of a core after which the
        script is idle (``None`` or 0: only at the wall limit).
    """

    def __init__(
        self, cpu_limit_s: float, wall_limit_s: float, start_cpu_s: float | None, *, idle_window_s: float | None = None
    ):
        self.cpu_limit_s = float(cpu_limit_s)
        self.early_idle_window_s = float(idle_window_s) if idle_window_s else None
        self.idle_early = False  # the verdict "idle" came from the idle window, before the wall limit
        self.wall_limit_s = float(wall_limit_s)
        self.start_cpu_s = start_cpu_s
        self.cpu_s: float | None = 0.0 if start_cpu_s is not None else None
        self.counter_s = start_cpu_s  # the latest reading of the container's counter
        self.wall_s = 0.0
        self._samples: list[tuple[float, float]] = [(0.0, 0.0)]

    @property
    def measurable(self) -> bool:
        return self.start_cpu_s is not None

    @property
    def idle_window_s(self) -> float:
        return max(IDLE_WINDOW_MIN_S, IDLE_WINDOW_FRACTION * self.wall_limit_s)

    def observe(self, wall_s: float, counter_s: float | None) -> str | None:
        """Record a reading (``counter_s``: the container's CPU counter, ``None`` if unreadable); a verdict or ``None``."""
        self.wall_s = wall_s
        if counter_s is not None and self.start_cpu_s is not None:
            self.counter_s = counter_s
            self.cpu_s = max(0.0, counter_s - self.start_cpu_s)
            self._samples.append((wall_s, self.cpu_s))
        if self.cpu_s is not None and self.cpu_s > self.cpu_limit_s:
            return "cpu"
        window = self.early_idle_window_s
        if (
            window is not None
            and self.cpu_s is not None
            and window <= wall_s < self.wall_limit_s
            and self.window_cpu_rate(window) < IDLE_WINDOW_CPU_FRACTION
        ):
            self.idle_early = True
            return "idle"
        if wall_s >= self.wall_limit_s:
            if self.cpu_s is None:
                return "wall"
            return "idle" if self.window_cpu_rate() < IDLE_CPU_FRACTION else "starved"
        return None

    def window_cpu_rate(self, window_s: float | None = None) -> float:
        """CPU seconds per wall second over the ``window_s`` seconds (default: the window examined
        at the wall limit) that end at the latest reading."""
        end_t, end_cpu = self._samples[-1]
        start = end_t - (self.idle_window_s if window_s is None else window_s)
        begin_t, begin_cpu = next(((t, c) for t, c in reversed(self._samples) if t <= start), self._samples[0])
        return (end_cpu - begin_cpu) / max(end_t - begin_t, 1e-9)

    def reason(self, verdict: str) -> str:
        """Why the run ended, in words (for ``Outcome.info['error']`` and notes)."""
        used = f"{self.cpu_s:.2f} CPU-s" if self.cpu_s is not None else "an unknown CPU time"
        if verdict == "cpu":
            return (
                f"used its CPU-time limit of {self.cpu_limit_s:g} CPU-s ({used} in {self.wall_s:.1f} s wall); "
                "raise it with limits={'timeout_s': N}"
            )
        if verdict == "idle" and self.idle_early:
            return (
                f"idle: used {self.window_cpu_rate(self.early_idle_window_s):.4f} CPU-s/s (under "
                f"{IDLE_WINDOW_CPU_FRACTION:.0%} of a core) for {self.early_idle_window_s:g} s, {used} in all (sleeping or "
                f"deadlocked); stopped by the idle window (SandboxLimits.idle_window_s={self.early_idle_window_s:g}), "
                f"before the {self.wall_limit_s:g} s wall-clock safety net; raise it with limits={{'idle_window_s': N}}"
            )
        if verdict == "idle":
            return (
                f"idle: killed at the {self.wall_limit_s:g} s wall-clock safety net after {used}, using "
                f"{self.window_cpu_rate():.3f} CPU-s/s in its last {self.idle_window_s:g} s (sleeping or deadlocked)"
            )
        if verdict == "starved":
            return (
                f"starved: killed at the {self.wall_limit_s:g} s wall-clock safety net after only {used} of its "
                f"{self.cpu_limit_s:g} CPU-s limit while still computing: the host is overloaded"
            )
        return f"killed at the {self.wall_limit_s:g} s wall-clock limit; CPU time could not be measured"

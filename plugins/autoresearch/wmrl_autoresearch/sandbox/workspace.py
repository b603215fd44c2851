"""Host-side directories that sandboxes see: per-task visible files and per-sandbox slots.

Layout under ``root`` (default ``$WMRL_AUTORESEARCH_WORKDIR`` or ``/tmp/wmrl-autoresearch``)::

    <root>/<session>/tasks/<task-id>-<fingerprint>/   train.csv test.csv task.json (written once; a
                                                       competition: its prepared/public/ files)
    <root>/<session>/slots/<slot>/data/                hard links to one task's files -> /data (ro)
    <root>/<session>/slots/<slot>/code/solution.py     the script                      -> /code (ro)

Nothing here ever contains hidden test targets. The session directory is removed by
:meth:`Workspace.close`. The Docker engine must see these paths (a local engine does).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

from wmrl_autoresearch.sandbox.result import SOLUTION_FILENAME
from wmrl_autoresearch.tasks.task import AutoResearchTask

__all__ = ["Workspace", "Slot", "default_root"]


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system: copy instead
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o644)


def default_root() -> Path:
    return Path(os.environ.get("WMRL_AUTORESEARCH_WORKDIR", os.path.join(tempfile.gettempdir(), "wmrl-autoresearch")))


class Slot:
    """The two host directories mounted into one sandbox."""

    def __init__(self, path: Path):
        self.path = path
        self.data = path / "data"
        self.code = path / "code"
        for d in (self.path, self.data, self.code):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o755)

    def stage(self, task_dir: Path, script: str) -> None:
        """Link the task's visible files into ``data/`` and write the script into ``code/``."""
        for item in task_dir.iterdir():
            target = self.data / item.name
            if item.is_dir():  # a competition's public data may hold folders (images, audio)
                shutil.copytree(item, target, copy_function=_link_or_copy)
            else:
                _link_or_copy(item, target)
        script_path = self.code / SOLUTION_FILENAME
        # surrogatepass: a script with lone surrogates is written as is and fails in Python, not here
        script_path.write_bytes(script.encode("utf-8", errors="surrogatepass"))
        os.chmod(script_path, 0o644)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _remove_stale_sessions(base: Path) -> None:
    """Delete session directories left by processes that died without cleaning up (SIGKILL)."""
    for session in base.glob("session-*-*"):
        try:
            pid = int(session.name.split("-")[1])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            shutil.rmtree(session, ignore_errors=True)
        except PermissionError:
            continue


class Workspace:
    """One session's directories; thread-safe."""

    def __init__(self, root: str | os.PathLike | None = None):
        base = Path(root) if root is not None else default_root()
        base.mkdir(parents=True, exist_ok=True)
        os.chmod(base, 0o755)
        _remove_stale_sessions(base)
        self.path = Path(tempfile.mkdtemp(prefix=f"session-{os.getpid()}-", dir=base))
        os.chmod(self.path, 0o755)
        self._lock = threading.Lock()
        self._task_dirs: dict[str, Path] = {}

    def task_dir(self, task: AutoResearchTask) -> Path:
        """The directory with ``task``'s visible files, written on first use."""
        key = f"{task.id}-{task.fingerprint}"
        with self._lock:
            if key not in self._task_dirs:
                directory = self.path / "tasks" / key
                (self.path / "tasks").mkdir(exist_ok=True)
                os.chmod(self.path / "tasks", 0o755)
                task.write_visible(directory)
                self._task_dirs[key] = directory
            return self._task_dirs[key]

    def new_slot(self) -> Slot:
        slots = self.path / "slots"
        slots.mkdir(exist_ok=True)
        os.chmod(slots, 0o755)
        return Slot(Path(tempfile.mkdtemp(prefix="slot-", dir=slots)))

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

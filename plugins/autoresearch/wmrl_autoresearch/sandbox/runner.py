"""The pre-importing runner: a Python process that imports pandas and scikit-learn *before* its
script exists, then runs exactly one script as ``__main__`` and exits.

Importing numpy, pandas and scikit-learn costs about 1 CPU-second with compiled bytecode (3
without), more than many solutions themselves. A sandbox can start the runner ahead of need
(warm) or at run time (cold): either way the runner imports :data:`PREIMPORT_MODULES`, then
blocks, using no CPU, in ``open()`` of the FIFO ``/code/go`` until the host opens it for
writing (it first writes :data:`READY_MARKER` to stdout, which the host strips, so that a
pool can tell a warm container that has finished its imports). The host reads the container's CPU counter at that moment (so the pre-import is never
charged to the script), writes the order and closes the FIFO:

* ``run <cpu_limit_s>``: lower ``RLIMIT_CPU`` to the import's CPU time plus the script's limit
  (a backstop; the host enforces the limit on the whole container), run ``/code/solution.py``
  with :func:`runpy.run_path` as ``__main__`` (``sys.argv``, ``sys.path[0]`` and the traceback
  of an uncaught exception as with ``python3 /code/solution.py``; exit status 1), then exit;
* ``exit``: exit without running anything (the script does not import these libraries, so
  the host runs it with a plain ``python3`` in the same, still unused, container).

Only scripts that import pandas or scikit-learn (:func:`wants_preimport`) are run by the
runner, cold or warm alike, so a script is charged, limited and sees memory the same way
whether its container was warm or not; others run as ``python3 /code/solution.py``.
"""

from __future__ import annotations

import ast
import threading

__all__ = [
    "FIFO_NAME",
    "PREIMPORT_MIN_MEMORY_MB",
    "PREIMPORT_MODULES",
    "PREIMPORT_WAIT_S",
    "READY_MARKER",
    "RUNNER_SOURCE",
    "runner_argv",
    "wants_preimport",
]

PREIMPORT_MODULES = (
    "numpy",
    "pandas",
    "scipy.stats",
    "sklearn",
    "sklearn.base",
    "sklearn.linear_model",
    "sklearn.ensemble",
    "sklearn.model_selection",
    "sklearn.preprocessing",
    "sklearn.metrics",
    "sklearn.pipeline",
    "sklearn.impute",
    "sklearn.compose",
    "sklearn.tree",
    "sklearn.svm",
    "sklearn.neighbors",
)
"""Imported by the runner before the script is released (failures are ignored)."""

PREIMPORT_MIN_MEMORY_MB = 512
"""Warm containers with a smaller memory limit do not pre-import (the imports take ~160 MiB)."""

PREIMPORT_WAIT_S = 300.0
"""Longest wait for the pre-importing runner to finish its imports (~1 CPU-s) before a sandbox error, seconds."""

TRIGGER_MODULES = frozenset({"pandas", "sklearn"})
"""A script that imports any of these (at any depth) is run by the runner."""

READY_MARKER = b"\x1e wmrl-runner-ready\n"
"""Written to stdout by the runner once its imports are done; the host strips it from the logs."""

FIFO_NAME = "go"
"""Name of the FIFO in the slot's ``code`` directory (``/code/go`` in the container)."""

# Runs as `python3 -c RUNNER_SOURCE FIFO SCRIPT MODULES`. Output of the imports is discarded at
# the file-descriptor level, so that nothing but the script's own output reaches the logs.
RUNNER_SOURCE = r"""
import os, sys
fifo, script, modules = sys.argv[1], sys.argv[2], [m for m in sys.argv[3].split(",") if m]
READY_MARKER = sys.argv[4].encode()
null = os.open(os.devnull, os.O_WRONLY)
saved = (os.dup(1), os.dup(2))
os.dup2(null, 1); os.dup2(null, 2)
try:
    import importlib, warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:
                pass
finally:
    sys.stdout.flush(); sys.stderr.flush()
    os.dup2(saved[0], 1); os.dup2(saved[1], 2)
    for fd in (null, *saved):
        os.close(fd)
os.write(1, READY_MARKER)
with open(fifo, "rb") as f:
    order = f.read().split()
if not order or order[0] != b"run":
    sys.exit(0)
import resource, runpy, traceback
usage = resource.getrusage(resource.RUSAGE_SELF)
soft = int(usage.ru_utime + usage.ru_stime + float(order[1])) + 2
resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
sys.argv = [script]
sys.path[0] = os.path.dirname(script)
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit:
    raise
except BaseException as exc:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)
    sys.exit(1)
"""


def runner_argv(fifo: str, script: str, modules=PREIMPORT_MODULES) -> list[str]:
    """Command line of the runner inside the container."""
    return ["python3", "-c", RUNNER_SOURCE, fifo, script, ",".join(modules), READY_MARKER.decode()]


_AST_LOCK = threading.Lock()
"""CPython 3.11 counts the AST constructor's recursion depth in interpreter-wide state, so two
threads parsing at once (the sandbox pool's) can fail with ``SystemError: AST constructor recursion
depth mismatch`` (python/cpython#106905); one parse at a time avoids it."""


def wants_preimport(script: str) -> bool:
    """Whether ``script`` imports pandas or scikit-learn (``import``/``from`` statements, any depth).

    A script that does not parse is not run by the runner (Python reports its syntax error).
    """
    try:
        with _AST_LOCK:
            tree = ast.parse(script)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name.split(".")[0] in TRIGGER_MODULES for name in names):
            return True
    return False

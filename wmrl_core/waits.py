"""How a run waits on a component: a deadline sized to the domain, and a line while it waits.

A component call that never returns (a sandbox that hangs, a simulator stuck in a loop, a
world-model server that went away) must not leave a run waiting silently forever:

* :func:`deadline_s` gives every ``execute`` and ``predict`` call a deadline. The config's value
  wins (``environment.execute_timeout_s``, ``world_model_timeout_s``; ``.inf`` for none); left
  unset, the component's own ``timeout_s(n)`` (it knows what one of its items costs), else a
  generous generic default.
* :func:`heartbeat` prints one progress line every ``heartbeat_s`` seconds while a call runs,
  naming what the run waits on, for how long, and the deadline, so a slow call is told apart
  from a hung one.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["DEFAULT_EXECUTE_TIMEOUT_S", "DEFAULT_PREDICT_TIMEOUT_S", "deadline_s", "heartbeat"]

DEFAULT_EXECUTE_TIMEOUT_S = 3600.0
"""Seconds one ``execute`` call may take when neither the config nor the environment says."""
DEFAULT_PREDICT_TIMEOUT_S = 1800.0
"""Seconds one world-model ``predict`` call may take when neither the config nor the model says."""


def deadline_s(configured: float | None, component: Any, n_items: int, default: float) -> float | None:
    """Seconds one call on ``n_items`` items may take; ``None``: no deadline.

    :param configured: the config's value: seconds, ``inf`` for no deadline, ``None`` to let the
        component size it.
    :param component: asked ``component.timeout_s(n_items)`` when ``configured`` is ``None``; a
        component without that method gets ``default``.
    :raises ValueError: the component's ``timeout_s`` returned something other than seconds > 0.
    """
    seconds = configured
    if seconds is None:
        declared = getattr(component, "timeout_s", None)
        seconds = declared(n_items) if callable(declared) else default
        if seconds is not None and not (isinstance(seconds, int | float) and seconds > 0):
            raise ValueError(
                f"{type(component).__name__}.timeout_s({n_items}) returned {seconds!r}; it must return "
                f"seconds > 0 (math.inf for no deadline)"
            )
    if seconds is None or math.isinf(seconds):
        return None
    return float(seconds)


@contextlib.contextmanager
def heartbeat(
    what: str, every_s: float, deadline: float | None, say: Callable[[str], None] | None = None
) -> Iterator[None]:
    """While the body runs, ``say`` one line every ``every_s`` seconds: what the run waits on,
    for how long, and the deadline. ``every_s <= 0`` says nothing.

    :param what: e.g. ``"environment `x` execute() of 64 solutions at step 3"``.
    :param say: where the line goes; stderr with the ``wmrl:`` prefix by default.
    """
    if every_s <= 0:
        yield
        return
    say = say or _to_stderr
    done = threading.Event()
    start = time.monotonic()
    limit = f"deadline {deadline:g} s" if deadline is not None else "no deadline"

    def beat() -> None:
        while not done.wait(every_s):
            say(f"waiting on {what}: {time.monotonic() - start:.0f} s so far ({limit})")

    thread = threading.Thread(target=beat, name="wmrl-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _to_stderr(message: str) -> None:
    print(f"wmrl: {message}", file=sys.stderr, flush=True)

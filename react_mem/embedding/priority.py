"""Work off an answer's path runs below it.

A conversation turn is stored beside its answer, not before it (``turn_wait``): its
embedding can yield the cores to what a caller is waiting for (the agent's answer, a
recall's searches, the bus). On two shared cores the append's embedding, started as the
answer goes out, held the answer's send and its delivery to the caller
(docs/performance.md). Such work runs on threads niced by :data:`NICE` and, in a process
started at real-time priority, dropped to the normal policy: a thread running at
real-time priority ignores niceness. Only work that releases the GIL belongs here (the
model's run does): a lowered thread holding the GIL keeps every other thread waiting
while it waits for a core (so the PII screen's thread is not lowered).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
from collections.abc import Iterator

#: How much lower threads of work off the answer's path run (Linux niceness).
NICE = 10

_REAL_TIME = frozenset(
    getattr(os, name) for name in ("SCHED_FIFO", "SCHED_RR") if hasattr(os, name)
)
_lowered: contextvars.ContextVar[bool] = contextvars.ContextVar("lowered", default=False)


def lower_this_thread() -> None:
    """Lower the calling thread's priority by :data:`NICE` from what it inherited (a
    process started under ``nice`` stays below its own loop), and from a real-time policy
    to the normal one. Linux sets both per thread; elsewhere the id would name the
    process, so nothing is done. A thread pool's ``initializer``."""
    if sys.platform != "linux":
        return
    thread = threading.get_native_id()
    with contextlib.suppress(OSError):
        lower = min(os.getpriority(os.PRIO_PROCESS, thread) + NICE, 19)
        os.setpriority(os.PRIO_PROCESS, thread, lower)
    with contextlib.suppress(OSError):
        if os.sched_getscheduler(thread) in _REAL_TIME:
            os.sched_setscheduler(thread, os.SCHED_OTHER, os.sched_param(0))


@contextlib.contextmanager
def lowered() -> Iterator[None]:
    """Within it (and in tasks started within it), embedding runs on the embedder's
    lowered threads: for work whose caller does not wait on an answer's path."""
    token = _lowered.set(True)
    try:
        yield
    finally:
        _lowered.reset(token)


def is_lowered() -> bool:
    return _lowered.get()

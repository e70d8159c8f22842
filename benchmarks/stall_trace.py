"""What an event-loop stall is made of: ``loop_stall.py --trace`` (a diagnosis, not a figure).

For each stall over a threshold it tells apart where the loop thread's time went, from the
kernel's own accounting of the thread (``/proc/thread-self/schedstat``: time on a CPU, time
runnable but waiting for one) and from the loop itself:

- ``cpu``: the loop thread ran (Python or a C call holding the GIL); the slowest callback the
  loop ran in the window is named (its task's coroutine and where it resumed and suspended),
  and any garbage collection in the window is timed (``gc.callbacks``);
- ``runq``: it was runnable but no CPU was free (the machine's other work, or real-time
  tasks of the same priority taking their turns);
- ``off``: it slept: in the loop's ``epoll_wait`` (the 1 ms the ticker asked for), waiting
  for the GIL another thread held, or on a page fault's disk read.

A watchdog thread samples every ``PERIOD`` s the machine's runnable tasks
(``procs_running``), the CPU of this process's other threads and of the given child
processes, and its own lateness (it waits for the GIL too): a stall whose window shows
another thread of this process on a CPU while the loop was ``off`` is that thread holding
the GIL.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _schedstat(path: str) -> tuple[int, int]:
    """(ns on a CPU, ns runnable waiting for one) of a thread or process, 0s if gone."""
    try:
        with open(path, "rb") as f:
            cpu, wait, _ = f.read().split()
        return int(cpu), int(wait)
    except (OSError, ValueError):
        return 0, 0


def _process_cpu(pid: int) -> int:
    """The CPU (ns) of every thread of ``pid``."""
    total = 0
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            total += _schedstat(f"/proc/{pid}/task/{tid}/schedstat")[0]
    return total


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (an index builder under a store's host)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                for child in map(int, f.read().split()):
                    found += [child, *descendants(child)]
    return found


def _running() -> int:
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"procs_running"):
                return int(line.split()[1])
    return 0


def _where(frame: Any, depth: int = 4) -> str:
    parts = []
    while frame is not None and len(parts) < depth:
        code = frame.f_code
        parts.append(f"{Path(code.co_filename).stem}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return " < ".join(parts)


def _coro_where(handle: asyncio.Handle) -> str:
    """The task a handle steps, and where its coroutine stands (innermost first)."""
    callback = getattr(handle, "_callback", None)
    task = getattr(callback, "__self__", None)
    if not isinstance(task, asyncio.Task):
        return getattr(callback, "__qualname__", repr(callback))
    coro: Any = task.get_coro()
    frames = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return f"task {task.get_name()} at " + " > ".join(frames)


@contextlib.contextmanager
def gc_passes() -> Iterator[list[float]]:
    """Each garbage-collection pass's pause (ms) in this process while inside."""
    pauses: list[float] = []
    began = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            pauses.append((time.perf_counter() - began[0]) * 1000)

    gc.callbacks.append(timed)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(timed)


@dataclass
class _Sample:
    at: float
    late: float  # ms the watchdog woke late (it waits for the GIL too)
    running: int  # the machine's runnable tasks
    others: int  # ns of CPU of this process's threads other than the loop's, so far
    children: int  # ns of CPU of the child processes, so far
    stack: str  # the loop thread's


@dataclass
class Stall:
    started: float
    late: float
    cpu: float
    runq: float
    gc: float = 0.0
    slowest: tuple[float, str, str] = (0.0, "", "")  # ms, before, after
    samples: list[_Sample] = field(default_factory=list)


class StallTrace:
    """Install on the loop's thread with :meth:`start`; feed each tick to :meth:`tick`."""

    PERIOD = 0.002

    def __init__(self, threshold_ms: float, children: Callable[[], list[int]]) -> None:
        self.threshold = threshold_ms
        self.children = children
        self.stalls: list[Stall] = []
        self._samples: list[_Sample] = []
        self._gcs: list[tuple[float, float, int]] = []
        self._slow: list[tuple[float, float, str, str]] = []  # (start, ms, before, after)
        self._gc_started = 0.0
        self._last = (0, 0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop_tid = 0
        self._loop_ident = 0
        self._run: Any = None

    # -- install --------------------------------------------------------------------------
    def start(self) -> None:
        self._loop_tid, self._loop_ident = threading.get_native_id(), threading.get_ident()
        self._last = _schedstat("/proc/thread-self/schedstat")
        gc.callbacks.append(self._on_gc)
        self._run = run = asyncio.events.Handle._run
        slow = self._slow

        def timed_run(handle: asyncio.Handle) -> None:
            before = _coro_where(handle)
            started = time.perf_counter()
            run(handle)
            took = (time.perf_counter() - started) * 1000
            if took > 10:
                slow.append((started, took, before, _coro_where(handle)))

        asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._watch, name="stall-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        gc.callbacks.remove(self._on_gc)
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self._gcs.append((self._gc_started, time.perf_counter(), info["generation"]))

    def _watch(self) -> None:
        me = threading.get_native_id()
        pid = os.getpid()
        while not self._stop.is_set():
            began = time.perf_counter()
            time.sleep(self.PERIOD)
            now = time.perf_counter()
            others = 0
            with contextlib.suppress(OSError):
                for tid in os.listdir(f"/proc/{pid}/task"):
                    if int(tid) not in (self._loop_tid, me):
                        others += _schedstat(f"/proc/{pid}/task/{tid}/schedstat")[0]
            frame = sys._current_frames().get(self._loop_ident)
            self._samples.append(
                _Sample(
                    now,
                    (now - began - self.PERIOD) * 1000,
                    _running(),
                    others,
                    sum(_process_cpu(child) for child in self.children()),
                    _where(frame),
                )
            )

    # -- per tick ---------------------------------------------------------------------------
    def tick(self, started: float, late: float) -> None:
        now = _schedstat("/proc/thread-self/schedstat")
        cpu, wait = now[0] - self._last[0], now[1] - self._last[1]
        self._last = now
        if late >= self.threshold:
            self.stalls.append(Stall(started, late, cpu / 1e6, wait / 1e6))

    # -- report -----------------------------------------------------------------------------
    def report(self, limit: int = 12) -> Iterator[str]:
        """The longest stalls, each with its breakdown and what ran meanwhile."""
        for stall in sorted(self.stalls, key=lambda s: -s.late)[:limit]:
            a, b = stall.started, stall.started + stall.late / 1000 + 0.001
            gcs = [(x, y, g) for x, y, g in self._gcs if x < b and y > a]
            gc_ms = sum((min(y, b) - max(x, a)) * 1000 for x, y, _ in gcs)
            slow = [s for s in self._slow if s[0] < b and s[0] + s[1] / 1000 > a]
            inside = [s for s in self._samples if a <= s.at <= b + self.PERIOD * 2]
            off = stall.late + 1 - stall.cpu - stall.runq
            yield (
                f"stall {stall.late:.1f} ms: loop cpu {stall.cpu:.1f}, runq {stall.runq:.1f}, "
                f"off {off:.1f}; gc {gc_ms:.1f} ms (gen {[g for *_, g in gcs]})"
            )
            for _start, took, before, after in slow:
                yield f"    callback {took:.1f} ms: {before}  ->  {after}"
            if len(inside) >= 2:
                first, last = inside[0], inside[-1]
                yield (
                    f"    watchdog: {len(inside)} samples, late max "
                    f"{max(s.late for s in inside):.1f} ms; runnable tasks "
                    f"{min(s.running for s in inside)}-{max(s.running for s in inside)}; "
                    f"other threads' cpu {(last.others - first.others) / 1e6:.1f} ms, "
                    f"children's {(last.children - first.children) / 1e6:.1f} ms"
                )
            for stack in dict.fromkeys(s.stack for s in inside):
                yield f"    loop at: {stack}"

"""``soak.py --trace``: what grows in the process besides the data, printed each minute.

- object counts by type, against the first minute (a dict or set keyed per conversation,
  ask or user shows as a count that keeps rising);
- with ``--trace heap`` also Python's heap by line of code (tracemalloc: slow, several
  times the CPU; use a low rate);
- the heap glibc holds free: ``RssAnon`` before and after ``malloc_trim(0)``. What a trim
  gives back was freed by the program and kept by the allocator (fragmentation, arenas of
  threads that come and go), not held by anything.
"""

from __future__ import annotations

import ctypes
import gc
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable

_libc = ctypes.CDLL("libc.so.6")


def malloc_trim() -> None:
    _libc.malloc_trim(0)


class Tracer:
    def __init__(self, heap: bool, anon: Callable[[], float]) -> None:
        self.heap, self.anon = heap, anon
        self.counts: Counter[str] | None = None
        self.snapshot: tracemalloc.Snapshot | None = None
        if heap:
            tracemalloc.start(1)

    def minute(self) -> None:
        counts = Counter(type(o).__name__ for o in gc.get_objects())
        snap = None
        if self.heap:
            snap = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__)]
            )
        before, started = self.anon(), time.perf_counter()
        malloc_trim()
        took = (time.perf_counter() - started) * 1000
        print(f"  trim: anon {before:.0f} -> {self.anon():.0f} MiB in {took:.1f} ms", flush=True)
        if self.counts is None:
            self.counts, self.snapshot = counts, snap
            return
        grown = sorted(((n - self.counts[t], t) for t, n in counts.items()), reverse=True)
        print("  objects: " + ", ".join(f"{t} {d:+d}" for d, t in grown[:10]), flush=True)
        if snap is not None and self.snapshot is not None:
            for stat in snap.compare_to(self.snapshot, "lineno")[:10]:
                frame = stat.traceback[0]
                where = "/".join(frame.filename.split("/")[-2:])
                print(f"  heap {stat.size_diff / 1024:+8.0f} KiB {where}:{frame.lineno}")

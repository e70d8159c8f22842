"""``soak.py --trace``: what grows in the process besides the data, printed each minute.

- object counts by type, against the first minute (a dict or set keyed per conversation,
  ask or user shows as a count that keeps rising), Python's allocated blocks, the threads
  and the strings of the PII screen's spaCy vocabulary (which kept every new word before
  it forgot them with their text);
- with ``--trace heap`` also Python's heap (tracemalloc from the minute before ``BASE``:
  slow, several times the CPU; use a low rate): what was allocated since, and what grew
  since minute ``BASE`` by traceback, each shown by its innermost frames of this project's
  code (a structure that only grows shows as one traceback rising every minute);
- the C heap: ``RssAnon`` before and after ``malloc_trim(0)`` (what a trim gives back was
  freed and kept by the allocator, not held by anything), and what malloc has handed out
  and not had back (glibc's ``mallinfo2``: native memory in use, the engine's included;
  Python's objects live in its own arenas beside it).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable

_libc = ctypes.CDLL("libc.so.6")
#: Frames kept per allocation, and the minute whose heap is the baseline.
FRAMES, BASE = 10, 3
#: Frames shown per traceback: this project's (and the soak's), innermost first.
OURS = ("/react_mem/", "/memory_services/", "/benchmarks/", "/tests/support/")


def _threads() -> str:
    with open("/proc/self/status") as status:
        return next((line.split()[1] for line in status if line.startswith("Threads:")), "?")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _malloc_used() -> float:
    """MiB malloc has handed out (small chunks and mmapped ones), every arena (glibc 2.33+)."""
    _libc.mallinfo2.restype = _MallInfo2
    info = _libc.mallinfo2()
    return float(info.uordblks + info.hblkhd) / 2**20


def malloc_trim() -> None:
    _libc.malloc_trim(0)


def _where(tb: tracemalloc.Traceback) -> str:
    frames = list(tb)  # most recent call last
    first = frames[-1]
    shown = [f for f in reversed(frames) if any(p in f.filename for p in OURS)][:3]
    inner = "/".join(first.filename.split("/")[-2:]) + f":{first.lineno}"
    ours = " < ".join(f"{'/'.join(f.filename.split('/')[-2:])}:{f.lineno}" for f in shown)
    return f"{inner} [{ours}]"


class Tracer:
    def __init__(self, heap: bool, anon: Callable[[], float]) -> None:
        self.heap, self.anon = heap, anon
        self.counts: Counter[str] | None = None
        self.snapshot: tracemalloc.Snapshot | None = None
        self.minutes = 0

    def minute(self) -> None:
        self.minutes += 1
        objects = gc.get_objects()
        counts = Counter(type(o).__name__ for o in objects)
        words = [len(o.vocab.strings) for o in objects if type(o).__name__ == "English"]
        print(
            f"  python blocks {sys.getallocatedblocks():,}, threads {_threads()}, "
            f"spaCy strings {words or 'none'}",
            flush=True,
        )
        del objects
        snap = None
        if self.heap and self.minutes == BASE - 1:  # traced from here: the warm-up untraced
            tracemalloc.start(FRAMES)
        elif self.heap and self.minutes >= BASE:
            snap = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__)]
            )
            traced = tracemalloc.get_traced_memory()[0] / 2**20
            print(
                f"  python heap traced (allocated since tracing began, live): {traced:.1f} MiB",
                flush=True,
            )
        before, started = self.anon(), time.perf_counter()
        malloc_trim()
        took = (time.perf_counter() - started) * 1000
        print(
            f"  trim: anon {before:.0f} -> {self.anon():.0f} MiB in {took:.1f} ms; "
            f"malloc in use {_malloc_used():.1f} MiB",
            flush=True,
        )
        if self.counts is None:
            self.counts = counts
        else:
            grown = sorted(((n - self.counts[t], t) for t, n in counts.items()), reverse=True)
            print("  objects: " + ", ".join(f"{t} {d:+d}" for d, t in grown[:10]), flush=True)
        if snap is None:
            return
        if self.minutes == BASE:
            self.snapshot = snap
        elif self.snapshot is not None:
            stats = snap.compare_to(self.snapshot, "traceback")
            total = sum(s.size_diff for s in stats) / 1024
            print(f"  python heap since minute {BASE}: {total:+.0f} KiB; by traceback:")
            for stat in stats[:12]:
                print(
                    f"  heap {stat.size_diff / 1024:+8.0f} KiB {stat.count_diff:+7d} blocks "
                    f"{_where(stat.traceback)}",
                    flush=True,
                )

"""Free heap memory is handed back to the system (glibc's ``malloc_trim``): memory freed in
the middle of the heap, which the allocator otherwise keeps for the life of the process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_services import heap

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")


def anon_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon")


async def test_memory_freed_below_a_live_block_is_given_back() -> None:
    # 64 KiB blocks come from the heap (under the allocator's mmap threshold); the last one
    # stays alive, so the freed ones below it are never trimmed from the heap's top.
    blocks = [bytearray(64 * 1024) for _ in range(1600)]  # 100 MiB, written (zeroed)
    keep = blocks[-1]
    del blocks
    held = anon_mib()
    await heap.release()
    assert heap.trim_now()
    assert anon_mib() < held - 50, (held, anon_mib())
    assert len(keep) == 64 * 1024


#: A served process's threads each allocate a 16 MiB block, all at once, then free it.
#: glibc maps a block that large for itself, but unmapping one (the warm-up's) raises its
#: threshold, so later ones come from the allocating thread's arena. Prints the resident
#: heap gained after a trim, MiB.
THREADS_SCRIPT = """
import ctypes, sys, threading
from react_mem.processor.runtime import one_malloc_arena
if sys.argv[1] == "one":
    assert one_malloc_arena()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
BLOCK = 16 << 20
def anon():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) / 1024 for l in status if l.startswith("RssAnon:"))
libc.free(libc.malloc(BLOCK))
base = anon()
together = threading.Barrier(4)
def work():
    block = libc.malloc(BLOCK)
    ctypes.memset(block, 1, BLOCK)
    together.wait()
    libc.free(block)
threads = [threading.Thread(target=work) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc.malloc_trim(0)
print(anon() - base)
"""


def gained(mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", THREADS_SCRIPT, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    return float(done.stdout.strip())


def test_a_served_process_threads_free_memory_a_trim_gives_back() -> None:
    # Each thread's own arena would keep its freed 16 MiB at its top, out of a trim's reach
    # (64 MiB resident after the trim); ``serve`` has every thread use the main arena.
    assert gained("one") < 16, gained("one")

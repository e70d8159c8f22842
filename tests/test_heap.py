"""Free heap memory is handed back to the system (glibc's ``malloc_trim``): memory freed in
the middle of the heap, which the allocator otherwise keeps for the life of the process."""

from __future__ import annotations

import sys

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

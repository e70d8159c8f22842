"""Giving back the pages of an edge store's shard files that the process holds for nothing.

The engine maps its shard files shared, so every page it writes or reads stays in the
process's RSS until the kernel runs short: the write-ahead log (a 32 MiB segment per shard,
its size not settable through the binding, read whole again on a restart), the payload
indexes' files (read whole when a shard opens, while the engine keeps the index itself in
its heap), and the vectors and payloads written or searched, so RSS grows with what was
stored. :func:`trim` hands pages back with ``madvise(MADV_PAGEOUT)`` (Linux 5.4+): the log
and index files always (the engine reads them only when a shard opens), the files searches read
(:data:`DATA`) once more than a budget of them is resident (searches then read what they
touch from the files again).

MADV_PAGEOUT is only a hint to reclaim: it never changes what memory holds (a dirty page
stays in the page cache until written back), so a range the engine unmaps and maps again
while this runs comes to no harm. MADV_DONTNEED, which would keep the pages in the page
cache, would zero such a range if it were remapped as anonymous memory.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

#: What a mapped shard file holds: the write-ahead log, the files searches read (vectors,
#: HNSW graphs, payloads), and everything else (payload indexes, id trackers: read into
#: the engine's heap when a shard opens, then written through).
LOG, DATA, INDEX = "log", "data", "index"
_DATA_PARTS = ("/vector_storage/", "/vector_index/", "/payload_storage/")
_MADV_PAGEOUT = 21
_PAGE = mmap.PAGESIZE
_PRESENT = bytes(int(byte >= 0x80) for byte in range(256))


def _libc_madvise() -> Callable[[int, int, int], int] | None:
    if sys.platform != "linux":
        return None
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


_madvise = _libc_madvise()


def kind(path: str) -> str:
    """The kind of a shard file by its path."""
    if "/wal/" in path:
        return LOG
    return DATA if any(part in path for part in _DATA_PARTS) else INDEX


def _under(root: Path) -> str:
    return f"{root.resolve()}/"


def _mapped(root: Path) -> Iterator[tuple[int, int, str]]:
    """(start, end, kind) of this process's mappings of files under ``root``."""
    prefix = _under(root)
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(prefix):
            start, _, end = fields[0].partition("-")
            yield int(start, 16), int(end, 16), kind(fields[5])


def resident(root: Path) -> dict[str, int]:
    """Bytes of this process's RSS in mappings of files under ``root``, by kind: the pages
    present in its page tables, read from ``/proc/self/pagemap`` for those ranges only (8
    bytes a page; ``/proc/self/smaps`` would walk every mapping of the process)."""
    out = dict.fromkeys((LOG, DATA, INDEX), 0)
    if _madvise is None:
        return out
    with open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
        for start, end, what in _mapped(root):
            entries = os.pread(pagemap.fileno(), (end - start) // _PAGE * 8, start // _PAGE * 8)
            # Bit 63 of each little-endian entry, the top bit of its last byte: present.
            out[what] += entries[7::8].translate(_PRESENT).count(1) * _PAGE
    return out


def page_out(root: Path, kinds: Collection[str]) -> int:
    """Ask the kernel to reclaim this process's pages of files under ``root`` of ``kinds``;
    the bytes of the ranges advised (0 where unsupported)."""
    global _madvise
    advised = 0
    if _madvise is None:
        return 0
    for start, end, what in _mapped(root):
        if what not in kinds:
            continue
        if _madvise(start, end - start, _MADV_PAGEOUT) == 0:
            advised += end - start
            continue
        code = ctypes.get_errno()
        if code == errno.EINVAL:  # a kernel before 5.4: nothing to be done
            logger.warning("madvise(MADV_PAGEOUT) is not supported; shard files stay resident")
            _madvise = None
            return advised
        # ENOMEM: the engine unmapped the range meanwhile; nothing left to give back.
    return advised


def trim(root: Path, budget: int | None) -> dict[str, int]:
    """Page out the log and index files under ``root``, and the data files too if more than
    ``budget`` bytes of them are resident (None: never); the resident bytes by kind found
    before."""
    found = resident(root)
    paged = budget is not None and found.get(DATA, 0) > budget
    kinds = {LOG, INDEX} | ({DATA} if paged else set())
    page_out(root, kinds)
    return found

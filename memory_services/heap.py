"""Handing the C heap's free memory back to the system after work that frees much of it.

Rebuilding a shard (forget's compaction, an index run, a sweep's deletes) allocates the new
shard's structures in the engine and frees the old one's. glibc's allocator keeps what is
freed inside its arenas (one per thread that allocated: the engine's and ``to_thread``'s
workers), so the process's resident heap only ever rises to its highest point. In the
soak's steady mode, with users forgotten as the run goes (one every 12.5 s in an early
version of it), ``malloc_trim(0)`` gave back 40-60 MiB of a 260 MiB heap each minute in
0.5-0.7 ms (without forgets, 2-6 MiB).

A trim reaches the free memory inside every arena and the main arena's top, not the top
of a thread's own arena, which glibc lets grow to twice the largest block it ever mapped
and freed (up to 64 MiB): the embedder's lanes, allocating multi-MiB tensors, kept 40-60
MiB there. ``serve`` therefore has every thread allocate from the main arena
(:func:`react_mem.processor.runtime.one_malloc_arena`), where a trim gives it all back.

Elsewhere than glibc (musl, macOS) there is no ``malloc_trim`` and this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)


def _find() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return trim


_TRIM = _find()


def trim_now() -> bool:
    """Give free heap pages back (blocks the calling thread; ctypes lets go of the GIL).
    Whether the C library can."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


async def release() -> None:
    """:func:`trim_now` off the event loop: the trim walks every arena, which grows with
    the heap."""
    try:
        await asyncio.to_thread(trim_now)
    except Exception:
        logger.exception("giving free heap back failed")

"""Generation slots handed out by priority: an agent's request before the learner's.

A text-completion processor receives more requests than it generates at once; the extra
ones wait here. A freed slot goes to the oldest waiting request of the most urgent class,
so an ask waits at most for the generations already running, never behind queued
background learning. Waiting is bounded by the caller (cancel it, e.g. with a timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator


class PriorityGate:
    """At most ``slots`` holders at once; waiters served by ``rank`` (lower first), FIFO
    within a rank."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self._free = slots
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot now."""
        return sum(1 for *_, fut in self._waiting if not fut.done())

    @contextlib.asynccontextmanager
    async def slot(self, rank: int) -> AsyncIterator[None]:
        await self._acquire(rank)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, rank: int) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (rank, next(self._order), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # granted as it was cancelled: pass the slot on
            raise

    def _release(self) -> None:
        self._free += 1
        while self._free > 0 and self._waiting:
            *_, fut = heapq.heappop(self._waiting)
            if not fut.done():  # cancelled waiters are skipped
                self._free -= 1
                fut.set_result(None)

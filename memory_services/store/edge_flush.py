"""Flushing an edge store's shards, and the maintenance task that does it periodically.

Durability: an update returns once it is in the shard's write-ahead log, which survives a
crash of the process (tested by killing a writer), the guarantee a Qdrant server gives an
acknowledged write. Flushing (an fsync of the segments: 15 ms at 10k points, ≈90 ms at 100k)
is therefore not done per write: dirty shards are flushed every ``interval`` seconds (Qdrant's
own default is 5 s), which bounds what a power loss can take and keeps the WAL short, and on
close. After each flush the task runs the store's other upkeep (indexing what is due, paging
out shard files: :meth:`~memory_services.store.edge.EdgeStore.maintain`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from memory_services.store.edge_changes import ChangedPoints
from memory_services.store.edge_shards import Shards
from react_mem.errors import TransientError

logger = logging.getLogger(__name__)


class Flusher:
    """The collections written since their last flush, and the task flushing them."""

    def __init__(self, shards: Shards, changed: ChangedPoints, interval: float) -> None:
        self.shards = shards
        self.changed = changed
        #: Seconds between maintenance ticks; 0: no task (flushes only when asked, and on close).
        self.interval = interval
        self.dirty: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def flush(self) -> None:
        """Fsync every shard written since the last flush, and save its count of changed
        points (:mod:`.edge_changes`)."""
        for name in list(self.dirty):
            self.dirty.discard(name)  # a write during the flush marks it dirty again
            async with self.shards.ensuring:  # an index swap closes the shard it replaces
                shard = self.shards.live.get(name)
                if shard is None:
                    continue
                try:
                    await asyncio.to_thread(self.shards.run, shard.flush)
                except TransientError:
                    self.dirty.add(name)
                    raise
                await self.changed.save(name)

    def start(self, upkeep: Callable[[], Awaitable[None]]) -> None:
        """Start the maintenance task (once): flush, then ``upkeep``, every interval."""
        if self._task is None and self.interval > 0:
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._periodically(self._stopping, upkeep))

    async def stop(self, *, abandon: bool) -> None:
        """Stop the task: a flush in progress finishes first, unless ``abandon`` (an index
        build would take long) cancels the tick."""
        if self._task is None:
            return
        self._stopping.set()
        if abandon:
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _periodically(
        self, stopping: asyncio.Event, upkeep: Callable[[], Awaitable[None]]
    ) -> None:
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.interval)
            try:
                await self.flush()
                if not stopping.is_set():
                    await upkeep()
            except TransientError:
                logger.exception("maintenance of %s failed; will retry", self.shards.root)

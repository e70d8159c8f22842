"""Flushing an edge store's shards, and the maintenance task that does it periodically.

Durability: an update returns once it is in the shard's write-ahead log, which survives a
crash of the process (tested by killing a writer), the guarantee a Qdrant server gives an
acknowledged write. Every ``interval`` seconds (Qdrant's own default is 5 s), and on close,
the shards written since are made durable against a power loss too, which bounds what one
can take.

How: the engine's own ``flush()`` fsyncs each segment's files one by one (60-70 syncs, each a
device cache flush: 0.1-0.4 s on a loaded machine, whatever was written) holding the GIL, so
it stalls every request in the process, from a worker thread too. A flush here fsyncs the
shard's write-ahead log instead, from a worker thread (``os.fsync`` releases the GIL): what
a restart needs to replay every acknowledged write onto the segments as last flushed, the
engine's recovery after any crash. The engine's flush, which also truncates the log, runs
when the shard is replaced by an index run (whose child process flushed the new one), on
close, and when a shard's log holds more than ``log_segments`` closed segments (32 MiB each,
about 15k 384-d points) without an index run: so the log, and a replay after a crash, stay
bounded. ``engine=True`` makes every flush the engine's (the behaviour before, for
``benchmarks/loop_stall.py``). After a flush the task starts the store's other upkeep
(indexing what is due, paging out shard files:
:meth:`~memory_services.store.edge.EdgeStore.maintain`) unless the last one still runs: the
flushes go on through an index build.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from memory_services.store import edge_build
from memory_services.store.edge_changes import ChangedPoints
from memory_services.store.edge_shards import Shards
from react_mem.errors import TransientError

logger = logging.getLogger(__name__)

#: Closed write-ahead-log segments a shard may hold before a flush is the engine's own.
LOG_SEGMENTS = 4


class Flusher:
    """The collections written since their last flush, and the task flushing them."""

    def __init__(
        self, shards: Shards, changed: ChangedPoints, interval: float, *, engine: bool = False
    ) -> None:
        self.shards = shards
        self.changed = changed
        #: Seconds between maintenance ticks; 0: no task (flushes only when asked, and on close).
        self.interval = interval
        #: Every flush the engine's own (stalls the process for its duration); else the log's.
        self.engine = engine
        self.log_segments = LOG_SEGMENTS
        self.dirty: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def flush(self) -> None:
        """Make every shard written since the last flush durable (its log fsynced, or the
        engine's flush: see the module docstring), and save its count of changed points
        (:mod:`.edge_changes`)."""
        for name in list(self.dirty):
            self.dirty.discard(name)  # a write during the flush marks it dirty again
            async with self.shards.ensuring:  # an index swap closes the shard it replaces
                shard = self.shards.live.get(name)
                if shard is None:
                    continue
                try:
                    synced = not self.engine and await asyncio.to_thread(
                        sync_log, self.shards.root, name, self.log_segments
                    )
                    if not synced:
                        await asyncio.to_thread(self.shards.run, shard.flush)
                except OSError as exc:
                    self.dirty.add(name)
                    raise TransientError(f"cannot sync the log of {name}: {exc}") from exc
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
        # The upkeep runs beside the ticks, one at a time: an index build in it takes minutes
        # at 100k points, and the flushes must go on meanwhile.
        upkeeping: asyncio.Task[None] | None = None
        try:
            while not stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), self.interval)
                try:
                    await self.flush()
                except TransientError:
                    logger.exception("flushing %s failed; will retry", self.shards.root)
                if upkeeping is not None and upkeeping.done():
                    upkeeping.result()  # a failure not transient ends the task, as it did inline
                if not stopping.is_set() and (upkeeping is None or upkeeping.done()):
                    upkeeping = asyncio.create_task(self._upkeep(upkeep))
            if upkeeping is not None:
                await upkeeping  # stopping: what it is doing finishes first
        finally:
            if upkeeping is not None and not upkeeping.done():  # abandoned: cancelled
                upkeeping.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await upkeeping

    async def _upkeep(self, upkeep: Callable[[], Awaitable[None]]) -> None:
        try:
            await upkeep()
        except TransientError:
            logger.exception("maintenance of %s failed; will retry", self.shards.root)


def sync_log(root: Path, name: str, limit: int) -> bool:
    """Fsync the live shard's write-ahead log: its files, then its directory (a segment the
    engine created or renamed since is durable too). False, syncing nothing, if the log
    holds more than ``limit`` closed segments: then the engine's flush is due."""
    log = edge_build.live_path(root, name) / "wal"
    for _ in range(3):  # the engine may rename a full segment meanwhile: list again
        names = os.listdir(log)
        if sum(n.startswith("closed-") for n in names) > limit:
            return False
        try:
            for entry in names:
                _fsync(log / entry)
        except FileNotFoundError:
            continue
        _fsync(log)
        return True
    return False


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

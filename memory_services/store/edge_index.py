"""When and how an edge store indexes a collection (HNSW), serving meanwhile.

Searches scan a scope's points until an index is built, and the engine never builds one by
itself. Its ``optimize()`` holds the GIL for as long as it runs (7-14 s per 20k new points at
40-100k), so the store never calls it on a live shard: a child process builds an indexed copy
while this one keeps serving, and the copy is swapped in (:mod:`.edge_build`). The store
indexes as it goes: once ``index_after`` points were written to a collection since its last
indexing, the maintenance task indexes it at the next moment the store has been idle for
``index_when_idle`` seconds, or at once past four times ``index_after``. Writes here count
points upserted or given new payloads: a payload change moves a point out of its indexed
segment into the scanned one (a retrieval's access statistics do, so reads alone grow what
searches scan: 30k such points at 100k facts made a dense search 4.4x slower), which the
engine's own count hides (the store counts them: :mod:`.edge_changes`). Small collections
stay unindexed: the engine only indexes segments past its own threshold (≈6.5k 384-d
vectors), and below that a scope's payload index makes a scan cheap. Figures:
``benchmarks/fact_memory.py``, ``benchmarks/index_stall.py``, ``benchmarks/read_wear.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any

import qdrant_edge as qe

from memory_services.store import edge_build, edge_query
from memory_services.store.edge_changes import ChangedPoints
from memory_services.store.edge_shards import Shards, close
from react_mem.errors import TransientError

logger = logging.getLogger(__name__)

#: Points per page streamed to the index builder, and per catch-up call at the swap: each is
#: one engine call on the loop (≈10 ms for 512 384-d points; a catch-up page is two, a read
#: and a write, as many as an upsert chunk).
EXPORT_PAGE, CATCH_UP_PAGE = 512, 64


class Indexer:
    """Writes counted per collection since its last indexing, and the index runs."""

    def __init__(
        self,
        shards: Shards,
        dirty: set[str],
        changed: ChangedPoints,
        *,
        index_after: int,
        index_when_idle: float,
        on_indexed: Callable[[str, float], None] | None,
    ) -> None:
        self.shards = shards
        #: The flusher's set of collections to flush (a swapped-in shard is one).
        self.dirty = dirty
        #: Points written to a collection before it is indexed again; 0: never automatically.
        self.index_after = index_after
        self.index_when_idle = index_when_idle
        #: Told of each automatic indexing run: the collection and its seconds (metrics).
        self.on_indexed = on_indexed or (lambda collection, seconds: None)
        #: Automatic indexing runs so far, and the seconds the last one took.
        self.indexed = 0
        self.last_index_seconds = 0.0
        self.written: dict[str, int] = {}
        #: Points the engine's count of indexed ones hides (shared with the flusher, which
        #: saves it at each flush).
        self.changed = changed
        #: Ids written to a collection while its index is built (copied over at the swap).
        self.touched: dict[str, set[str]] = {}
        self._lock = asyncio.Lock()

    async def loaded(self, name: str, shard: qe.EdgeShard) -> None:
        """A shard was opened: its points outside an index count as written."""
        info = await asyncio.to_thread(self.shards.run, shard.info)
        changed = await self.changed.load(name)
        self.written[name] = edge_query.unindexed(info, changed)

    def wrote(self, collection: str, ids: Sequence[str], *, payloads: bool = False) -> None:
        """``ids`` were upserted (or, ``payloads``, given new payloads)."""
        self.dirty.add(collection)
        self.written[collection] = self.written.get(collection, 0) + len(ids)
        touched = self.touched.get(collection)
        if touched is not None:
            touched.update(ids)
        if payloads:
            self.changed.payloads(collection, ids, cap=4 * self.index_after)

    def deleting(self, collection: str, ids: Sequence[str]) -> None:
        """The points ``ids`` are about to be deleted (no await until then)."""
        touched = self.touched.get(collection)
        if touched is not None:  # an index build copies these ids' fate at its swap
            touched.update(ids)

    def deleted(self, collection: str, n: int) -> None:
        self.dirty.add(collection)
        self.changed.deleted(collection, n)

    async def optimize(self, collection: str) -> bool:
        """Index ``collection`` now in a child process, then swap the copy in; True if
        anything was indexed; TransientError if the build failed (nothing changed)."""
        self.shards[collection]
        async with self._lock:
            self.written[collection] = 0  # writes from now on count towards the next run
            taken, built = self.changed.take(collection), False
            try:
                indexed = await self._rebuild(collection)
                built = True
                return indexed
            except (OSError, RuntimeError) as exc:
                raise TransientError(f"indexing {collection} failed: {exc}") from exc
            finally:
                if not built:  # the old shard's count still holds
                    self.changed.give_back(collection, taken)

    async def _rebuild(self, name: str) -> bool:
        shards, root = self.shards, self.shards.root
        current = await asyncio.to_thread(edge_build.live_path, root, name)
        target = await asyncio.to_thread(edge_build.next_path, root, name)
        await asyncio.to_thread(shutil.rmtree, target, ignore_errors=True)  # a crashed build
        touched: set[str] = set()
        self.touched[name] = touched
        proc = await edge_build.spawn(target, shards.sizes[name], shards.wanted[name])
        loading: asyncio.Future[qe.EdgeShard] | None = None
        swapped = False
        try:
            await self._export(name, proc)
            indexed = await edge_build.finished(proc)
            # Opening reads the new shard's files holding the GIL, from the disk if they are
            # not in the page cache: they are read into it first, the GIL free.
            await asyncio.to_thread(edge_build.warm, target)
            opening = functools.partial(edge_build.load, target)
            loading = asyncio.ensure_future(asyncio.to_thread(shards.run, opening))
            new = await asyncio.shield(loading)
            async with shards.ensuring:
                index = functools.partial(edge_build.index_fields, new, shards.wanted[name])
                await asyncio.to_thread(shards.run, index)  # an ensure() may have added one
                await asyncio.to_thread(edge_build.stage_live, root, name, target)
                while len(touched) > CATCH_UP_PAGE:  # serving in between
                    self._catch_up(name, new, [touched.pop() for _ in range(CATCH_UP_PAGE)])
                    await asyncio.sleep(0)
                # The last ids, the pointer and the swap with no await: no write in between.
                self._catch_up(name, new, list(touched))
                edge_build.set_live(root, name)
                old, shards.live[name], swapped = shards.live[name], new, True
                self.dirty.add(name)
                del self.touched[name]
                # The rename made durable before a flush (which waits for ``ensuring``) can
                # sync a write to the new shard; the old one closed without a flush of its
                # own (the engine's close flushes anyway) and deleted next, its dirty pages
                # written back first with the GIL free (the close's syncs hold it).
                try:
                    await asyncio.to_thread(edge_build.sync_dir, root)
                finally:
                    try:
                        await asyncio.to_thread(edge_build.sync_files, current)
                    finally:
                        await asyncio.to_thread(close, old, flush=False)
            await asyncio.to_thread(edge_build.remove_stale, root, name)
            return indexed
        finally:
            self.touched.pop(name, None)
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            if not swapped:
                if loading is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.to_thread(close, await loading, flush=False)
                await asyncio.to_thread(shutil.rmtree, target, ignore_errors=True)

    async def _export(self, name: str, proc: asyncio.subprocess.Process) -> None:
        """Stream every point of the live shard to the builder, a page per engine call."""
        assert proc.stdin is not None
        offset: Any = None
        while True:
            shard = self.shards[name]
            page, offset, _ = self.shards.run(
                functools.partial(edge_build.export_page, shard, offset, EXPORT_PAGE)
            )
            proc.stdin.write(page)
            await proc.stdin.drain()  # serves requests while the builder reads
            if offset is None:
                return

    def _catch_up(self, name: str, new: qe.EdgeShard, ids: list[str]) -> None:
        if ids:
            old = self.shards.live[name]
            self.shards.run(functools.partial(edge_build.catch_up, old, new, ids))

    async def due(self, *, idle: bool = False) -> list[str]:
        """Optimise each collection whose writes since its last optimisation reached
        ``index_after``, if the store is idle (or ``idle`` says to treat it so, or the writes
        reached four times that); return the collections optimised."""
        done = []
        for name, written in list(self.written.items()):
            quiet = idle or self.shards.idle_for() >= self.index_when_idle
            if self.index_after <= 0 or written < self.index_after:
                continue
            if not quiet and written < 4 * self.index_after:
                continue
            # Writes over-count (a point written twice, small segments the engine never
            # indexes); the engine knows how many points lie outside an index.
            info = await asyncio.to_thread(self.shards.run, self.shards.live[name].info)
            unindexed = edge_query.unindexed(info, self.changed.count(name))
            if unindexed < self.index_after:
                self.written[name] = unindexed
                continue
            started = time.perf_counter()
            try:
                await self.optimize(name)
            except TransientError:
                self.written[name] = written  # try again at the next idle moment
                raise
            self.last_index_seconds = time.perf_counter() - started
            self.indexed += 1
            self.on_indexed(name, self.last_index_seconds)
            done.append(name)
            logger.info(
                "indexed %s after %d writes in %.1f s", name, written, self.last_index_seconds
            )
        return done

"""The embedded backend: Qdrant Edge (``qdrant-edge-py``), one shard directory per collection.

What the store adds to the engine, and why, is in ``docs/edge-store.md``; each part keeps its
own state in its own module: the open shards and the one way to call the engine
(:mod:`.edge_shards`), flushing and the maintenance task (:mod:`.edge_flush`), indexing
while serving (:mod:`.edge_index`, :mod:`.edge_build`, :mod:`.edge_changes`), paging out
shard files (:mod:`.residency`), lexical vectors (:mod:`.lexical`, :mod:`.edge_query`),
filters (:mod:`.edge_filter`) and ties (:mod:`.ties`), the point operations
(:mod:`.edge_points`). This module is the store's life: open, ensure, maintain, close.

Memory: the engine maps its shard files, and what it writes or reads stays resident; after a
shard opens and at each maintenance tick the store pages out what needs no residency
(:meth:`EdgeStore.trim`, :mod:`.residency`; ``benchmarks/memory_growth.py``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from pathlib import Path

from memory_services.store import checks, edge_build, edge_query, residency
from memory_services.store.base import SCOPE_KEYS, CollectionSpec
from memory_services.store.edge_changes import ChangedPoints
from memory_services.store.edge_flush import Flusher
from memory_services.store.edge_index import Indexer
from memory_services.store.edge_points import EdgePoints
from memory_services.store.edge_shards import Shards
from react_mem.errors import ConfigurationError, NotStarted
from react_mem.ownership import DirectoryOwner


class EdgeStore(EdgePoints):
    """:class:`~memory_services.store.base.VectorStore` on Qdrant Edge shards under ``path``."""

    def __init__(
        self,
        path: Path,
        *,
        flush_interval: float = 5.0,
        index_after: int = 20_000,
        index_when_idle: float = 1.0,
        on_indexed: Callable[[str, float], None] | None = None,
        resident_mib: float | None = 32.0,
        flush_engine: bool = False,
    ) -> None:
        self.path = path
        #: MiB of vectors and payloads (what searches read) left resident before a
        #: maintenance tick pages them out; None: the store pages out nothing.
        self.resident_mib = resident_mib
        self._shards = Shards(path)
        changed = ChangedPoints(path)
        # flush_engine: every flush the engine's own, which stalls the process (the
        # behaviour before; benchmarks/loop_stall.py compares), see edge_flush.py.
        self._flusher = Flusher(self._shards, changed, flush_interval, engine=flush_engine)
        self._indexer = Indexer(
            self._shards,
            self._flusher.dirty,
            changed,
            index_after=index_after,
            index_when_idle=index_when_idle,
            on_indexed=on_indexed,
        )
        #: One process owns the directory: a second opener is refused at once, where the
        #: engine would fail on its write-ahead log's lock only when a shard loads.
        self._owner = DirectoryOwner(path, "the embedded store")

    # Settings and figures of the parts, read (and in tests set) on the store.
    @property
    def flush_interval(self) -> float:
        return self._flusher.interval

    @flush_interval.setter
    def flush_interval(self, seconds: float) -> None:
        self._flusher.interval = seconds

    @property
    def index_after(self) -> int:
        """Points written to a collection before it is indexed again; 0: never automatically."""
        return self._indexer.index_after

    @property
    def on_indexed(self) -> Callable[[str, float], None]:
        """Told of each automatic indexing run: the collection and its seconds (metrics)."""
        return self._indexer.on_indexed

    @property
    def indexed(self) -> int:
        """Automatic indexing runs so far (in a child process; the store serves meanwhile)."""
        return self._indexer.indexed

    @property
    def last_index_seconds(self) -> float:
        return self._indexer.last_index_seconds

    @property
    def unflushed(self) -> frozenset[str]:
        """Collections written since their last flush (in the WAL, not yet fsynced)."""
        return frozenset(self._flusher.dirty)

    async def open(self) -> None:
        if not self._shards.opened:
            await asyncio.to_thread(self._owner.take)
        self._shards.opened = True
        self._flusher.start(self.maintain)

    async def ensure(self, spec: CollectionSpec) -> None:
        name, shards = checks.collection_name(spec.name), self._shards
        if not shards.opened:
            raise NotStarted("edge store is not open")
        async with shards.ensuring:
            if name in shards.live:
                if shards.sizes[name] != spec.vector_size:
                    raise ConfigurationError(f"collection {name!r} is open with another size")
            else:
                shard = await shards.load(name, spec.vector_size)
                shards.live[name], shards.sizes[name] = shard, spec.vector_size
                shards.fields[name] = spec.text_fields
                lexical = functools.partial(
                    edge_query.add_lexical, shard, name, spec.text_fields
                )  # a collection from before lexical search gains its vectors here, once
                if await asyncio.to_thread(shards.run, lexical):
                    self._flusher.dirty.add(name)
                await self._indexer.loaded(name, shard)
            # The workspace is the tenant: optimised segments are laid out by it.
            wanted = dict.fromkeys(SCOPE_KEYS, "keyword") | {SCOPE_KEYS[0]: edge_build.TENANT}
            wanted.update({key: kind.value for key, kind in spec.indexes.items()})
            shards.wanted[name] = shards.wanted.get(name, {}) | wanted
            # An index writes and syncs files (≈0.1 s each): off the loop, at start-up.
            index = functools.partial(edge_build.index_fields, shards[name], shards.wanted[name])
            await asyncio.to_thread(shards.run, index)
        await self.trim()  # opening read the shard's log and index files whole

    async def trim(self, *, data: bool = True) -> dict[str, int]:
        """Page out the shards' write-ahead logs and payload-index files, and (``data``)
        their vectors and payloads if more than ``resident_mib`` of them are resident; the
        resident bytes by kind found before (see :mod:`~memory_services.store.residency`)."""
        if self.resident_mib is None:
            return {}
        budget = int(self.resident_mib * 2**20) if data else None
        return await asyncio.to_thread(residency.trim, self.path, budget)

    async def flush(self) -> None:
        """Make every shard written since the last flush durable against a power loss (its
        write-ahead log fsynced off the loop; see :mod:`.edge_flush`)."""
        await self._flusher.flush()

    async def optimize(self, collection: str) -> bool:
        """Build HNSW indexes now, so large scopes stop scanning: a child process indexes a
        copy of the collection while the store keeps serving, then the copy replaces it;
        :meth:`index_due` calls this when writes make it worth it. True if anything was
        indexed; raises TransientError if the build failed (the collection is unchanged)."""
        return await self._indexer.optimize(collection)

    async def compact(self, collection: str) -> bool:
        """Rewrite the shard from its live points (the rebuild :meth:`optimize` does, which
        copies no deleted point and starts a fresh write-ahead log), then delete the old
        one: a delete alone leaves the record's bytes in the segment and the WAL."""
        await self.optimize(collection)
        return True

    async def index_due(self, *, idle: bool = False) -> list[str]:
        """Optimise each collection whose writes since its last optimisation reached
        ``index_after``, if the store is idle (or ``idle`` says to treat it so, or the writes
        reached four times that); return the collections optimised."""
        return await self._indexer.due(idle=idle)

    async def maintain(self) -> None:
        """One maintenance tick after the flush: index what is due, page out what needs no
        residency; what searches read only if no engine call came for ``flush_interval``
        seconds (see the module docstring)."""
        await self.index_due()
        await self.trim(data=self._shards.idle_for() >= self.flush_interval)

    async def close(self) -> None:
        self._shards.opened = False
        # A flush in progress finishes before shards close; an index build would take long.
        await self._flusher.stop(abandon=bool(self._indexer.touched))
        for name in list(self._shards.live):
            await self._indexer.changed.save(name)
        self._flusher.dirty.clear()
        try:
            await self._shards.close_all()
        finally:
            self._owner.release()

"""The embedded backend: Qdrant Edge (``qdrant-edge-py``), one shard directory per collection.

Engine calls run inline on the event loop. The binding holds the GIL for the whole call, so a
worker thread cannot free the loop (measured: a search moved to a thread still stalls the loop
for its full duration) and the hop (≈0.05 ms) would cost as much as a typical call: a search
in a scope of 100-1,000 points takes 0.15-0.3 ms, a one-point upsert 0.05 ms. Opening shards,
creating indexes, flushing and closing (file I/O, fsync) go through :func:`asyncio.to_thread`
so that a binding which releases the GIL would stop blocking at once.

Durability: an update returns once it is in the shard's write-ahead log, which survives a
crash of the process (tested by killing a writer), the guarantee a Qdrant server gives an
acknowledged write. Flushing (an fsync of the segments: 15 ms at 10k points, ≈90 ms at 100k)
is therefore not done per write: dirty shards are flushed every ``flush_interval`` seconds
(Qdrant's own default is 5 s), which bounds what a power loss can take and keeps the WAL
short, and on close.

Searches scan the scope's points until :meth:`EdgeStore.optimize` builds HNSW indexes; the
engine never does so by itself, and optimising holds the GIL for minutes at 100k points, so
it is an explicit maintenance step (figures in ``benchmarks/vector_store.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from memory_services.store import checks
from memory_services.store.base import (
    SCOPE_KEYS,
    CollectionSpec,
    Condition,
    FieldType,
    Hit,
    Record,
    Scope,
    require_scope,
)
from memory_services.store.edge_filter import scope_filter
from react_mem.errors import ConfigurationError, ReactMemError, TransientError

logger = logging.getLogger(__name__)

T = TypeVar("T")

_INDEX: dict[FieldType, qe.PayloadSchemaType] = {
    FieldType.KEYWORD: qe.PayloadSchemaType.Keyword,
    FieldType.INTEGER: qe.PayloadSchemaType.Integer,
    FieldType.FLOAT: qe.PayloadSchemaType.Float,
    FieldType.BOOL: qe.PayloadSchemaType.Bool,
}


class EdgeStore:
    """:class:`~memory_services.store.base.VectorStore` on Qdrant Edge shards under ``path``."""

    def __init__(self, path: Path, *, flush_interval: float = 5.0) -> None:
        self.path = path
        self.flush_interval = flush_interval
        self._shards: dict[str, qe.EdgeShard] = {}
        self._sizes: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._opened = False
        self._flusher: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._ensuring = asyncio.Lock()

    async def open(self) -> None:
        await asyncio.to_thread(self.path.mkdir, parents=True, exist_ok=True)
        self._opened = True
        if self._flusher is None and self.flush_interval > 0:
            self._stopping = asyncio.Event()
            self._flusher = asyncio.create_task(self._flush_periodically(self._stopping))

    async def ensure(self, spec: CollectionSpec) -> None:
        name = checks.collection_name(spec.name)
        if not self._opened:
            raise TransientError("edge store is not open")
        async with self._ensuring:  # two loads of one shard would fight over its WAL lock
            if name in self._shards:
                if self._sizes[name] != spec.vector_size:
                    raise ConfigurationError(f"collection {name!r} is open with another size")
            else:
                self._shards[name] = await self._load(self.path / name, spec.vector_size)
                self._sizes[name] = spec.vector_size
            # The workspace is the tenant: optimised segments are laid out by it.
            wanted: dict[str, Any] = dict.fromkeys(SCOPE_KEYS, qe.PayloadSchemaType.Keyword)
            wanted[SCOPE_KEYS[0]] = qe.KeywordIndexParams(is_tenant=True)
            wanted.update({key: _INDEX[kind] for key, kind in spec.indexes.items()})
            # An index writes and syncs files (≈0.1 s each): off the loop, at start-up.
            shard = self._shards[name]
            await asyncio.to_thread(self._call, functools.partial(_index, shard, wanted))

    async def _load(self, path: Path, size: int) -> qe.EdgeShard:
        config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=size, distance=qe.Distance.Cosine))
        exists = await asyncio.to_thread((path / "edge_config.json").exists)
        try:
            if exists:
                return await asyncio.to_thread(qe.EdgeShard.load, str(path), config)
            return await asyncio.to_thread(qe.EdgeShard.create, str(path), config)
        except Exception as exc:
            if "ncompatible" in str(exc) or "dimension" in str(exc).lower():
                raise ConfigurationError(f"edge shard {path} does not fit {size}-d: {exc}") from exc
            raise TransientError(f"cannot open edge shard {path}: {exc}") from exc

    def _shard(self, collection: str) -> qe.EdgeShard:
        try:
            return self._shards[collection]
        except KeyError:
            if not self._opened:
                raise TransientError("edge store is closed") from None
            raise ConfigurationError(f"collection {collection!r} was never ensured") from None

    @staticmethod
    def _call(fn: Callable[[], T]) -> T:
        """One engine call; its errors become TransientError (ours pass through)."""
        try:
            return fn()
        except ReactMemError:
            raise
        except Exception as exc:
            raise TransientError(f"qdrant-edge: {exc}") from exc

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        shard, size = self._shard(collection), self._sizes[collection]
        points = [qe.Point(*checks.record(rec, size)) for rec in records]
        if points:
            self._call(lambda: shard.update(qe.UpdateOperation.upsert_points(points)))
            self._dirty.add(collection)

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        *,
        scope: Scope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
    ) -> list[Hit]:
        [hits] = await self.search_many(
            collection, [vector], scope=scope, limit=limit, min_score=min_score, where=where
        )
        return hits

    async def search_many(
        self,
        collection: str,
        vectors: Sequence[Sequence[float]],
        *,
        scope: Scope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
    ) -> list[list[Hit]]:
        shard, size = self._shard(collection), self._sizes[collection]
        selected, limit = scope_filter(scope, where), checks.limit(limit)
        requests = [
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(checks.vector(vector, size)),
                filter=selected,
                score_threshold=min_score,
                with_payload=True,
                with_vector=False,
            )
            for vector in vectors
        ]
        if not requests:
            return []
        if len(requests) == 1:
            found = [self._call(lambda: shard.query(requests[0]))]
        else:
            found = self._call(lambda: shard.query_batch(qe.QueryBatchRequest(requests)))
        return [[Hit(str(p.id), p.score, p.payload or {}) for p in points] for points in found]

    async def get(self, collection: str, ids: Sequence[str], *, scope: Scope) -> list[Record]:
        shard, wanted = self._shard(collection), checks.record_ids(ids)
        if not wanted:
            require_scope(scope)
            return []
        checks.limit(len(wanted), name="number of ids")
        request = qe.ScrollRequest(
            limit=len(wanted),
            filter=scope_filter(scope, ids=wanted),
            with_payload=True,
            with_vector=True,
        )
        found = {str(r.id): r for r in self._call(lambda: shard.scroll(request))[0]}
        return [_record(found[i]) for i in wanted if i in found]

    async def scroll(
        self,
        collection: str,
        *,
        scope: Scope,
        where: Sequence[Condition] = (),
        limit: int = 100,
        offset: str | None = None,
    ) -> tuple[list[Record], str | None]:
        shard = self._shard(collection)
        request = qe.ScrollRequest(
            offset=None if offset is None else checks.record_id(offset),
            limit=checks.limit(limit),
            filter=scope_filter(scope, where),
            with_payload=True,
            with_vector=True,
        )
        page, following = self._call(lambda: shard.scroll(request))
        return [_record(r) for r in page], None if following is None else str(following)

    async def count(self, collection: str, *, scope: Scope, where: Sequence[Condition] = ()) -> int:
        shard = self._shard(collection)
        request = qe.CountRequest(exact=True, filter=scope_filter(scope, where))
        return self._call(lambda: shard.count(request))

    async def set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: Scope
    ) -> None:
        shard, wanted = self._shard(collection), checks.record_ids(ids)
        update, selected = checks.payload_update(payload), scope_filter(scope, ids=wanted)
        if wanted and update:
            op = qe.UpdateOperation.set_payload_by_filter(selected, update)
            self._call(lambda: shard.update(op))
            self._dirty.add(collection)

    async def delete(
        self,
        collection: str,
        *,
        scope: Scope,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        shard = self._shard(collection)
        selected = scope_filter(scope, where, None if ids is None else checks.record_ids(ids))
        if ids is not None and not ids:
            return 0
        # No await between counting and deleting: nothing else on this loop writes in between.
        doomed = self._call(lambda: shard.count(qe.CountRequest(exact=True, filter=selected)))
        if doomed:
            self._call(lambda: shard.update(qe.UpdateOperation.delete_points_by_filter(selected)))
            self._dirty.add(collection)
        return doomed

    @property
    def unflushed(self) -> frozenset[str]:
        """Collections written since their last flush (in the WAL, not yet fsynced)."""
        return frozenset(self._dirty)

    async def flush(self) -> None:
        """Fsync every shard written since the last flush."""
        for name in list(self._dirty):
            self._dirty.discard(name)  # a write during the flush marks it dirty again
            shard = self._shards.get(name)
            if shard is not None:
                try:
                    await asyncio.to_thread(self._call, shard.flush)
                except TransientError:
                    self._dirty.add(name)
                    raise

    async def optimize(self, collection: str) -> bool:
        """Build HNSW indexes (blocking, and holding the GIL: seconds per 10k points), so
        large single-scope searches stop scanning. Not run automatically for that reason."""
        shard = self._shard(collection)
        return await asyncio.to_thread(self._call, shard.optimize)

    async def _flush_periodically(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.flush_interval)
            try:
                await self.flush()
            except TransientError:
                logger.exception("periodic flush of %s failed; will retry", self.path)

    async def close(self) -> None:
        self._opened = False
        if self._flusher is not None:
            self._stopping.set()  # lets a flush in progress finish before shards close
            await self._flusher
            self._flusher = None
        shards, self._shards = self._shards, {}
        self._dirty.clear()
        for shard in shards.values():
            await asyncio.to_thread(_close, shard)


def _index(shard: qe.EdgeShard, wanted: Mapping[str, Any]) -> None:
    present = set(shard.info().payload_schema)
    for key, schema in wanted.items():
        if key not in present:
            shard.update(qe.UpdateOperation.create_field_index(key, schema))


def _close(shard: qe.EdgeShard) -> None:
    try:
        shard.flush()
    finally:
        shard.close()


def _record(rec: qe.Record) -> Record:
    vec = rec.vector
    return Record(str(rec.id), rec.payload or {}, list(vec) if isinstance(vec, list) else None)  # type: ignore[arg-type]

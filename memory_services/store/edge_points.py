"""The point operations of the edge store: upsert, search, get, scroll, count, set payloads,
delete. Each is one engine call (an upsert one per ``UPSERT_CHUNK`` points, a delete two per
``DELETE_CHUNK``) on the event loop (:mod:`.edge_shards` says why), under the scope's filter
(:mod:`.edge_filter`); writes are counted towards the next index run (:mod:`.edge_index`)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import qdrant_edge as qe

from memory_services.store import checks, edge_query
from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    Condition,
    Hit,
    Record,
    Retrieval,
    StoreScope,
    require_scope,
)
from memory_services.store.edge_filter import scope_filter
from memory_services.store.edge_index import Indexer
from memory_services.store.edge_shards import Shards

#: Points an upsert (or a payload update) writes per engine call: 64 hold the loop 6-13 ms.
#: A point costs 0.1-0.2 ms on the loop (its lexical vector, then the engine's write), so
#: 1,000 in one call held it 0.2-0.5 s; a payload update of 1,000 ids 60-200 ms.
UPSERT_CHUNK = 64
#: Points a delete removes per engine call: a delete of 1,000 ids in one call held the loop
#: 78 ms (a 20k-point shard); 64 take a few milliseconds.
DELETE_CHUNK = 64


class EdgePoints:
    """The record operations of :class:`~memory_services.store.edge.EdgeStore`, over the
    shards and the indexer's counts it builds."""

    _shards: Shards
    _indexer: Indexer

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        """Every record is checked before any is written; then ``UPSERT_CHUNK`` points per
        engine call, the loop free in between (a reader meanwhile sees the first ones)."""
        self._shards[collection]
        size = self._shards.sizes[collection]
        checked = [checks.record(rec, size) for rec in records]
        for first in range(0, len(checked), UPSERT_CHUNK):
            if first:
                await asyncio.sleep(0)
            # Looked up again after the await: an index swap may have replaced the shard.
            shard, fields = self._shards[collection], self._shards.fields[collection]
            points = [
                qe.Point(i, edge_query.vectors(v, p, fields), p)
                for i, v, p in checked[first : first + UPSERT_CHUNK]
            ]
            self._shards.call(
                functools.partial(shard.update, qe.UpdateOperation.upsert_points(points))
            )
            self._indexer.wrote(collection, [str(p.id) for p in points])

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        *,
        scope: StoreScope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
        text: str | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        boost: Sequence[Condition] = (),
        leave_out: Sequence[str] = (),
    ) -> list[Hit]:
        [hits] = await self.search_many(
            collection,
            [vector],
            scope=scope,
            limit=limit,
            min_score=min_score,
            where=where,
            texts=None if text is None else [text],
            retrieval=retrieval,
            boost=boost,
            leave_out=leave_out,
        )
        return hits

    async def search_many(
        self,
        collection: str,
        vectors: Sequence[Sequence[float]],
        *,
        scope: StoreScope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
        texts: Sequence[str] | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        boost: Sequence[Condition] = (),
        leave_out: Sequence[str] = (),
    ) -> list[list[Hit]]:
        shard, size = self._shards[collection], self._shards.sizes[collection]
        selected, limit = scope_filter(scope, where), checks.limit(limit)
        boosted = scope_filter(scope, [*where, *boost]) if boost else None
        if not self._shards.fields[collection]:
            texts = None  # no lexical vectors: dense
        probes = [checks.vector(vector, size) for vector in vectors]
        planned = [
            edge_query.requests(
                probe,
                text,
                selected=selected,
                limit=limit,
                min_score=min_score,
                retrieval=retrieval,
                boosted=boosted,
                leave_out=leave_out,
            )
            for probe, text in zip(
                probes, edge_query.search_texts(texts, len(vectors)), strict=True
            )
        ]
        requests = [request for batch, _ in planned for request in batch]
        if not requests:
            return []
        if len(requests) == 1:
            found = [self._shards.call(lambda: shard.query(requests[0]))]
        else:
            found = self._shards.call(lambda: shard.query_batch(qe.QueryBatchRequest(requests)))
        results, at = [], 0
        for (batch, kinds), probe in zip(planned, probes, strict=True):
            lists, at = found[at : at + len(batch)], at + len(batch)
            results.append(edge_query.hits(lists, kinds, probe, limit, retrieval, min_score))
        return results

    async def get(self, collection: str, ids: Sequence[str], *, scope: StoreScope) -> list[Record]:
        shard, wanted = self._shards[collection], checks.record_ids(ids)
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
        found = {str(r.id): r for r in self._shards.call(lambda: shard.scroll(request))[0]}
        return [_record(found[i]) for i in wanted if i in found]

    async def scroll(
        self,
        collection: str,
        *,
        scope: StoreScope,
        where: Sequence[Condition] = (),
        limit: int = 100,
        offset: str | None = None,
    ) -> tuple[list[Record], str | None]:
        shard = self._shards[collection]
        request = qe.ScrollRequest(
            offset=None if offset is None else checks.record_id(offset),
            limit=checks.limit(limit),
            filter=scope_filter(scope, where),
            with_payload=True,
            with_vector=True,
        )
        page, following = self._shards.call(lambda: shard.scroll(request))
        return [_record(r) for r in page], None if following is None else str(following)

    async def count(
        self, collection: str, *, scope: StoreScope, where: Sequence[Condition] = ()
    ) -> int:
        shard = self._shards[collection]
        request = qe.CountRequest(exact=True, filter=scope_filter(scope, where))
        return self._shards.call(lambda: shard.count(request))

    async def set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: StoreScope
    ) -> None:
        """``UPSERT_CHUNK`` ids per engine call, the loop free in between (as :meth:`upsert`)."""
        self._shards[collection]
        wanted, update = checks.record_ids(ids), checks.payload_update(payload)
        scope_filter(scope)  # the scope is checked even when there is nothing to set
        for first in range(0, len(wanted) if update else 0, UPSERT_CHUNK):
            if first:
                await asyncio.sleep(0)
            shard, chunk = self._shards[collection], wanted[first : first + UPSERT_CHUNK]
            op = qe.UpdateOperation.set_payload_by_filter(scope_filter(scope, ids=chunk), update)
            self._shards.call(functools.partial(shard.update, op))
            self._indexer.wrote(collection, chunk, payloads=True)

    async def delete(
        self,
        collection: str,
        *,
        scope: StoreScope,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        """``DELETE_CHUNK`` points per engine call, the loop free in between (a reader
        meanwhile may still see the last ones); every id is checked first. Without ids, the
        points matching ``where`` are listed and deleted a chunk at a time until none is
        left, so a point written meanwhile that matches is deleted too: nothing matching
        outlives the call."""
        self._shards[collection]
        wanted = None if ids is None else checks.record_ids(ids)
        scope_filter(scope, where)  # the scope and conditions are checked before any delete
        if wanted is None:  # by condition: chunk after chunk until none matches
            total = gone = self._delete_chunk(collection, scope, where, None)
            while gone:
                await asyncio.sleep(0)
                gone = self._delete_chunk(collection, scope, where, None)
                total += gone
            return total
        total = 0
        for first in range(0, len(wanted), DELETE_CHUNK):
            if first:
                await asyncio.sleep(0)
            chunk = wanted[first : first + DELETE_CHUNK]
            total += self._delete_chunk(collection, scope, where, chunk)
        return total

    def _delete_chunk(
        self,
        collection: str,
        scope: StoreScope,
        where: Sequence[Condition],
        ids: Sequence[str] | None,
    ) -> int:
        """Delete up to ``DELETE_CHUNK`` points in ``scope`` matching ``where`` (and ``ids``):
        two engine calls, listing them then deleting them, with no await between, so nothing
        else on this loop writes in between."""
        shard = self._shards[collection]  # looked up now: an index swap may have replaced it
        listed = qe.ScrollRequest(
            limit=DELETE_CHUNK,
            filter=scope_filter(scope, where, ids),
            with_payload=False,
            with_vector=False,
        )
        doomed = [str(r.id) for r in self._shards.call(lambda: shard.scroll(listed))[0]]
        if doomed:
            self._indexer.deleting(collection, doomed)
            selected = scope_filter(scope, where, doomed)
            delete = qe.UpdateOperation.delete_points_by_filter(selected)
            self._shards.call(lambda: shard.update(delete))
            self._indexer.deleted(collection, len(doomed))
        return len(doomed)


def _record(rec: qe.Record) -> Record:
    return Record(str(rec.id), rec.payload or {}, edge_query.dense_of(rec.vector))

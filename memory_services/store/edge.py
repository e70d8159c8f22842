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

Indexing: searches scan a scope's points until :meth:`EdgeStore.optimize` builds HNSW
indexes, and the engine never does so by itself. The engine's ``optimize()`` holds the GIL
for as long as it runs (7-14 s per 20k new points at 40-100k), so the store never calls it
on a live shard: a child process builds an indexed copy while this one keeps serving, and the
copy is swapped in (:mod:`memory_services.store.edge_build`). The store indexes as it goes:
once ``index_after`` points were written to a collection since its last indexing, the
maintenance task (which also flushes) indexes it at the next moment the store has been idle
for ``index_when_idle`` seconds, or at once past four times ``index_after``. Writes here
count points upserted or given new payloads: a payload change moves a point out of its
indexed segment into the scanned one (a retrieval's access statistics do, so reads alone grow
what searches scan: 30k such points at 100k facts made a dense search 4.4x slower), which the
engine's own count hides (the store counts them: :mod:`.edge_changes`). Small collections
stay unindexed: the engine only indexes segments past its own threshold (≈6.5k 384-d
vectors), and below that a scope's payload index makes a scan cheap. Figures:
``benchmarks/fact_memory.py``, ``benchmarks/index_stall.py``, ``benchmarks/read_wear.py``.

Memory: the engine maps its shard files, and what it writes or reads of them stays resident.
After a shard opens and at every maintenance tick the store pages out its write-ahead logs
and payload-index files, and the vectors and payloads too once more than ``resident_mib`` of
them are resident (:mod:`memory_services.store.residency`), so RSS stays near the store's
fresh size however much it holds. The vectors and payloads wait for a tick that finds the
store idle (no engine call for ``flush_interval`` seconds): paged out while searches run, they
were read straight back from the files (at 100k facts, ≈300 MiB more read per 1,024 facts
ingested through the bus). Figures: ``benchmarks/memory_growth.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from memory_services.store import checks, edge_build, edge_query, lexical, residency
from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    SCOPE_KEYS,
    CollectionSpec,
    Condition,
    Hit,
    Record,
    Retrieval,
    StoreScope,
    require_scope,
)
from memory_services.store.edge_changes import ChangedPoints
from memory_services.store.edge_filter import scope_filter
from react_mem.errors import ConfigurationError, ReactMemError, TransientError
from react_mem.ownership import DirectoryOwner

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Points per page streamed to the index builder, and per catch-up call at the swap: each is
#: one engine call on the loop (≈10 ms for 512 384-d points).
EXPORT_PAGE, CATCH_UP_PAGE = 512, 256


class EdgeStore:
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
    ) -> None:
        self.path = path
        self.flush_interval = flush_interval
        #: MiB of vectors and payloads (what searches read) left resident before a
        #: maintenance tick pages them out; None: the store pages out nothing.
        self.resident_mib = resident_mib
        #: Points written to a collection before it is indexed again; 0: never automatically.
        self.index_after = index_after
        self.index_when_idle = index_when_idle
        #: Automatic indexing runs so far, and the seconds the last one took (in a child
        #: process; the store serves meanwhile).
        self.indexed = 0
        self.last_index_seconds = 0.0
        #: Told of each automatic indexing run: the collection and its seconds (metrics).
        self.on_indexed = on_indexed or (lambda collection, seconds: None)
        self._shards: dict[str, qe.EdgeShard] = {}
        self._sizes: dict[str, int] = {}
        #: Each collection's text fields, the source of its lexical vectors.
        self._fields: dict[str, tuple[str, ...]] = {}
        self._dirty: set[str] = set()
        self._written: dict[str, int] = {}
        self._changed = ChangedPoints(path)
        self._wanted: dict[str, dict[str, str]] = {}
        #: Ids written to a collection while its index is built (copied over at the swap).
        self._touched: dict[str, set[str]] = {}
        self._indexing = asyncio.Lock()
        self._last_call = time.monotonic()
        self._opened = False
        self._flusher: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._ensuring = asyncio.Lock()
        #: One process owns the directory: a second opener is refused at once, where the
        #: engine would fail on its write-ahead log's lock only when a shard loads.
        self._owner = DirectoryOwner(path, "the embedded store")

    async def open(self) -> None:
        if not self._opened:
            await asyncio.to_thread(self._owner.take)
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
                shard = await self._load(name, spec.vector_size)
                self._shards[name], self._sizes[name] = shard, spec.vector_size
                self._fields[name] = spec.text_fields
                lexical = functools.partial(
                    edge_query.add_lexical, shard, name, spec.text_fields
                )  # a collection from before lexical search gains its vectors here, once
                if await asyncio.to_thread(self._run, lexical):
                    self._dirty.add(name)
                info = await asyncio.to_thread(self._run, shard.info)
                changed = await self._changed.load(name)
                self._written[name] = edge_query.unindexed(info, changed)
            # The workspace is the tenant: optimised segments are laid out by it.
            wanted = dict.fromkeys(SCOPE_KEYS, "keyword") | {SCOPE_KEYS[0]: edge_build.TENANT}
            wanted.update({key: kind.value for key, kind in spec.indexes.items()})
            self._wanted[name] = self._wanted.get(name, {}) | wanted
            # An index writes and syncs files (≈0.1 s each): off the loop, at start-up.
            shard = self._shards[name]
            index = functools.partial(edge_build.index_fields, shard, self._wanted[name])
            await asyncio.to_thread(self._run, index)
        await self.trim()  # opening read the shard's log and index files whole

    async def trim(self, *, data: bool = True) -> dict[str, int]:
        """Page out the shards' write-ahead logs and payload-index files, and (``data``)
        their vectors and payloads if more than ``resident_mib`` of them are resident; the
        resident bytes by kind found before (see :mod:`~memory_services.store.residency`)."""
        if self.resident_mib is None:
            return {}
        budget = int(self.resident_mib * 2**20) if data else None
        return await asyncio.to_thread(residency.trim, self.path, budget)

    async def _load(self, name: str, size: int) -> qe.EdgeShard:
        path = await asyncio.to_thread(edge_build.live_path, self.path, name)
        config = edge_build.config(size)
        exists = await asyncio.to_thread((path / "edge_config.json").exists)
        try:
            if exists:
                shard = await asyncio.to_thread(_load_shard, path, size)
            else:
                shard = await asyncio.to_thread(qe.EdgeShard.create, str(path), config)
        except Exception as exc:
            if "ncompatible" in str(exc) or "dimension" in str(exc).lower():
                raise ConfigurationError(f"edge shard {path} does not fit {size}-d: {exc}") from exc
            raise TransientError(f"cannot open edge shard {path}: {exc}") from exc
        # Holding the live shard (its WAL lock), no other store uses these directories.
        await asyncio.to_thread(edge_build.remove_stale, self.path, name)
        return shard

    def _shard(self, collection: str) -> qe.EdgeShard:
        try:
            return self._shards[collection]
        except KeyError:
            if not self._opened:
                raise TransientError("edge store is closed") from None
            raise ConfigurationError(f"collection {collection!r} was never ensured") from None

    def _call(self, fn: Callable[[], T]) -> T:
        """One engine call for a caller (it makes the store busy, see :meth:`index_due`)."""
        self._last_call = time.monotonic()
        return self._run(fn)

    @staticmethod
    def _run(fn: Callable[[], T]) -> T:
        """One engine call; its errors become TransientError (ours pass through)."""
        try:
            return fn()
        except ReactMemError:
            raise
        except Exception as exc:
            raise TransientError(f"qdrant-edge: {exc}") from exc

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        shard, size = self._shard(collection), self._sizes[collection]
        fields = self._fields[collection]
        points = [
            qe.Point(i, edge_query.vectors(v, p, fields), p)
            for i, v, p in (checks.record(rec, size) for rec in records)
        ]
        if points:
            self._call(lambda: shard.update(qe.UpdateOperation.upsert_points(points)))
            self._wrote(collection, [str(p.id) for p in points])

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
    ) -> list[list[Hit]]:
        shard, size = self._shard(collection), self._sizes[collection]
        selected, limit = scope_filter(scope, where), checks.limit(limit)
        boosted = scope_filter(scope, [*where, *boost]) if boost else None
        if not self._fields[collection]:
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
            )
            for probe, text in zip(
                probes, edge_query.search_texts(texts, len(vectors)), strict=True
            )
        ]
        requests = [request for batch, _ in planned for request in batch]
        if not requests:
            return []
        if len(requests) == 1:
            found = [self._call(lambda: shard.query(requests[0]))]
        else:
            found = self._call(lambda: shard.query_batch(qe.QueryBatchRequest(requests)))
        results, at = [], 0
        for (batch, kinds), probe in zip(planned, probes, strict=True):
            lists, at = found[at : at + len(batch)], at + len(batch)
            results.append(edge_query.hits(lists, kinds, probe, limit, retrieval))
        return results

    async def get(self, collection: str, ids: Sequence[str], *, scope: StoreScope) -> list[Record]:
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
        scope: StoreScope,
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

    async def count(
        self, collection: str, *, scope: StoreScope, where: Sequence[Condition] = ()
    ) -> int:
        shard = self._shard(collection)
        request = qe.CountRequest(exact=True, filter=scope_filter(scope, where))
        return self._call(lambda: shard.count(request))

    async def set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: StoreScope
    ) -> None:
        shard, wanted = self._shard(collection), checks.record_ids(ids)
        update, selected = checks.payload_update(payload), scope_filter(scope, ids=wanted)
        if wanted and update:
            op = qe.UpdateOperation.set_payload_by_filter(selected, update)
            self._call(lambda: shard.update(op))
            self._wrote(collection, wanted)
            self._changed.payloads(collection, wanted, cap=4 * self.index_after)

    async def delete(
        self,
        collection: str,
        *,
        scope: StoreScope,
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
            touched = self._touched.get(collection)
            if touched is not None:  # an index build copies these ids' fate at its swap
                listed = qe.ScrollRequest(
                    limit=doomed, filter=selected, with_payload=False, with_vector=False
                )
                touched.update(str(r.id) for r in self._run(lambda: shard.scroll(listed))[0])
            self._call(lambda: shard.update(qe.UpdateOperation.delete_points_by_filter(selected)))
            self._dirty.add(collection)
            self._changed.deleted(collection, doomed)
        return doomed

    def _wrote(self, collection: str, ids: Sequence[str]) -> None:
        self._dirty.add(collection)
        self._written[collection] = self._written.get(collection, 0) + len(ids)
        touched = self._touched.get(collection)
        if touched is not None:
            touched.update(ids)

    @property
    def unflushed(self) -> frozenset[str]:
        """Collections written since their last flush (in the WAL, not yet fsynced)."""
        return frozenset(self._dirty)

    async def flush(self) -> None:
        """Fsync every shard written since the last flush."""
        for name in list(self._dirty):
            self._dirty.discard(name)  # a write during the flush marks it dirty again
            async with self._ensuring:  # an index swap closes the shard it replaces
                shard = self._shards.get(name)
                if shard is None:
                    continue
                try:
                    await asyncio.to_thread(self._run, shard.flush)
                except TransientError:
                    self._dirty.add(name)
                    raise
                await self._changed.save(name)

    async def optimize(self, collection: str) -> bool:
        """Build HNSW indexes now, so large scopes stop scanning: a child process indexes a
        copy of the collection while the store keeps serving, then the copy replaces it;
        :meth:`index_due` calls this when writes make it worth it. True if anything was
        indexed; raises TransientError if the build failed (the collection is unchanged)."""
        self._shard(collection)
        async with self._indexing:
            self._written[collection] = 0  # writes from now on count towards the next run
            taken, built = self._changed.take(collection), False
            try:
                indexed = await self._rebuild(collection)
                built = True
                return indexed
            except (OSError, RuntimeError) as exc:
                raise TransientError(f"indexing {collection} failed: {exc}") from exc
            finally:
                if not built:  # the old shard's count still holds
                    self._changed.give_back(collection, taken)

    async def compact(self, collection: str) -> bool:
        """Rewrite the shard from its live points (the rebuild :meth:`optimize` does, which
        copies no deleted point and starts a fresh write-ahead log), then delete the old
        one: a delete alone leaves the record's bytes in the segment and the WAL."""
        await self.optimize(collection)
        return True

    async def _rebuild(self, name: str) -> bool:
        target = await asyncio.to_thread(edge_build.next_path, self.path, name)
        await asyncio.to_thread(shutil.rmtree, target, ignore_errors=True)  # a crashed build
        touched: set[str] = set()
        self._touched[name] = touched
        proc = await edge_build.spawn(target, self._sizes[name], self._wanted[name])
        loading: asyncio.Future[qe.EdgeShard] | None = None
        swapped = False
        try:
            await self._export(name, proc)
            indexed = await edge_build.finished(proc)
            # Opening reads the new shard's files holding the GIL (≈0.1 s at 40k points).
            opening = functools.partial(qe.EdgeShard.load, str(target))
            loading = asyncio.ensure_future(asyncio.to_thread(self._run, opening))
            new = await asyncio.shield(loading)
            async with self._ensuring:
                index = functools.partial(edge_build.index_fields, new, self._wanted[name])
                await asyncio.to_thread(self._run, index)  # an ensure() may have added one
                while len(touched) > CATCH_UP_PAGE:  # serving in between
                    self._catch_up(name, new, [touched.pop() for _ in range(CATCH_UP_PAGE)])
                    await asyncio.sleep(0)
                # The last ids, the pointer and the swap with no await: no write in between.
                self._catch_up(name, new, list(touched))
                edge_build.set_live(self.path, name, target)
                old, self._shards[name], swapped = self._shards[name], new, True
                self._dirty.add(name)
                del self._touched[name]
                await asyncio.to_thread(_close, old)
            await asyncio.to_thread(edge_build.remove_stale, self.path, name)
            return indexed
        finally:
            self._touched.pop(name, None)
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            if not swapped:
                if loading is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.to_thread(_close, await loading)
                await asyncio.to_thread(shutil.rmtree, target, ignore_errors=True)

    async def _export(self, name: str, proc: asyncio.subprocess.Process) -> None:
        """Stream every point of the live shard to the builder, a page per engine call."""
        assert proc.stdin is not None
        offset: Any = None
        while True:
            shard = self._shard(name)
            page, offset, _ = self._run(
                functools.partial(edge_build.export_page, shard, offset, EXPORT_PAGE)
            )
            proc.stdin.write(page)
            await proc.stdin.drain()  # serves requests while the builder reads
            if offset is None:
                return

    def _catch_up(self, name: str, new: qe.EdgeShard, ids: list[str]) -> None:
        if ids:
            self._run(functools.partial(edge_build.catch_up, self._shards[name], new, ids))

    async def index_due(self, *, idle: bool = False) -> list[str]:
        """Optimise each collection whose writes since its last optimisation reached
        ``index_after``, if the store is idle (or ``idle`` says to treat it so, or the writes
        reached four times that); return the collections optimised."""
        done = []
        for name, written in list(self._written.items()):
            quiet = idle or time.monotonic() - self._last_call >= self.index_when_idle
            if self.index_after <= 0 or written < self.index_after:
                continue
            if not quiet and written < 4 * self.index_after:
                continue
            # Writes over-count (a point written twice, small segments the engine never
            # indexes); the engine knows how many points lie outside an index.
            info = await asyncio.to_thread(self._run, self._shards[name].info)
            unindexed = edge_query.unindexed(info, self._changed.count(name))
            if unindexed < self.index_after:
                self._written[name] = unindexed
                continue
            started = time.perf_counter()
            try:
                await self.optimize(name)
            except TransientError:
                self._written[name] = written  # try again at the next idle moment
                raise
            self.last_index_seconds = time.perf_counter() - started
            self.indexed += 1
            self.on_indexed(name, self.last_index_seconds)
            done.append(name)
            logger.info(
                "indexed %s after %d writes in %.1f s", name, written, self.last_index_seconds
            )
        return done

    async def _flush_periodically(self, stopping: asyncio.Event) -> None:
        """The maintenance task: flush, index what is due, then page out what needs no
        residency."""
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.flush_interval)
            try:
                await self.flush()
                if not stopping.is_set():
                    await self.maintain()
            except TransientError:
                logger.exception("maintenance of %s failed; will retry", self.path)

    async def maintain(self) -> None:
        """One maintenance tick after the flush: index what is due, page out what needs no
        residency; what searches read only if no engine call came for ``flush_interval``
        seconds (see the module docstring)."""
        await self.index_due()
        await self.trim(data=time.monotonic() - self._last_call >= self.flush_interval)

    async def close(self) -> None:
        self._opened = False
        if self._flusher is not None:
            self._stopping.set()  # lets a flush in progress finish before shards close
            if self._touched:  # an index build would take long: abandon it
                self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        for name in list(self._shards):
            await self._changed.save(name)
        shards, self._shards = self._shards, {}
        self._dirty.clear()
        try:
            for shard in shards.values():
                await asyncio.to_thread(_close, shard)
        finally:
            self._owner.release()


def _load_shard(path: Path, size: int) -> qe.EdgeShard:
    """An existing shard; one from before lexical search opens without its lexical vector,
    which :func:`edge_query.add_lexical` then adds."""
    try:
        return qe.EdgeShard.load(str(path), edge_build.config(size))
    except Exception as exc:
        if "vector storages" not in str(exc) or lexical.VECTOR not in str(exc):
            raise
    return qe.EdgeShard.load(str(path), edge_build.config(size, with_terms=False))


def _close(shard: qe.EdgeShard) -> None:
    try:
        shard.flush()
    finally:
        shard.close()


def _record(rec: qe.Record) -> Record:
    return Record(str(rec.id), rec.payload or {}, edge_query.dense_of(rec.vector))

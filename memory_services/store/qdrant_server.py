"""The server backend: a Qdrant server through ``qdrant_client.AsyncQdrantClient``.

``url=":memory:"`` runs qdrant-client's local mode, an in-process double of the same client
API that the tests use; it ignores payload indexes and scans on every filtered query, so it is
no production store. Every write waits for the server to apply it (``wait=True``), so a
request is acknowledged only after its write is in the server's write-ahead log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from qdrant_client import AsyncQdrantClient, models

from memory_services.store import checks, lexical, sentences, ties
from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    SCOPE_KEYS,
    CollectionSpec,
    Condition,
    FieldType,
    Hit,
    Record,
    Retrieval,
    StoreScope,
)
from memory_services.store.server_filter import scope_filter
from react_mem.errors import ConfigurationError, NotStarted, ReactMemError, TransientError

T = TypeVar("T")
logger = logging.getLogger(__name__)
#: Records given their lexical vector per call when an old collection is migrated.
BACKFILL_PAGE = 256
_TERMS = models.SparseVectorParams(modifier=models.Modifier.IDF)

_INDEX: dict[FieldType, models.PayloadSchemaType] = {
    FieldType.KEYWORD: models.PayloadSchemaType.KEYWORD,
    FieldType.INTEGER: models.PayloadSchemaType.INTEGER,
    FieldType.FLOAT: models.PayloadSchemaType.FLOAT,
    FieldType.BOOL: models.PayloadSchemaType.BOOL,
}


class QdrantServerStore:
    """:class:`~memory_services.store.base.VectorStore` on a Qdrant server (or local mode)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: int = 10,
        check_compatibility: bool = True,
        payload_indexes: bool | None = None,
    ) -> None:
        self.url = url
        #: Create payload indexes; by default not in local mode, which has none (and warns).
        self.payload_indexes = url != ":memory:" if payload_indexes is None else payload_indexes
        self._api_key = api_key
        self._timeout = timeout
        self._check_compatibility = check_compatibility
        self._client: AsyncQdrantClient | None = None
        self._sizes: dict[str, int] = {}
        self._fields: dict[str, tuple[str, ...]] = {}

    @property
    def local(self) -> bool:
        return self.url == ":memory:"

    async def open(self) -> None:
        if self._client is not None:
            return
        if self.local:
            self._client = AsyncQdrantClient(location=":memory:")
        else:  # the client checks the server's version with a blocking GET as it is built
            self._client = await asyncio.to_thread(
                AsyncQdrantClient,
                url=self.url,
                api_key=self._api_key,
                timeout=self._timeout,
                check_compatibility=self._check_compatibility,
            )

    @property
    def client(self) -> AsyncQdrantClient:
        if self._client is None:
            raise NotStarted("qdrant store is not open")
        return self._client

    async def _call(self, call: Awaitable[T]) -> T:
        """One client call; its errors become TransientError (ours pass through)."""
        try:
            return await call
        except ReactMemError:
            raise
        except Exception as exc:
            raise TransientError(f"qdrant {self.url}: {type(exc).__name__}: {exc}") from exc

    async def ensure(self, spec: CollectionSpec) -> None:
        name, client = checks.collection_name(spec.name), self.client
        if await self._call(client.collection_exists(name)):
            info = await self._call(client.get_collection(name))
            vectors = info.config.params.vectors
            size = vectors.size if isinstance(vectors, models.VectorParams) else None
            if size != spec.vector_size:
                raise ConfigurationError(
                    f"qdrant collection {name!r} holds {size}-d vectors, not {spec.vector_size}"
                )
            present = set(info.payload_schema)
            if lexical.VECTOR not in (info.config.params.sparse_vectors or {}):
                idf = models.SparseVectorConfig(modifier=models.Modifier.IDF)
                config = models.SparseVectorNameConfig(sparse=idf)
                await self._call(client.create_vector_name(name, lexical.VECTOR, config))
        else:
            params = models.VectorParams(size=spec.vector_size, distance=models.Distance.COSINE)
            terms = {lexical.VECTOR: _TERMS}
            await self._call(
                client.create_collection(name, vectors_config=params, sparse_vectors_config=terms)
            )
            present = set()
        self._sizes[name], self._fields[name] = spec.vector_size, spec.text_fields
        await self._add_lexical(name, spec.text_fields)
        if not self.payload_indexes:
            return
        # The workspace is the tenant: Qdrant lays segments out by it.
        wanted: dict[str, Any] = dict.fromkeys(SCOPE_KEYS, models.PayloadSchemaType.KEYWORD)
        wanted[SCOPE_KEYS[0]] = models.KeywordIndexParams(
            type=models.KeywordIndexType.KEYWORD, is_tenant=True
        )
        wanted.update({key: _INDEX[kind] for key, kind in spec.indexes.items()})
        for key, schema in wanted.items():
            if key not in present:
                await self._call(client.create_payload_index(name, key, field_schema=schema))

    def _size(self, collection: str) -> int:
        if self._client is None:
            raise NotStarted("qdrant store is not open")
        try:
            return self._sizes[collection]
        except KeyError:
            raise ConfigurationError(f"collection {collection!r} was never ensured") from None

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        size = self._size(collection)
        fields = self._fields[collection]
        points = [
            models.PointStruct(id=i, vector=_vectors(v, p, fields), payload=p)
            for i, v, p in (checks.record(rec, size) for rec in records)
        ]
        if points:
            await self._call(self.client.upsert(collection, points, wait=True))

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
        size, selected = self._size(collection), scope_filter(scope, where)
        boosted = scope_filter(scope, [*where, *boost]) if boost else None
        limit = checks.limit(limit)
        if texts is not None and len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts for {len(vectors)} vectors")
        if texts is None or not self._fields[collection]:
            texts = [None] * len(vectors)  # type: ignore[list-item]
        probes = [checks.vector(vector, size) for vector in vectors]
        planned = [
            _requests(probe, text, selected, limit, min_score, retrieval, boosted, leave_out)
            for probe, text in zip(probes, texts, strict=True)
        ]
        requests = [request for batch, _ in planned for request in batch]
        if not requests:
            return []
        found = await self._call(self.client.query_batch_points(collection, requests))
        results, at = [], 0
        for (batch, kinds), probe in zip(planned, probes, strict=True):
            lists, at = [r.points for r in found[at : at + len(batch)]], at + len(batch)
            results.append(_hits(lists, kinds, probe, limit, retrieval, min_score))
        return results

    async def _add_lexical(self, name: str, fields: tuple[str, ...]) -> None:
        """Give every record without a lexical vector one (a collection from before lexical
        search), logging progress."""
        missing = models.Filter(must_not=[models.HasVectorCondition(has_vector=lexical.VECTOR)])
        total = (await self._call(self.client.count(name, missing, exact=True))).count
        if not total:
            return
        logger.info("re-indexing %s for lexical search: %d records", name, total)
        done = 0
        while True:
            page, _ = await self._call(
                self.client.scroll(name, missing, limit=BACKFILL_PAGE, with_payload=True)
            )
            if not page:
                return
            updates = [
                models.PointVectors(
                    id=r.id, vector={lexical.VECTOR: _sparse(lexical.document(
                        lexical.record_text(r.payload or {}, fields)))},
                )
                for r in page
            ]  # fmt: skip
            await self._call(self.client.update_vectors(name, updates, wait=True))
            done += len(page)
            logger.info("re-indexing %s for lexical search: %d/%d", name, done, total)

    async def get(self, collection: str, ids: Sequence[str], *, scope: StoreScope) -> list[Record]:
        self._size(collection)
        wanted = checks.record_ids(ids)
        selected = scope_filter(scope, ids=wanted)
        if not wanted:
            return []
        checks.limit(len(wanted), name="number of ids")
        page, _ = await self._call(
            self.client.scroll(
                collection, selected, limit=len(wanted), with_payload=True, with_vectors=True
            )
        )
        found = {str(r.id): r for r in page}
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
        self._size(collection)
        page, following = await self._call(
            self.client.scroll(
                collection,
                scope_filter(scope, where),
                limit=checks.limit(limit),
                offset=None if offset is None else checks.record_id(offset),
                with_payload=True,
                with_vectors=True,
            )
        )
        return [_record(r) for r in page], None if following is None else str(following)

    async def count(
        self, collection: str, *, scope: StoreScope, where: Sequence[Condition] = ()
    ) -> int:
        self._size(collection)
        result = await self._call(
            self.client.count(collection, scope_filter(scope, where), exact=True)
        )
        return result.count

    async def set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: StoreScope
    ) -> None:
        self._size(collection)
        wanted = checks.record_ids(ids)
        update, selected = checks.payload_update(payload), scope_filter(scope, ids=wanted)
        if wanted and update:
            await self._call(self.client.set_payload(collection, update, selected, wait=True))

    async def delete(
        self,
        collection: str,
        *,
        scope: StoreScope,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        self._size(collection)
        selected = scope_filter(scope, where, None if ids is None else checks.record_ids(ids))
        if ids is not None and not ids:
            return 0
        # The server has no delete-and-count: a record written between the two calls may be
        # deleted without being counted (the count is what a caller reports, not a guard).
        doomed = (await self._call(self.client.count(collection, selected, exact=True))).count
        if doomed:
            selector = models.FilterSelector(filter=selected)
            await self._call(self.client.delete(collection, selector, wait=True))
        return doomed

    async def compact(self, collection: str) -> bool:
        """Not on request: the server's vacuum optimizer rewrites a segment once enough of
        it is deleted (its ``deleted_threshold``); until then deleted payloads stay on its disk."""
        self._size(collection)
        return False

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await self._call(client.close())


def _sparse(pair: lexical.Sparse) -> models.SparseVector:
    return models.SparseVector(indices=pair[0], values=pair[1])


def _vectors(dense: list[float], payload: Mapping[str, Any], fields: tuple[str, ...]) -> Any:
    terms = _sparse(lexical.document(lexical.record_text(payload, fields)))
    return {"": dense, lexical.VECTOR: terms}


def _requests(
    vector: list[float],
    text: str | None,
    selected: models.Filter,
    limit: int,
    min_score: float | None,
    retrieval: Retrieval,
    boosted: models.Filter | None = None,
    leave_out: Sequence[str] = (),
) -> tuple[list[models.QueryRequest], list[ties.Side]]:
    """One search's requests: dense without text (or when ``retrieval`` says so), else
    lexical, or for hybrid each side's list under the scope filter (and under ``boosted``),
    fused in :mod:`.ties` as on the embedded engine; payloads without ``leave_out``."""
    payload: models.WithPayloadInterface = True
    if leave_out:
        payload = models.PayloadSelectorExclude(exclude=list(leave_out))
    if text is None or retrieval.mode == "dense":
        return [
            models.QueryRequest(
                query=vector, filter=selected, limit=limit, score_threshold=min_score,
                with_payload=payload,
            )
        ], ["dense"]  # fmt: skip
    terms = _sparse(lexical.query(text))
    kinds = ties.sides(retrieval, boosted is not None)
    depth = limit if retrieval.mode == "lexical" else retrieval.candidates(limit)
    wheres = [selected, selected] if boosted is None else [selected, selected, boosted, boosted]
    found = []
    for kind, where in zip(kinds, wheres, strict=False):
        side: dict[str, Any]
        if kind == "dense":
            side = {"query": vector, "score_threshold": min_score}
        else:
            side = {"query": terms, "using": lexical.VECTOR}
        found.append(
            models.QueryRequest(
                filter=where,
                limit=ties.fetch(depth),
                with_payload=payload,
                with_vector=[""],
                **side,
            )
        )
    return found, kinds


def _hits(
    lists: list[list[models.ScoredPoint]],
    kinds: list[ties.Side],
    vector: list[float],
    limit: int,
    retrieval: Retrieval,
    min_score: float | None = None,
) -> list[Hit]:
    """The best ``limit`` (fused for hybrid, the dense side's candidates scored by their
    sentences too: :mod:`.sentences`; equal scores in id order: :mod:`.ties`), scored by
    cosine (computed from the vectors a lexical or hybrid search brought)."""
    points: Sequence[sentences.Candidate]
    if kinds == ["dense"]:
        points = ties.settle(lists[0], limit)
        return [Hit(str(p.id), p.score, p.payload or {}) for p in points]
    if len(kinds) == 1:
        points = ties.settle(lists[0], limit, kinds[0])
    else:
        found = sentences.rescore(lists, kinds, vector, retrieval, min_score)
        points = ties.fuse(found, kinds, retrieval, limit)
    scores = checks.cosines(vector, [_dense(p.vector) for p in points])
    return [Hit(str(p.id), s, p.payload or {}) for p, s in zip(points, scores, strict=True)]


def _dense(vec: Any) -> list[float] | None:
    if isinstance(vec, dict):
        vec = vec.get("")
    return vec if isinstance(vec, list) else None


def _record(rec: models.Record) -> Record:
    vec: Any = rec.vector
    if isinstance(vec, dict):
        vec = vec.get("")
    return Record(str(rec.id), rec.payload or {}, vec if isinstance(vec, list) else None)

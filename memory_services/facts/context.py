"""What the fact-memory operations share: the store, the embedder, the policy, the clock."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memory_services.facts.records import FactPolicy
from memory_services.scope_registry import ScopeRegistry
from memory_services.store import sentences
from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    Condition,
    Hit,
    Record,
    Retrieval,
    Scope,
    StoreScope,
    VectorStore,
)
from react_mem.embedding.base import Embedder, SpanEmbedder
from react_mem.errors import BadRequest

Clock = Callable[[], float]


@dataclass(frozen=True, kw_only=True)
class FactContext:
    store: VectorStore
    embedder: Embedder
    scopes: ScopeRegistry
    policy: FactPolicy
    clock: Clock
    #: The facts collection, e.g. ``facts-384``.
    collection: str
    #: Told how many records each write added (negative: removed), for the size gauge.
    on_change: Callable[[int], None] = lambda delta: None
    #: A workspace's TTL for facts stored without one (None: the policy's default).
    workspace_ttl: Callable[[str], float | None] | None = None

    def default_ttl(self, workspace: str) -> float | None:
        if self.workspace_ttl is None:
            return self.policy.default_ttl_seconds
        return self.workspace_ttl(workspace)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.embedder.embed(texts)

    async def embed_facts(
        self, texts: Sequence[str]
    ) -> tuple[list[list[float]], list[dict[str, str]]]:
        """Each text's vector, and the payload its record keeps of its sentences' vectors
        (``policy.sentence_vectors``, texts of two sentences or more: see
        :mod:`memory_services.store.sentences`), embedded in one call."""
        pooling = self.policy.sentence_pooling
        late = self.policy.sentence_vectors and pooling != "separate"
        if late and isinstance(self.embedder, SpanEmbedder):  # one model run a text
            label = pooling == "late-label"
            ranges = [sentences.spans(t, label=label) for t in texts]
            own, pooled = await self.embedder.embed_spans(texts, ranges)
            return own, [{sentences.KEY: sentences.encode(p)} if p else {} for p in pooled]
        split = [sentences.split(t) if self.policy.sentence_vectors else [] for t in texts]
        vectors = await self.embed([*texts, *(part for parts in split for part in parts)])
        own, at, kept = vectors[: len(texts)], len(texts), []
        for parts in split:
            found, at = vectors[at : at + len(parts)], at + len(parts)
            kept.append({sentences.KEY: sentences.encode(found)} if found else {})
        return own, kept

    async def get(self, ids: Sequence[str], scope: Scope) -> list[Record]:
        return await self.store.get(self.collection, ids, scope=scope)

    async def count(self, scope: StoreScope, where: Sequence[Condition]) -> int:
        return await self.store.count(self.collection, scope=scope, where=where)

    async def search(
        self,
        scope: Scope,
        vector: Sequence[float],
        *,
        limit: int,
        min_score: float | None,
        where: Sequence[Condition],
        text: str | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        boost: Sequence[Condition] = (),
        leave_out: Sequence[str] = (),
    ) -> list[Hit]:
        return await self.store.search(
            self.collection,
            vector,
            scope=scope,
            limit=limit,
            min_score=min_score,
            where=where,
            text=text,
            retrieval=retrieval,
            boost=boost,
            leave_out=leave_out,
        )

    async def search_many(
        self,
        scope: Scope,
        vectors: Sequence[Sequence[float]],
        *,
        limit: int,
        min_score: float | None,
        where: Sequence[Condition],
    ) -> list[list[Hit]]:
        return await self.store.search_many(
            self.collection, vectors, scope=scope, limit=limit, min_score=min_score, where=where
        )

    async def upsert(self, records: Sequence[Record]) -> None:
        await self.store.upsert(self.collection, records)

    async def set_payload(self, id: str, payload: dict[str, Any], scope: Scope) -> None:
        await self.store.set_payload(self.collection, [id], payload, scope=scope)

    async def delete(
        self,
        scope: StoreScope,
        *,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        return await self.store.delete(self.collection, scope=scope, ids=ids, where=where)

    async def scroll(
        self, scope: Scope, where: Sequence[Condition], limit: int, offset: str | None
    ) -> tuple[list[Record], str | None]:
        return await self.store.scroll(
            self.collection, scope=scope, where=where, limit=limit, offset=offset
        )

    def content(self, text: str, where: str) -> str:
        """``text`` if it is usable fact or query text, else a :class:`BadRequest`."""
        if not text.strip():
            raise BadRequest(f"{where} is empty", type="bad-content")
        limit = self.policy.max_content_chars
        if len(text) > limit:
            raise BadRequest(
                f"{where} has {len(text)} characters; the limit is {limit}", type="bad-content"
            )
        return text

    def metadata(self, metadata: dict[str, str], where: str) -> None:
        size = sum(len(k) + len(v) for k, v in metadata.items())
        if size > self.policy.max_content_chars:
            raise BadRequest(
                f"{where} has {size} characters; the limit is {self.policy.max_content_chars}",
                type="bad-content",
            )


def fact_ids(ids: Sequence[str], limit: int, where: str = "ids") -> list[str]:
    """Validated fact ids (UUID strings), at most ``limit`` of them."""
    if len(ids) > limit:
        raise BadRequest(f"{where}: {len(ids)} ids; at most {limit} per request")
    try:
        return [str(uuid.UUID(value)) for value in ids]
    except ValueError:
        bad = next(v for v in ids if not _is_uuid(v))
        raise BadRequest(f"{where}: {bad!r} is not a fact id (a UUID)", type="bad-id") from None


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def query_vector(vector: Sequence[float], dimension: int) -> list[float]:
    if len(vector) != dimension:
        raise BadRequest(f"vector has {len(vector)} dimensions; this store holds {dimension}")
    if not all(map(math.isfinite, vector)) or not any(vector):  # map: no frame per value
        raise BadRequest("vector must be finite and non-zero")
    return list(vector)

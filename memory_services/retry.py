"""The one retry policy of the memory services: their vector store and embedder calls
(DESIGN §5: retry, then fail, never hang).

:class:`~memory_services.processor.MemoryProcessor` wraps the store it opens in
:class:`RetryingStore` and the embedder in :class:`RetryingEmbedder`; the memory modules
call both plainly and never retry on their own. The policy:

- bad input (:class:`BadRequest`) is never retried;
- any other :class:`Exception` is retried, ``ATTEMPTS`` in all, with waits doubling from
  ``FIRST_WAIT``, and then surfaces as :class:`TransientError`, so the consumer redelivers
  the message and finally answers it with an error;
- cancellation (and ``KeyboardInterrupt``, ``SystemExit``) is never caught: a handler
  cancelled at shutdown stops at once, its message left unacknowledged for redelivery;
- ``open``/``close``/``start`` are lifecycle, not calls worth repeating: they pass straight
  through (a service that cannot start fails, and its supervisor restarts it).

The first attempt is a plain ``await``: tenacity's machinery costs ≈25 µs a call, as much as
a store call itself, and a call that succeeds needs none of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    CollectionSpec,
    Condition,
    Hit,
    Record,
    Retrieval,
    StoreScope,
    VectorStore,
)
from react_mem.embedding.base import Embedder, SpanEmbedder, Spans
from react_mem.errors import BadRequest, ConfigurationError, TransientError

P = ParamSpec("P")
T = TypeVar("T")

ATTEMPTS = 3
#: Seconds before the second attempt; each later wait doubles (at most 1 s).
FIRST_WAIT = 0.05
STORE, EMBEDDER = "vector store", "embedder"


def _worth_retrying(exc: BaseException) -> bool:
    """Exceptions only: a BaseException that is not one (cancellation) ends the call."""
    return isinstance(exc, Exception) and not isinstance(exc, BadRequest)


async def _retried(
    what: str, call: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``await call(*args, **kwargs)`` under the policy; ``what`` names it in the error."""
    try:
        return await call(*args, **kwargs)
    except Exception as exc:  # never BaseException: cancellation passes through
        if not _worth_retrying(exc):
            raise
    await asyncio.sleep(FIRST_WAIT)
    try:
        async for attempt in AsyncRetrying(  # attempts 2.., waits doubling from 2*FIRST_WAIT
            stop=stop_after_attempt(ATTEMPTS - 1),
            wait=wait_exponential(multiplier=2 * FIRST_WAIT, max=1.0),
            retry=retry_if_exception(_worth_retrying),
        ):
            with attempt:
                return await call(*args, **kwargs)
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        raise TransientError(f"{what} failed after {ATTEMPTS} attempts: {cause!r}") from cause
    raise AssertionError("unreachable")  # pragma: no cover


class RetryingStore:
    """A :class:`VectorStore` whose every call but ``open``/``close`` is retried."""

    def __init__(self, store: VectorStore) -> None:
        self.inner = store

    async def open(self) -> None:
        await self.inner.open()

    async def ensure(self, spec: CollectionSpec) -> None:
        await _retried(STORE, self.inner.ensure, spec)

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        await _retried(STORE, self.inner.upsert, collection, records)

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
        return await _retried(
            STORE,
            self.inner.search,
            collection,
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
        return await _retried(
            STORE,
            self.inner.search_many,
            collection,
            vectors,
            scope=scope,
            limit=limit,
            min_score=min_score,
            where=where,
            texts=texts,
            retrieval=retrieval,
            boost=boost,
            leave_out=leave_out,
        )

    async def get(self, collection: str, ids: Sequence[str], *, scope: StoreScope) -> list[Record]:
        return await _retried(STORE, self.inner.get, collection, ids, scope=scope)

    async def scroll(
        self,
        collection: str,
        *,
        scope: StoreScope,
        where: Sequence[Condition] = (),
        limit: int = 100,
        offset: str | None = None,
    ) -> tuple[list[Record], str | None]:
        return await _retried(
            STORE,
            self.inner.scroll,
            collection,
            scope=scope,
            where=where,
            limit=limit,
            offset=offset,
        )

    async def count(
        self, collection: str, *, scope: StoreScope, where: Sequence[Condition] = ()
    ) -> int:
        return await _retried(STORE, self.inner.count, collection, scope=scope, where=where)

    async def set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: StoreScope
    ) -> None:
        await _retried(STORE, self.inner.set_payload, collection, ids, payload, scope=scope)

    async def delete(
        self,
        collection: str,
        *,
        scope: StoreScope,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        return await _retried(
            STORE, self.inner.delete, collection, scope=scope, ids=ids, where=where
        )

    async def compact(self, collection: str) -> bool:
        return await _retried(STORE, self.inner.compact, collection)

    async def close(self) -> None:
        await self.inner.close()


class RetryingEmbedder:
    """An :class:`Embedder` whose ``embed`` is retried (``start`` passes through)."""

    def __init__(self, embedder: Embedder) -> None:
        self.inner = embedder

    @property
    def dimension(self) -> int:  # read through: a local model's is known once started
        return self.inner.dimension

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    async def start(self) -> None:
        await self.inner.start()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await _retried(EMBEDDER, self.inner.embed, texts)

    async def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Spans]
    ) -> tuple[list[list[float]], list[list[list[float]]]]:
        """The inner embedder's late chunking (:class:`SpanEmbedder`), retried."""
        if not isinstance(self.inner, SpanEmbedder):
            raise ConfigurationError(f"embedder {self.model_name} cannot pool spans of a text")
        return await _retried(EMBEDDER, self.inner.embed_spans, texts, spans)


def retrying_store(store: VectorStore) -> VectorStore:
    """``store`` under the policy, wrapped once (a wrapped store is returned as it is)."""
    return store if isinstance(store, RetryingStore) else RetryingStore(store)


def retrying_embedder(embedder: Embedder) -> Embedder:
    """``embedder`` under the policy, wrapped once."""
    return embedder if isinstance(embedder, RetryingEmbedder) else RetryingEmbedder(embedder)

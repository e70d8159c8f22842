"""The fact-memory client: one method per :data:`~react_mem.schema.facts.FACT_OPERATIONS`."""

from __future__ import annotations

from collections.abc import Sequence

from react_mem.clients.base import Page, Service, build, owner
from react_mem.clients.consolidating import ConsolidatingClient
from react_mem.errors import BadReply
from react_mem.schema.facts import (
    Fact,
    FactInput,
    FactRequest,
    FactResponse,
    FactSort,
    StoredFact,
)
from react_mem.schema.forget import Forgotten
from react_mem.schema.retrieval import RetrievalOptions
from react_mem.schema.scope import Scope

FACT_MEMORY: Service[FactRequest, FactResponse] = Service("fact-memory", FactRequest, FactResponse)


class FactClient(ConsolidatingClient[FactRequest, FactResponse]):
    service = FACT_MEMORY

    async def store(
        self,
        scope: Scope,
        facts: Sequence[FactInput],
        *,
        evict: bool = False,
        sequence: bool = False,
    ) -> FactResponse:
        """``stored`` (each fact's id and status) and ``evicted`` (ids, with ``evict``);
        ``sequence``: the facts are consecutive turns, in order (neighbours in search)."""
        request = build(
            FactRequest,
            operation="store",
            facts=list(facts),
            evict=evict,
            sequence=sequence,
            **owner(scope),
        )
        return await self.call(request)

    async def update(self, scope: Scope, fact_id: str, fact: FactInput) -> StoredFact:
        response = await self.call(
            build(FactRequest, operation="update", fact_id=fact_id, fact=fact, **owner(scope))
        )
        return _one(response.stored)

    async def retrieve(
        self,
        scope: Scope,
        query: str | None = None,
        *,
        vector: Sequence[float] | None = None,
        top_k: int = 5,
        min_score: float | None = None,
        retrieval: RetrievalOptions | None = None,
    ) -> list[Fact]:
        """The facts that best match ``query`` (and/or its embedding ``vector``), best
        first; ``retrieval`` picks dense, lexical or hybrid ranking."""
        response = await self.call(
            build(
                FactRequest,
                operation="retrieve",
                query=query,
                vector=None if vector is None else list(vector),
                top_k=top_k,
                min_score=min_score,
                retrieval=retrieval,
                **owner(scope),
            )
        )
        return response.facts

    async def get(self, scope: Scope, ids: Sequence[str]) -> tuple[list[Fact], list[str]]:
        """The facts found and the ids not found."""
        response = await self.call(
            build(FactRequest, operation="get", ids=list(ids), **owner(scope))
        )
        return response.facts, response.missing

    async def history(self, scope: Scope, fact_id: str) -> list[Fact]:
        response = await self.call(
            build(FactRequest, operation="history", fact_id=fact_id, **owner(scope))
        )
        return response.facts

    async def page(self, scope: Scope, *, limit: int = 50, offset: str | None = None) -> Page[Fact]:
        """``offset``: the ``next`` of the previous page."""
        response = await self.call(
            build(FactRequest, operation="list", limit=limit, offset=offset, **owner(scope))
        )
        return Page(response.facts, response.next_offset)

    async def sorted_page(
        self,
        scope: Scope,
        sort_by: FactSort,
        *,
        ascending: bool = False,
        limit: int = 50,
        offset: str | None = None,
    ) -> tuple[Page[Fact], int]:
        """A page of all of the owner's current facts ordered by ``sort_by`` (highest first
        unless ``ascending``), and how many there are; ``offset``: the ``next`` of the
        previous page."""
        request = build(
            FactRequest, operation="sorted", sort_by=sort_by, ascending=ascending, limit=limit,
            offset=offset, **owner(scope),
        )  # fmt: skip
        response = await self.call(request)
        return Page(response.facts, response.next_offset), response.total or 0

    async def delete(self, scope: Scope, ids: Sequence[str]) -> int:
        """How many of ``ids`` were deleted."""
        response = await self.call(
            build(FactRequest, operation="delete", ids=list(ids), **owner(scope))
        )
        return response.deleted

    async def purge(self, scope: Scope) -> int:
        """Delete every fact of ``scope`` with its history; how many records went."""
        return (await self.call(build(FactRequest, operation="purge", **owner(scope)))).deleted

    async def forget(self, user: str, *, collection: str = "") -> Forgotten:
        """Delete every fact of ``user`` in ``collection`` ("": every collection)."""
        response = await self.call(
            build(FactRequest, operation="forget", user=user, collection=collection)
        )
        return response.forgotten or Forgotten()


def _one(stored: list[StoredFact]) -> StoredFact:
    if len(stored) != 1:
        raise BadReply(f"fact-memory: {len(stored)} results for one update", service="fact-memory")
    return stored[0]

"""The playbook-memory client: one method per
:data:`~react_mem.schema.playbook.OPERATIONS`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from react_mem.clients.base import Page, Service, ServiceClient, build
from react_mem.schema.forget import Forgotten
from react_mem.schema.playbook import (
    Bullet,
    Delta,
    Grant,
    PlaybookRequest,
    PlaybookResponse,
    Relevance,
    Weights,
)

PLAYBOOK_MEMORY: Service[PlaybookRequest, PlaybookResponse] = Service(
    "playbook-memory", PlaybookRequest, PlaybookResponse
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlaybookRef:
    """Who asks (``user``) and which playbook: the requester's own, ``owner``'s (shared with
    them), or with ``collection_wide`` the collection's; ``context`` is the context scope."""

    collection: str = "default"
    context: str = ""
    user: str | None = None
    owner: str | None = None
    collection_wide: bool = False

    def fields(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "context_scope_id": self.context,
            "user": self.user,
            "playbook_owner": self.owner,
            "collection_wide": self.collection_wide,
        }


class PlaybookClient(ServiceClient[PlaybookRequest, PlaybookResponse]):
    service = PLAYBOOK_MEMORY

    async def _op(self, which: PlaybookRef, operation: str, **fields: Any) -> PlaybookResponse:
        return await self.call(
            build(PlaybookRequest, operation=operation, **which.fields(), **fields)
        )

    async def retrieve(
        self,
        which: PlaybookRef,
        query: str | None = None,
        *,
        vector: Sequence[float] | None = None,
        top_k: int = 10,
        topic: str | None = None,
        relevance: Relevance = "embedding",
        weights: str | Weights = "default",
        advance_clock: bool = True,
        min_relevance: float | None = None,
    ) -> list[Bullet]:
        """``min_relevance``: leave out bullets less relevant (none: the service's floor)."""
        response = await self._op(
            which,
            "retrieve",
            query=query,
            vector=None if vector is None else list(vector),
            top_k=top_k,
            topic=topic,
            relevance=relevance,
            weights=weights,
            advance_clock=advance_clock,
            min_relevance=min_relevance,
        )
        return response.bullets

    async def apply_delta(self, which: PlaybookRef, delta: Delta) -> PlaybookResponse:
        """``version``, ``applied`` (False: this delta id was applied before), ``changes``."""
        return await self._op(which, "apply-delta", delta=delta)

    async def get(self, which: PlaybookRef, ids: Sequence[str]) -> list[Bullet]:
        return (await self._op(which, "get", ids=list(ids))).bullets

    async def page(
        self,
        which: PlaybookRef,
        *,
        limit: int = 50,
        offset: str | None = None,
        section: str | None = None,
    ) -> Page[Bullet]:
        response = await self._op(which, "list", limit=limit, offset=offset, section=section)
        return Page(response.bullets, response.next_offset)

    async def history(self, which: PlaybookRef, *, limit: int = 50) -> PlaybookResponse:
        """``history``: the applied deltas, newest first."""
        return await self._op(which, "history", limit=limit)

    async def show(self, which: PlaybookRef, version: int) -> list[Bullet]:
        return (await self._op(which, "show", version=version)).bullets

    async def rollback(self, which: PlaybookRef, version: int) -> PlaybookResponse:
        return await self._op(which, "rollback", version=version)

    async def stats(self, which: PlaybookRef) -> PlaybookResponse:
        """``count``, ``version`` and ``clock``."""
        return await self._op(which, "stats")

    async def grant(
        self, which: PlaybookRef, relation: Literal["viewer", "editor"], grantees: Sequence[str]
    ) -> PlaybookResponse:
        return await self._op(which, "grant", relation=relation, grantees=list(grantees))

    async def revoke(self, which: PlaybookRef, grantees: Sequence[str]) -> PlaybookResponse:
        return await self._op(which, "revoke", grantees=list(grantees))

    async def grants(self, which: PlaybookRef) -> list[Grant]:
        """The grants in force on the playbook (its owner only; others: ``forbidden``)."""
        return (await self._op(which, "grants")).grants

    async def share(self, which: PlaybookRef, ids: Sequence[str]) -> PlaybookResponse:
        return await self._op(which, "share", ids=list(ids))

    async def delete(self, which: PlaybookRef, ids: Sequence[str]) -> dict[str, int]:
        """Records removed, by kind."""
        return (await self._op(which, "delete", ids=list(ids))).removed

    async def purge(self, which: PlaybookRef) -> dict[str, int]:
        return (await self._op(which, "purge")).removed

    async def forget(self, user: str, *, collection: str = "") -> Forgotten:
        """Everything of ``user``; ``collection`` "" for every collection."""
        response = await self._op(PlaybookRef(collection=collection, user=user), "forget")
        return response.forgotten or Forgotten()

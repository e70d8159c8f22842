"""The conversation-memory client: one method per
:data:`~react_mem.schema.conversations.OPERATIONS`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from react_mem.clients.base import Page, Service, ServiceClient, build, owner
from react_mem.errors import BadReply
from react_mem.schema.agent import MemoryRef
from react_mem.schema.conversations import (
    Conversation,
    ConversationRequest,
    ConversationResponse,
    ConversationTurn,
    QuotaNotice,
    Result,
)
from react_mem.schema.forget import Forgotten
from react_mem.schema.retrieval import RetrievalOptions
from react_mem.schema.scope import Scope

CONVERSATION_MEMORY: Service[ConversationRequest, ConversationResponse] = Service(
    "conversation-memory", ConversationRequest, ConversationResponse
)
_NAME = CONVERSATION_MEMORY.name


class ConversationClient(ServiceClient[ConversationRequest, ConversationResponse]):
    """``scope.conversation`` names the conversation where an operation acts on one."""

    service = CONVERSATION_MEMORY

    async def append(
        self,
        scope: Scope,
        *,
        query: str,
        answer: str = "",
        summary: str = "",
        turn_id: str | None = None,
        session_id: str | None = None,
        result: Result | None = None,
        time: float | None = None,
        memory_used: Sequence[MemoryRef] = (),
        take_notices: bool = False,
        sent: Callable[[], None] | None = None,
    ) -> tuple[ConversationTurn, bool]:
        """The turn as stored and whether it was new (a repeated ``turn_id`` is not).
        ``take_notices``: the turn takes the conversation's pending quota notices.
        ``sent``: called once the request is on the bus, so that conversation-memory serves
        it before any request on this conversation sent after (see its ``order``)."""
        response = await self.call(
            build(
                ConversationRequest,
                operation="append",
                query=query,
                answer=answer,
                summary=summary,
                turn_id=turn_id,
                session_id=session_id,
                result=result,
                time=time,
                memory_used=list(memory_used),
                take_notices=take_notices,
                **owner(scope),
            ),
            sent=sent,
        )
        if response.turn is None:
            raise BadReply(f"{_NAME}: append reply without the turn", service=_NAME)
        return response.turn, bool(response.created)

    async def get(self, scope: Scope, *, limit: int | None = None) -> Conversation | None:
        """The conversation with its last ``limit`` turns; None when there is none."""
        response = await self.call(
            build(ConversationRequest, operation="get", limit=limit, **owner(scope))
        )
        return response.conversation

    async def update_summary(self, scope: Scope, summary: str) -> Conversation:
        response = await self.call(
            build(ConversationRequest, operation="update-summary", summary=summary, **owner(scope))
        )
        return _conversation(response)

    async def end(self, scope: Scope) -> Conversation:
        return _conversation(
            await self.call(build(ConversationRequest, operation="end", **owner(scope)))
        )

    async def search(
        self,
        scope: Scope,
        query: str,
        *,
        top_k: int | None = None,
        min_score: float | None = None,
        retrieval: RetrievalOptions | None = None,
        window: int = 0,
    ) -> list[ConversationTurn]:
        """The turns that best match ``query``, each with ``window`` turns either side."""
        response = await self.call(
            build(
                ConversationRequest,
                operation="search",
                query=query,
                top_k=top_k,
                min_score=min_score,
                retrieval=retrieval,
                window=window,
                **owner(scope),
            )
        )
        return response.turns

    async def page(
        self, scope: Scope, *, limit: int | None = None, offset: str | None = None
    ) -> Page[Conversation]:
        response = await self.call(
            build(ConversationRequest, operation="list", limit=limit, offset=offset, **owner(scope))
        )
        return Page(response.conversations, response.next_offset)

    async def delete(self, scope: Scope) -> int:
        """Delete ``scope.conversation``; how many records went."""
        response = await self.call(build(ConversationRequest, operation="delete", **owner(scope)))
        return response.count or 0

    async def purge(self, scope: Scope) -> int:
        response = await self.call(build(ConversationRequest, operation="purge", **owner(scope)))
        return response.count or 0

    async def notice(self, scope: Scope, notice: QuotaNotice) -> int:
        """Leave ``notice`` for the next turn of ``scope.conversation``; how many wait."""
        response = await self.call(
            build(ConversationRequest, operation="notice", notice=notice, **owner(scope))
        )
        return response.count or 0

    async def forget(self, user: str, *, collection: str = "") -> Forgotten:
        response = await self.call(
            build(ConversationRequest, operation="forget", user=user, collection=collection)
        )
        return response.forgotten or Forgotten()


def _conversation(response: ConversationResponse) -> Conversation:
    if response.conversation is None:
        raise BadReply(f"{_NAME}: reply without the conversation", service=_NAME)
    return response.conversation

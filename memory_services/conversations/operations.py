"""The conversation-memory operations, one method each, over memory and lifecycle."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, assert_never

from memory_services.conversations.conversation_memory import ConversationMemory, EarlyVector
from memory_services.conversations.lifecycle import ConversationLifecycle, Publisher
from memory_services.conversations.records import (
    to_conversation,
    turn_key,
    validate_append,
    validate_summary,
    with_notice,
)
from memory_services.processor import page_offset
from memory_services.retrieval import resolve
from memory_services.store.base import Scope
from react_mem.errors import BadRequest
from react_mem.processor.context import MessageContext
from react_mem.processor.flow import Flow
from react_mem.schema.conversations import (
    ConversationEnded,
    ConversationRequest,
    ConversationResponse,
    ScopedConversationOperation,
)

#: The producer spec conversation ends are announced on.
ENDED = "ended"


class ConversationOperations:
    def __init__(
        self,
        memory: ConversationMemory,
        lifecycle: ConversationLifecycle,
        *,
        clock: Callable[[], float],
        default_top_k: int,
    ) -> None:
        self._memory, self._lifecycle = memory, lifecycle
        self._clock = clock
        self._default_top_k = default_top_k

    async def run(
        self,
        op: ScopedConversationOperation,
        scope: Scope,
        request: ConversationRequest,
        ctx: MessageContext,
        *,
        early: EarlyVector | None = None,
    ) -> ConversationResponse:
        """``early``: an append's text embedding, started before its PII screen."""
        match op:
            case "append":
                return await self.append(scope, request, ctx, early=early)
            case "get":
                return await self.get(scope, request, ctx)
            case "update-summary":
                return await self.update_summary(scope, request, ctx)
            case "end":
                return await self.end(scope, request, ctx)
            case "search":
                return await self.search(scope, request, ctx)
            case "list":
                return await self.list_conversations(scope, request, ctx)
            case "delete" | "purge":
                return await self.delete(scope, request, ctx)
            case "notice":
                return await self.notice(scope, request, ctx)
            case _:
                assert_never(op)

    def check_sizes(self, request: ConversationRequest) -> None:
        """Refuse a write over the limits before anything reads its texts (the PII screen
        would read all of an oversized one first)."""
        if request.operation == "append":
            validate_append(request, self._memory.limits)
        elif request.operation == "update-summary":
            validate_summary(request.summary, self._memory.limits)

    async def append(
        self,
        scope: Scope,
        request: ConversationRequest,
        ctx: MessageContext,
        *,
        early: EarlyVector | None = None,
    ) -> ConversationResponse:
        limits = self._memory.limits
        validate_append(request, limits)
        key = turn_key(request, ctx.id, limits.max_turn_id_chars)
        async with self._lifecycle.lock(scope):
            header = await self._memory.header(scope)
            if header is not None:  # an end still to be announced goes out first
                header = await self._lifecycle.flush(scope, header, via(ctx.flow))
            turn, created = await self._memory.append(
                scope, request, key=key, flow=ctx.flow.name, header=header, early=early
            )
        return ConversationResponse(turn=turn, created=created)

    async def get(
        self, scope: Scope, request: ConversationRequest, ctx: MessageContext
    ) -> ConversationResponse:
        async with self._lifecycle.lock(scope):
            header = await self._memory.header(scope)
            since = 0  # a limit reads the last turns alone: a recall costs the same at turn 5,000
            if header is not None and request.limit is not None:
                since = int(header["turn_count"]) - request.limit
            turns = await self._memory.turns(scope, since=since)
        if header is None and not turns:
            return ConversationResponse()
        if request.limit is not None:
            turns = turns[-request.limit :]
        # Turns without a header: a crash came between the two writes of an append.
        found = header or scope.payload() | {"turn_count": len(turns)}
        conversation = to_conversation(found, turns)
        # What the agent's recall reads to know whether an answer must wait for its turn.
        left = max(self._memory.limits.max_turns - conversation.turn_count, 0)
        return ConversationResponse(
            conversation=conversation.model_copy(update={"turns_left": left})
        )

    async def update_summary(
        self, scope: Scope, request: ConversationRequest, ctx: MessageContext
    ) -> ConversationResponse:
        summary = validate_summary(request.summary, self._memory.limits)
        async with self._lifecycle.lock(scope):
            header = await self._memory.header(scope)
            if header is None:
                raise BadRequest("update-summary: no such conversation", type="not-found")
            header["summary"] = summary
            if not header["ended"]:
                header["last_activity"] = self._clock()
            await self._memory.write_header(scope, header)
        return ConversationResponse(conversation=to_conversation(header))

    async def end(
        self, scope: Scope, request: ConversationRequest, ctx: MessageContext
    ) -> ConversationResponse:
        ended = await self._lifecycle.end(scope, "explicit", via(ctx.flow))
        if ended is None:
            raise BadRequest("end: no such conversation", type="not-found")
        return ConversationResponse(conversation=to_conversation(ended))

    async def search(
        self, scope: Scope, request: ConversationRequest, ctx: MessageContext
    ) -> ConversationResponse:
        limits = self._memory.limits
        text = request.query.strip()
        if not text:
            raise BadRequest("search: the query is empty")
        if len(text) > limits.max_query_chars:
            raise BadRequest("search: the query is too long", type="too-large")
        top_k = request.top_k or self._default_top_k
        if top_k > limits.max_top_k:
            raise BadRequest(f"search: top_k {top_k} exceeds {limits.max_top_k}")
        turns = await self._memory.search(
            scope,
            text,
            top_k=top_k,
            min_score=request.min_score,
            retrieval=resolve(request.retrieval),
            window=request.window,
        )
        return ConversationResponse(turns=turns)

    async def list_conversations(
        self, scope: Scope, request: ConversationRequest, ctx: MessageContext
    ) -> ConversationResponse:
        limit = request.limit or 20
        if limit > self._memory.limits.max_page:
            raise BadRequest(f"list: limit {limit} exceeds {self._memory.limits.max_page}")
        headers, next_offset = await self._memory.headers(
            scope, [], limit=limit, offset=page_offset("list", request.offset)
        )
        return ConversationResponse(
            conversations=[to_conversation(h) for h in headers], next_offset=next_offset
        )

    async def delete(
        self, scope: Scope, request: ConversationRequest, ctx: MessageContext
    ) -> ConversationResponse:
        """One conversation (``delete``), or everything in the request's scope (``purge``)."""
        async with self._lifecycle.lock(scope):
            return ConversationResponse(count=await self._memory.delete(scope))

    async def notice(
        self, scope: Scope, request: ConversationRequest, ctx: MessageContext
    ) -> ConversationResponse:
        """Leave a quota notice for the next turn. The learner may get here before the
        conversation's first append lands (both follow one answer): the header is made
        then, and that append takes the notice."""
        if request.notice is None:
            raise BadRequest("notice: the notice is required")
        async with self._lifecycle.lock(scope):
            header = await self._memory.header(scope)
            if header is None:
                header = await self._memory.new_header(scope, flow=ctx.flow.name)
            updated = with_notice(header, request.notice, self._memory.limits)
            if updated is not None:
                await self._memory.write_header(scope, updated)
                header = updated
        return ConversationResponse(count=len(header.get("notices") or []))


def via(flow: Flow) -> Publisher:
    """A publisher sending on ``flow`` (the one a request came from)."""

    async def publish(header: Mapping[str, Any], event: ConversationEnded) -> bool:
        await send_ended(flow, event)
        return True

    return publish


async def send_ended(flow: Flow, event: ConversationEnded) -> None:
    await flow.send(ENDED, event, id=event.event_id)

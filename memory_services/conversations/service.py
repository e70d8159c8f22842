"""The conversation-memory processor: ``request:tg:conversation-memory:{workspace}:{flow}``,
publishing :class:`ConversationEnded` on ``flow:tg:conversation-ended:{workspace}:{flow}``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Unpack

from pydantic import Field

from memory_services.conversations.conversation_memory import ConversationMemory
from memory_services.conversations.lifecycle import ConversationLifecycle
from memory_services.conversations.operations import ENDED, ConversationOperations, send_ended
from memory_services.conversations.order import ArrivalOrder
from memory_services.conversations.records import ConversationLimits
from memory_services.metrics import quota_notices, quota_refusals
from memory_services.processor import MemoryOptions, MemoryProcessor
from memory_services.runtime import MemorySettings
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import VectorStore
from react_mem.bus.transport import Transport
from react_mem.embedding.base import Embedder
from react_mem.errors import BadRequest
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.processor.specs import ProducerSpec
from react_mem.schema.conversations import (
    ConversationEnded,
    ConversationRequest,
    ConversationResponse,
    ScopedConversationOperation,
)

logger = logging.getLogger(__name__)

#: Operations that address one conversation and need its ``conversation_id``.
NEEDS_CONVERSATION: frozenset[ScopedConversationOperation] = frozenset(
    {"append", "get", "update-summary", "end", "delete", "notice"}
)


class ConversationMemorySettings(MemorySettings):
    #: Seconds without a turn after which a conversation ends ("idle"); None: never.
    idle_timeout: float | None = Field(default=1800.0, gt=0)
    #: Days an ended conversation (turns, summary) is kept after its end was announced, for
    #: the learner's promotion and for history; a workspace's agent-mem
    #: ``conversation-retention-days`` overrides it. None: kept until deleted.
    retention_days: float | None = Field(default=90.0, gt=0)
    #: Seconds between background sweeps (idle detection, pending events, size gauges).
    sweep_interval: float = Field(default=30.0, gt=0)
    max_turns_per_conversation: int = Field(default=10_000, ge=1)
    max_query_chars: int = Field(default=16_000, ge=1)
    max_answer_chars: int = Field(default=64_000, ge=1)
    max_summary_chars: int = Field(default=16_000, ge=1)
    default_top_k: int = Field(default=5, ge=1, le=50)


@dataclass(frozen=True)
class Conversations:
    """What the service builds on the open store: the records, their ends, the operations."""

    memory: ConversationMemory
    lifecycle: ConversationLifecycle
    operations: ConversationOperations


class ConversationMemoryProcessor(MemoryProcessor[ConversationMemorySettings, Conversations]):
    """Keeps conversations (see :mod:`.schema` for the operations) and announces their end."""

    default_id: ClassVar[str] = "conversation-memory"

    def __init__(
        self, settings: ProcessorSettings, transport: Transport, **options: Unpack[MemoryOptions]
    ) -> None:
        super().__init__(settings, transport, **options)
        self._refusals = quota_refusals(options.get("registry"))
        self._notices = quota_notices(options.get("registry"))
        self.kept_ended = self.retention(
            "conversation-retention-days", self.settings.retention_days
        )
        #: Each conversation's operations in their order of arrival (see :mod:`.order`).
        self.order = ArrivalOrder()
        self.serve_requests(
            ConversationRequest, ConversationResponse, self.with_memory(self.on_request)
        )
        self.register_specification(ProducerSpec(name=ENDED, schema=ConversationEnded))

    async def open_memory(self, store: VectorStore, embedder: Embedder) -> Conversations:
        s = self.settings
        limits = ConversationLimits(
            max_query_chars=s.max_query_chars,
            max_answer_chars=s.max_answer_chars,
            max_summary_chars=s.max_summary_chars,
            max_turns=s.max_turns_per_conversation,
        )
        memory = ConversationMemory(
            store,
            embedder,
            collection=f"conversations-{embedder.dimension}",
            registry=ScopeRegistry(store, "conversation-scopes-1"),
            limits=limits,
            clock=self.clock,
        )
        await memory.ensure()
        lifecycle = ConversationLifecycle(
            memory,
            publish=self._publish,
            idle_timeout=s.idle_timeout,
            clock=self.clock,
            retention=self.kept_ended,
        )
        operations = ConversationOperations(
            memory, lifecycle, clock=self.clock, default_top_k=s.default_top_k
        )
        return Conversations(memory, lifecycle, operations)

    async def sweep(self, memory: Conversations) -> None:
        if filled := await memory.memory.fill_flags():
            logger.info(
                "%s: %d turns stored before the tells_time flag now have it", self.id, filled
            )
        lifecycle = memory.lifecycle
        conversations, turns, ended = await lifecycle.sweep()
        self.items.labels(processor=self.id, kind="conversation").set(conversations)
        self.items.labels(processor=self.id, kind="turn").set(turns)
        if ended:
            logger.info("%s: ended %d idle conversations", self.id, ended)
        expired, lifecycle.expired = lifecycle.expired, 0
        if expired:
            logger.info("%s: deleted %d conversations past their retention", self.id, expired)

    async def _publish(self, header: Mapping[str, Any], event: ConversationEnded) -> bool:
        """Send on the flow that last carried the conversation, else any flow of its
        workspace; False (pending, retried by the next sweep) when none runs here."""
        flow = self.flows.get((event.workspace, str(header.get("flow", ""))))
        if flow is None:
            flow = next((f for (ws, _), f in self.flows.items() if ws == event.workspace), None)
        if flow is None:
            logger.warning("%s: no flow of %s to announce an end on", self.id, event.workspace)
            return False
        await send_ended(flow, event)
        return True

    # -- requests ------------------------------------------------------------------
    async def on_request(
        self, memory: Conversations, request: ConversationRequest, ctx: MessageContext
    ) -> None:
        op = request.operation
        if op == "forget":  # the user's every collection: no one scope
            done = await memory.memory.forget(ctx.flow.workspace, request.collection, request.user)
            await ctx.reply(ConversationResponse(forgotten=done, count=sum(done.records.values())))
            return
        if op in NEEDS_CONVERSATION and not request.conversation_id:
            raise BadRequest(f"{op}: conversation_id is required", type="missing-scope")
        scope = self.scope(ctx, request.collection, request.user, request.conversation_id)
        memory.operations.check_sizes(request)  # before the screen reads every text of it
        # A turn's embedding and its PII screen run side by side (the answer waits for both).
        early = memory.memory.embed_early(request) if op == "append" else None
        # In line behind the operations on this conversation that arrived before (entered
        # before anything is awaited): a follow-up's read sees the turn appended ahead of it.
        ordered = self.order.turn(scope) if scope.conversation else contextlib.nullcontext()
        try:
            async with ordered:
                request = await self.pii.screen(ctx.flow.workspace, request)
                reply = await memory.operations.run(op, scope, request, ctx, early=early)
        except BadRequest as exc:
            if exc.type == "quota-exceeded":  # a turn past the conversation's cap: counted
                self._refusals.labels(self.id, "turn", "conversation").inc()
            raise
        finally:
            if early is not None:
                early.discard()
        if reply.created and reply.turn is not None:  # handed to the answer: given, once
            for notice in reply.turn.notices:
                self._notices.labels(self.id, notice.kind, notice.action).inc()
        await ctx.reply(reply)

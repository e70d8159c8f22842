"""The conversation-memory processor: ``request:tg:conversation-memory:{workspace}:{flow}``,
publishing :class:`ConversationEnded` on ``flow:tg:conversation-ended:{workspace}:{flow}``."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry
from pydantic import Field

from memory_services.conversations.lifecycle import ConversationLifecycle
from memory_services.conversations.memory import ConversationMemory
from memory_services.conversations.operations import ENDED, ConversationOperations, send_ended
from memory_services.conversations.records import ConversationLimits
from memory_services.metrics import quota_refusals
from memory_services.processor import Clock, MemoryProcessor
from memory_services.runtime import MemorySettings
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import VectorStore
from react_mem.bus.transport import Transport
from react_mem.embedding.base import Embedder
from react_mem.errors import BadRequest, ConfigurationError
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
    {"append", "get", "update-summary", "end", "delete"}
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


class ConversationMemoryProcessor(MemoryProcessor[ConversationMemorySettings]):
    """Keeps conversations (see :mod:`.schema` for the operations) and announces their end."""

    default_id: ClassVar[str] = "conversation-memory"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock = time.time,
        store: VectorStore | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        super().__init__(
            settings, transport, registry=registry, clock=clock, store=store, embedder=embedder
        )
        self._memory: ConversationMemory | None = None
        self._refusals = quota_refusals(registry)
        self._lifecycle: ConversationLifecycle | None = None
        self._operations: ConversationOperations | None = None
        self.kept_ended = self.retention(
            "conversation-retention-days", self.settings.retention_days
        )
        self.serve_requests(ConversationRequest, ConversationResponse, self.on_request)
        self.register_specification(ProducerSpec(name=ENDED, schema=ConversationEnded))

    @property
    def memory(self) -> ConversationMemory:
        if self._memory is None:
            raise ConfigurationError(f"{self.id}: not started")
        return self._memory

    @property
    def lifecycle(self) -> ConversationLifecycle:
        if self._lifecycle is None:
            raise ConfigurationError(f"{self.id}: not started")
        return self._lifecycle

    @property
    def operations(self) -> ConversationOperations:
        if self._operations is None:
            raise ConfigurationError(f"{self.id}: not started")
        return self._operations

    async def open_memory(self, store: VectorStore, embedder: Embedder) -> None:
        s = self.settings
        limits = ConversationLimits(
            max_query_chars=s.max_query_chars,
            max_answer_chars=s.max_answer_chars,
            max_summary_chars=s.max_summary_chars,
            max_turns=s.max_turns_per_conversation,
        )
        self._memory = ConversationMemory(
            store,
            embedder,
            collection=f"conversations-{embedder.dimension}",
            registry=ScopeRegistry(store, "conversation-scopes-1"),
            limits=limits,
            clock=self.clock,
        )
        await self._memory.ensure()
        self._lifecycle = ConversationLifecycle(
            self._memory,
            publish=self._publish,
            idle_timeout=s.idle_timeout,
            clock=self.clock,
            retention=self.kept_ended,
        )
        self._operations = ConversationOperations(
            self._memory, self._lifecycle, clock=self.clock, default_top_k=s.default_top_k
        )

    async def sweep(self) -> None:
        if filled := await self.memory.fill_flags():
            logger.info(
                "%s: %d turns stored before the tells_time flag now have it", self.id, filled
            )
        conversations, turns, ended = await self.lifecycle.sweep()
        self.items.labels(processor=self.id, kind="conversation").set(conversations)
        self.items.labels(processor=self.id, kind="turn").set(turns)
        if ended:
            logger.info("%s: ended %d idle conversations", self.id, ended)
        expired, self.lifecycle.expired = self.lifecycle.expired, 0
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
    async def on_request(self, request: ConversationRequest, ctx: MessageContext) -> None:
        op = request.operation
        if op == "forget":  # the user's every collection: no one scope
            done = await self.memory.forget(ctx.flow.workspace, request.collection, request.user)
            await ctx.reply(ConversationResponse(forgotten=done, count=sum(done.records.values())))
            return
        if op in NEEDS_CONVERSATION and not request.conversation_id:
            raise BadRequest(f"{op}: conversation_id is required", type="missing-scope")
        scope = self.scope(ctx, request.collection, request.user, request.conversation_id)
        request = await self.pii.screen(ctx.flow.workspace, request)
        try:
            reply = await self.operations.run(op, scope, request, ctx)
        except BadRequest as exc:
            if exc.type == "quota-exceeded":  # a turn past the conversation's cap: counted
                self._refusals.labels(self.id, "turn", "conversation").inc()
            raise
        await ctx.reply(reply)

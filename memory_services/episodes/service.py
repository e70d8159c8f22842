"""The episode-memory processor: ``request:tg:episode-memory:{workspace}:{flow}``."""

from __future__ import annotations

import logging
import time
import uuid
from typing import ClassVar

from prometheus_client import CollectorRegistry
from pydantic import Field

from memory_services.consolidation.engine import Options
from memory_services.consolidation.metrics import Consolidations
from memory_services.episodes.memory import EpisodeMemory
from memory_services.episodes.records import EpisodeLimits
from memory_services.processor import Clock, MemoryProcessor, unknown_operation
from memory_services.runtime import MemorySettings
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import Scope, VectorStore
from react_mem.bus.transport import Transport
from react_mem.embedding.base import Embedder
from react_mem.errors import ConfigurationError
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema.consolidation import ConsolidationReport
from react_mem.schema.episodes import OPERATIONS, EpisodeRequest, EpisodeResponse

logger = logging.getLogger(__name__)

SECONDS_PER_DAY = 86400.0


class EpisodeMemorySettings(MemorySettings):
    #: Episodes kept per workspace + collection + user; the oldest are evicted past it.
    max_episodes_per_scope: int = Field(default=1000, ge=1)
    #: Episodes older than this are never returned and are swept; None keeps them. A
    #: workspace's agent-mem ``episode-retention-days`` overrides it.
    max_age_days: float | None = Field(default=180.0, gt=0)
    #: Seconds between background sweeps (age retention, the size gauge).
    sweep_interval: float = Field(default=600.0, gt=0)
    #: ``retrieve`` without ``top_k`` (seed 004: episode-retrieval-top-k).
    default_top_k: int = Field(default=3, ge=1, le=50)
    max_goal_chars: int = Field(default=4000, ge=1)
    max_steps: int = Field(default=200, ge=0)
    max_episode_bytes: int = Field(default=512 * 1024, ge=1024)
    #: Seconds between scheduled consolidation passes over every collection (checked at
    #: each sweep); none: only on request.
    consolidation_interval: float | None = Field(default=None, gt=0)
    #: Cosine similarity (of the stored goal + lessons vectors) at or above which episodes
    #: merge.
    consolidation_similarity: float = Field(default=0.85, gt=0.0, le=1.0)
    #: Episodes whose score is at or above this are never consolidated.
    consolidation_importance: float = Field(default=0.7, gt=0.0, le=1.0)
    #: Episodes one pass compares at most (the rest wait for the next pass).
    consolidation_max_candidates: int = Field(default=10_000, ge=2, le=100_000)


class EpisodeMemoryProcessor(MemoryProcessor):
    """Stores, retrieves, lists, forgets and consolidates episodes; see :mod:`.schema` for
    the operations. With ``consolidation_interval`` set, consolidates on that schedule."""

    Settings: ClassVar[type[ProcessorSettings]] = EpisodeMemorySettings
    default_id: ClassVar[str] = "episode-memory"

    def __init__(
        self,
        settings: ProcessorSettings,
        transport: Transport,
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock = time.time,
    ) -> None:
        super().__init__(settings, transport, registry=registry, clock=clock)
        assert isinstance(self.memory_settings, EpisodeMemorySettings)
        self.episode_settings: EpisodeMemorySettings = self.memory_settings
        self._memory: EpisodeMemory | None = None
        self.consolidations = Consolidations(
            registry, self.id, "episode", self.episode_settings.consolidation_interval
        )
        self.episode_retention = self.retention(
            "episode-retention-days", self.episode_settings.max_age_days
        )
        self.serve_requests(EpisodeRequest, EpisodeResponse, self.on_request)

    @property
    def sweep_interval(self) -> float:
        return self.episode_settings.sweep_interval

    @property
    def memory(self) -> EpisodeMemory:
        if self._memory is None:
            raise ConfigurationError(f"{self.id}: not started")
        return self._memory

    async def open_memory(self, store: VectorStore, embedder: Embedder) -> None:
        s = self.episode_settings
        self._memory = EpisodeMemory(
            store,
            embedder,
            collection=f"episodes-{embedder.dimension}",
            registry=ScopeRegistry(store, "episode-scopes-1"),
            limits=EpisodeLimits(
                max_goal_chars=s.max_goal_chars,
                max_steps=s.max_steps,
                max_episode_bytes=s.max_episode_bytes,
            ),
            max_per_scope=s.max_episodes_per_scope,
            max_age=None if s.max_age_days is None else s.max_age_days * SECONDS_PER_DAY,
            default_top_k=s.default_top_k,
            clock=self.clock,
            retention=self.episode_retention,
            consolidation=Options(
                similarity_threshold=s.consolidation_similarity,
                importance_threshold=s.consolidation_importance,
                max_candidates=s.consolidation_max_candidates,
            ),
        )
        await self._memory.ensure()

    async def sweep(self) -> None:
        removed, held = await self.memory.sweep()
        self.items.labels(processor=self.id, kind="episode").set(held)
        if removed:
            logger.info("%s: swept %d episodes past the age limit", self.id, removed)
        if self.consolidations.due():
            pass_id = f"scheduled-{uuid.uuid4()}"
            for report in await self.memory.consolidate_all(pass_id):
                self.consolidations.record(report, changed=True, undone=False)

    async def on_request(self, request: EpisodeRequest, ctx: MessageContext) -> None:
        if request.operation not in OPERATIONS:
            raise unknown_operation(request.operation, OPERATIONS)
        if request.operation == "forget":  # the user's every collection: no one scope
            done = await self.memory.forget(ctx.flow.workspace, request.collection, request.user)
            await ctx.reply(EpisodeResponse(forgotten=done, count=sum(done.records.values())))
            return
        scope = self.scope(ctx, request.collection, request.user, request.conversation_id)
        request = await self.pii.screen(ctx.flow.workspace, request)
        if request.operation == "consolidate":
            pass_id = request.consolidation_id or ctx.id or str(uuid.uuid4())
            report, changed = await self.memory.consolidate(scope, request, pass_id)
            await ctx.reply(self._reported(report, changed, undone=False))
        elif request.operation == "unconsolidate":
            report, changed = await self.memory.unconsolidate(scope, request.consolidation_id)
            await ctx.reply(self._reported(report, changed, undone=True))
        else:
            await ctx.reply(await self._execute(scope, request))

    def _reported(
        self, report: ConsolidationReport, changed: bool, *, undone: bool
    ) -> EpisodeResponse:
        self.consolidations.record(report, changed=changed, undone=undone)
        return EpisodeResponse(consolidation=report)

    async def _execute(self, scope: Scope, request: EpisodeRequest) -> EpisodeResponse:
        memory, op = self.memory, request.operation
        if op == "store":
            episode_id, created, evicted = await memory.store(scope, request)
            return EpisodeResponse(id=episode_id, created=created, evicted=evicted)
        if op == "retrieve":
            return EpisodeResponse(episodes=await memory.retrieve(scope, request))
        if op == "get":
            return EpisodeResponse(episodes=await memory.get(scope, request.ids))
        if op == "list":
            episodes, next_offset = await memory.page(scope, request)
            return EpisodeResponse(episodes=episodes, next_offset=next_offset)
        if op == "delete":
            return EpisodeResponse(count=await memory.delete(scope, request.ids))
        if op == "purge":
            return EpisodeResponse(count=await memory.purge(scope))
        # Never a destructive default: an operation listed but not dispatched is refused.
        raise unknown_operation(op, OPERATIONS)

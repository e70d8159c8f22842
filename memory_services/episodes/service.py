"""The episode-memory processor: ``request:tg:episode-memory:{workspace}:{flow}``."""

from __future__ import annotations

import logging
import uuid
from typing import ClassVar, Unpack, assert_never

from pydantic import Field

from memory_services.consolidation.metrics import Consolidations
from memory_services.consolidation.settings import ConsolidationSettings
from memory_services.episodes.episode_memory import EpisodeMemory
from memory_services.episodes.records import EpisodeLimits
from memory_services.metrics import quota_evictions
from memory_services.processor import MemoryOptions, MemoryProcessor, page_offset
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import Scope, VectorStore
from react_mem.bus.transport import Transport
from react_mem.embedding.base import Embedder
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema.consolidation import ConsolidationReport
from react_mem.schema.episodes import (
    MAX_EPISODE_STEPS,
    EpisodeHits,
    EpisodeRequest,
    EpisodeResponse,
    ScopedEpisodeOperation,
)

logger = logging.getLogger(__name__)

SECONDS_PER_DAY = 86400.0


class EpisodeMemorySettings(ConsolidationSettings):
    #: Episodes kept per workspace + collection + user; past it the least valuable are
    #: evicted: score plus recency, 0.5^(age / ``eviction_half_life_days``).
    max_episodes_per_scope: int = Field(default=1000, ge=1)
    eviction_half_life_days: float = Field(default=30.0, gt=0)
    #: Episodes older than this are never returned and are swept; None keeps them. A
    #: workspace's agent-mem ``episode-retention-days`` overrides it.
    max_age_days: float | None = Field(default=180.0, gt=0)
    #: Seconds between background sweeps (age retention, the size gauge).
    sweep_interval: float = Field(default=600.0, gt=0)
    #: ``retrieve`` without ``top_k`` (seed 004: episode-retrieval-top-k).
    default_top_k: int = Field(default=3, ge=1, le=50)
    max_goal_chars: int = Field(default=4000, ge=1)
    max_steps: int = Field(default=200, ge=0, le=MAX_EPISODE_STEPS)
    max_episode_bytes: int = Field(default=512 * 1024, ge=1024)


class EpisodeMemoryProcessor(MemoryProcessor[EpisodeMemorySettings, EpisodeMemory]):
    """Stores, retrieves, lists, forgets and consolidates episodes; see :mod:`.schema` for
    the operations. With ``consolidation_interval`` set, consolidates on that schedule."""

    default_id: ClassVar[str] = "episode-memory"

    def __init__(
        self, settings: ProcessorSettings, transport: Transport, **options: Unpack[MemoryOptions]
    ) -> None:
        super().__init__(settings, transport, **options)
        registry = options.get("registry")
        self._evictions = quota_evictions(registry).labels(processor=self.id, kind="episode")
        self.consolidations = Consolidations(
            registry, self.id, "episode", self.settings.consolidation_interval
        )
        self.episode_retention = self.retention(
            "episode-retention-days", self.settings.max_age_days
        )
        self.serve_requests(EpisodeRequest, EpisodeResponse, self.with_memory(self.on_request))

    async def open_memory(self, store: VectorStore, embedder: Embedder) -> EpisodeMemory:
        s = self.settings
        memory = EpisodeMemory(
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
            half_life=s.eviction_half_life_days * SECONDS_PER_DAY,
            max_age=None if s.max_age_days is None else s.max_age_days * SECONDS_PER_DAY,
            default_top_k=s.default_top_k,
            clock=self.clock,
            retention=self.episode_retention,
            consolidation=s.consolidation_options(),
        )
        await memory.ensure()
        return memory

    async def sweep(self, memory: EpisodeMemory) -> None:
        removed, held = await memory.sweep()
        self.items.labels(processor=self.id, kind="episode").set(held)
        if removed:
            logger.info("%s: swept %d episodes past the age limit", self.id, removed)
        await self.consolidations.run_if_due(memory.consolidate_all)

    async def on_request(
        self, memory: EpisodeMemory, request: EpisodeRequest, ctx: MessageContext
    ) -> None:
        op = request.operation
        if op == "forget":  # the user's every collection: no one scope
            done = await memory.forget(ctx.flow.workspace, request.collection, request.user)
            await ctx.reply(EpisodeResponse(forgotten=done, count=sum(done.records.values())))
            return
        scope = self.scope(ctx, request.collection, request.user, request.conversation_id)
        memory.check_sizes(request)  # before the screen reads every text of it
        request = await self.pii.screen(ctx.flow.workspace, request)
        await ctx.reply(await self._execute(memory, op, scope, request, ctx.id))

    def _reported(
        self, report: ConsolidationReport, changed: bool, *, undone: bool
    ) -> EpisodeResponse:
        self.consolidations.record(report, changed=changed, undone=undone)
        return EpisodeResponse(consolidation=report)

    async def _execute(
        self,
        memory: EpisodeMemory,
        op: ScopedEpisodeOperation,
        scope: Scope,
        r: EpisodeRequest,
        request_id: str | None,
    ) -> EpisodeResponse:
        match op:
            case "store":
                episode_id, created, evicted = await memory.store(scope, r)
                if evicted:  # the oldest, past max_episodes_per_scope: counted
                    self._evictions.inc(evicted)
                return EpisodeResponse(id=episode_id, created=created, evicted=evicted)
            case "retrieve":
                episodes, also = await memory.retrieve_all(scope, r)
                hits = [EpisodeHits(episodes=found) for found in also]
                return EpisodeResponse(episodes=episodes, also=hits)
            case "get":
                return EpisodeResponse(episodes=await memory.get(scope, r.ids))
            case "list":
                offset = page_offset("list", r.offset)
                page = r.model_copy(update={"offset": offset})
                episodes, next_offset = await memory.page(scope, page)
                return EpisodeResponse(episodes=episodes, next_offset=next_offset)
            case "delete":
                return EpisodeResponse(count=await memory.delete(scope, r.ids))
            case "purge":
                return EpisodeResponse(count=await memory.purge(scope))
            case "consolidate":
                pass_id = r.consolidation_id or request_id or str(uuid.uuid4())
                report, changed = await memory.consolidate(scope, r, pass_id)
                return self._reported(report, changed, undone=False)
            case "unconsolidate":
                report, changed = await memory.unconsolidate(scope, r.consolidation_id)
                return self._reported(report, changed, undone=True)
            case _:
                assert_never(op)

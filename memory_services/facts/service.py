"""The fact-memory processor: ``request:tg:fact-memory:{workspace}:{flow}``."""

from __future__ import annotations

import logging
import uuid
from typing import ClassVar, Unpack, assert_never

from pydantic import Field

from memory_services.consolidation.metrics import Consolidations
from memory_services.consolidation.settings import ConsolidationSettings
from memory_services.facts import ranked
from memory_services.facts.fact_memory import FactMemory
from memory_services.facts.quota import FactQuotaExceeded
from memory_services.facts.records import FactPolicy, SentencePooling
from memory_services.metrics import quota_evictions, quota_refusals
from memory_services.processor import MemoryOptions, MemoryProcessor, page_offset
from memory_services.retrieval import resolve, time_boost
from memory_services.store.base import Scope, VectorStore
from react_mem.bus.transport import Transport
from react_mem.embedding.base import Embedder
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema.consolidation import ConsolidationReport
from react_mem.schema.facts import (
    MAX_FACT_BATCH,
    FactRequest,
    FactResponse,
    ScopedFactOperation,
)

logger = logging.getLogger(__name__)

#: The side table of retrieval statistics, in the store's directory (:mod:`.access_table`).
ACCESS_FILE = "fact-access.sqlite3"


class FactMemorySettings(ConsolidationSettings):
    #: Cosine similarity at or above which a new fact reinforces an existing one.
    near_duplicate_threshold: float = Field(default=0.92, gt=0.0, le=1.0)
    #: How far a reinforcement moves confidence towards 1.
    reinforce_rate: float = Field(default=0.2, ge=0.0, le=1.0)
    default_importance: float = Field(default=0.5, ge=0.0, le=1.0)
    default_confidence: float = Field(default=0.7, ge=0.0, le=1.0)
    #: TTL of facts stored without ``ttl_seconds``; none: they never expire. A workspace's
    #: agent-mem ``fact-ttl-days`` overrides it.
    default_ttl_seconds: float | None = Field(default=None, gt=0)
    max_content_chars: int = Field(default=4000, ge=1)
    #: Facts in one ``store`` request.
    max_batch: int = Field(default=256, ge=1, le=MAX_FACT_BATCH)
    #: Fact records (history included) per workspace + collection + user.
    max_facts_per_scope: int = Field(default=100_000, ge=1)
    #: Fact records (history included) per workspace + collection, all users together, so
    #: new user ids do not escape the per-user quota; none: no limit. Never made room for
    #: by eviction (see :mod:`.quota`).
    max_facts_per_collection: int | None = Field(default=1_000_000, ge=1)
    max_top_k: int = Field(default=100, ge=1)
    #: Largest ``list`` page, and most ids in one ``get`` or ``delete``.
    max_list_limit: int = Field(default=1000, ge=1, le=10_000)
    #: Seconds a retrieval's access statistics (last_accessed, access_count) may wait
    #: before they are written, coalesced, to the side table behind the reply (reads see
    #: them meanwhile; a stop writes them; see :mod:`.access`).
    access_write_delay: float = Field(default=1.0, ge=0)
    #: Absorbed facts expire this many seconds after a merge (then it can no longer be
    #: undone for them); none: kept until deleted or purged.
    consolidation_history_ttl: float | None = Field(default=None, gt=0)
    #: Facts: one threshold (none: ``consolidation_importance``, 0.8). Facts are stored at
    #: importance 0.5 unless told otherwise (``default_importance``, the extractor's
    #: default), so seed 002's "only below 0.5" would never merge an ordinary fact
    #: (docs/ace.md).
    consolidation_min_importance: float | None = Field(default=None, gt=0.0, le=1.0)
    #: A stored fact that a new one updates by rule (same subject and attribute, see
    #: :mod:`.slots`) becomes history; off: only ``update`` supersedes.
    supersede_by_rule: bool = True
    #: A fact of two sentences or more is stored with a vector per sentence too (at most
    #: 16; in the same embedding call), so a search may rank it by its best sentence
    #: (``retrieval.sentences``); off: one vector per fact, less embedding work at ingest.
    sentence_vectors: bool = True
    #: How they are made: "separate" (each sentence embedded alone, with the fact's
    #: label), "late" (pooled from the fact's own model run), "late-label" (its label's
    #: tokens pooled into each too); see docs/benchmarks.md.
    sentence_pooling: SentencePooling = "separate"

    def policy(self) -> FactPolicy:
        return FactPolicy(**{k: getattr(self, k) for k in FactPolicy.__dataclass_fields__})


class FactMemoryProcessor(MemoryProcessor[FactMemorySettings, FactMemory]):
    """Serves store, retrieve, get, history, list, update, delete, purge, consolidate and
    unconsolidate (see :mod:`.schema`); deletes expired facts in the background and, when
    ``consolidation_interval`` is set, consolidates every collection on that schedule."""

    default_id: ClassVar[str] = "fact-memory"

    def __init__(
        self, settings: ProcessorSettings, transport: Transport, **options: Unpack[MemoryOptions]
    ) -> None:
        super().__init__(settings, transport, **options)
        registry = options.get("registry")
        self._size = self.items.labels(processor=self.id, kind="fact")
        self.consolidations = Consolidations(
            registry, self.id, "fact", self.settings.consolidation_interval
        )
        self._evictions = quota_evictions(registry).labels(processor=self.id, kind="fact")
        ttl = self.settings.default_ttl_seconds
        self.fact_ttl = self.retention("fact-ttl-days", None if ttl is None else ttl / 86400.0)
        self._refusals = quota_refusals(registry)
        self.serve_requests(FactRequest, FactResponse, self.with_memory(self.on_request))

    async def open_memory(self, store: VectorStore, embedder: Embedder) -> FactMemory:
        memory = FactMemory(
            store,
            embedder,
            policy=self.settings.policy(),
            clock=self.clock,
            on_change=self._size.inc,
            access_delay=self.settings.access_write_delay,
            access_path=self.settings.store_dir / ACCESS_FILE,
            workspace_ttl=self.fact_ttl.seconds,
        )
        await memory.ensure()
        return memory

    async def close_memory(self, memory: FactMemory) -> None:
        await memory.close()

    async def sweep(self, memory: FactMemory) -> None:
        removed, held = await memory.sweep()
        self._size.set(held)
        if removed:
            logger.info("%s: swept %d expired facts", self.id, removed)
        await self.consolidations.run_if_due(memory.consolidate_all)

    async def on_request(
        self, memory: FactMemory, request: FactRequest, ctx: MessageContext
    ) -> None:
        op = request.operation
        if op == "forget":  # the user's every collection: no one scope
            forgotten = await memory.forget(ctx.flow.workspace, request.collection, request.user)
            await ctx.reply(
                FactResponse(forgotten=forgotten, deleted=sum(forgotten.records.values()))
            )
            return
        scope = self.scope(ctx, request.collection, request.user, request.conversation_id)
        memory.check_sizes(request)  # before the screen reads every text of it
        request = await self.pii.screen(ctx.flow.workspace, request)
        try:
            response = await self._execute(memory, op, scope, request, ctx.id)
        except FactQuotaExceeded as exc:
            self._refusals.labels(processor=self.id, kind="fact", quota=exc.quota).inc()
            logger.warning("%s: store refused at the %s quota: %s", self.id, exc.quota, exc)
            raise
        await ctx.reply(response)

    async def _execute(
        self,
        memory: FactMemory,
        op: ScopedFactOperation,
        scope: Scope,
        r: FactRequest,
        request_id: str | None,
    ) -> FactResponse:
        match op:
            case "store":
                stored, evicted = await memory.store(
                    scope, r.facts, request_id, evict=r.evict, sequence=r.sequence
                )
                if evicted:
                    self._evictions.inc(len(evicted))
                    logger.info("%s: evicted %s at the user quota", self.id, ", ".join(evicted))
                return FactResponse(stored=stored, evicted=evicted)
            case "update":
                stored_one = await memory.update(scope, r.fact_id, r.fact, request_id)
                return FactResponse(stored=[stored_one])
            case "retrieve":
                facts = await memory.retrieve(
                    scope,
                    query=r.query,
                    vector=r.vector,
                    top_k=r.top_k,
                    min_score=r.min_score,
                    retrieval=resolve(r.retrieval),
                    time_boost=time_boost(r.retrieval),
                )
                return FactResponse(facts=facts)
            case "get":
                facts, missing = await memory.get(scope, r.ids)
                return FactResponse(facts=facts, missing=missing)
            case "history":
                return FactResponse(facts=await memory.history(scope, r.fact_id))
            case "list":
                offset = page_offset("list", r.offset)
                facts, next_offset = await memory.page(scope, limit=r.limit, cursor=offset)
                return FactResponse(facts=facts, next_offset=next_offset)
            case "sorted":
                facts, next_offset, total = await ranked.sorted_page(
                    memory.ctx, memory.sort_keys, scope, r.sort_by,
                    ascending=r.ascending, limit=r.limit, offset=r.offset,
                )  # fmt: skip
                return FactResponse(facts=facts, next_offset=next_offset, total=total)
            case "delete":
                return FactResponse(deleted=await memory.delete(scope, r.ids))
            case "consolidate":
                report, changed = await memory.consolidate(
                    scope,
                    r.consolidation_id or request_id or str(uuid.uuid4()),
                    similarity_threshold=r.similarity_threshold,
                    importance_threshold=r.importance_threshold,
                    min_importance=r.min_importance,
                    dry_run=r.dry_run,
                )
                return self._reported(report, changed, undone=False)
            case "unconsolidate":
                report, changed = await memory.unconsolidate(scope, r.consolidation_id)
                return self._reported(report, changed, undone=True)
            case "purge":
                return FactResponse(deleted=await memory.purge(scope))
            case _:
                assert_never(op)

    def _reported(
        self, report: ConsolidationReport, changed: bool, *, undone: bool
    ) -> FactResponse:
        self.consolidations.record(report, changed=changed, undone=undone)
        return FactResponse(consolidation=report)

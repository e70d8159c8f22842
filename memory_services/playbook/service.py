"""The playbook-memory processor: ``request:tg:playbook-memory:{workspace}:{flow}``."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import ClassVar, Unpack, assert_never

from pydantic import Field, field_validator

from memory_services.playbook import deltas, seeds
from memory_services.playbook.access import Relation
from memory_services.playbook.metrics import PlaybookMetrics
from memory_services.playbook.playbook_memory import PlaybookMemory, bullet_ids
from memory_services.playbook.records import PlaybookPolicy, ScopeKey
from memory_services.playbook.scoring import DecayRates
from memory_services.processor import MAX_SCOPE_ID_CHARS, MemoryOptions, MemoryProcessor
from memory_services.runtime import MemorySettings
from memory_services.store.base import Scope, VectorStore
from react_mem.bus.transport import Transport
from react_mem.embedding.base import Embedder
from react_mem.errors import BadRequest
from react_mem.processor.context import MessageContext
from react_mem.processor.settings import ProcessorSettings
from react_mem.schema.forget import Forgotten
from react_mem.schema.playbook import (
    MAX_DELTA_OPERATIONS,
    Delta,
    DeltaOperation,
    PlaybookRequest,
    PlaybookResponse,
)

logger = logging.getLogger(__name__)

#: The defaults' one source: :class:`PlaybookPolicy` (the deployment files set none of the
#: playbook's tuning; ``tests/test_ace_defaults.py`` keeps it so).
_P = PlaybookPolicy


class PlaybookMemorySettings(MemorySettings):
    #: Decay per access of each memory type (seed 000); values outside [0, 1] are clamped.
    semantic_decay: float = _P.semantic_decay
    episodic_decay: float = _P.episodic_decay
    procedural_decay: float = _P.procedural_decay
    #: An ADD at least this similar (cosine) to a bullet reinforces it (seed 000: 0.9).
    reinforce_threshold: float = Field(default=_P.reinforce_threshold, gt=0.0, le=1.0)
    #: Grow-and-refine merges bullets at least this similar (seed 001: 0.85).
    dedup_threshold: float = Field(default=_P.dedup_threshold, gt=0.0, le=1.0)
    #: Bullets per playbook; past it the lowest by decay score are pruned (seed 001: 100).
    max_bullets: int = Field(default=_P.max_bullets, ge=1)
    #: A bullet's active strength is 1 + gain * (helpful - harmful) within
    #: [0.1, ``max_strength``], so proven bullets outlast fresh noise between uses and
    #: harmful marks demote (0: the seeds' fixed strength, pruning by recency of use).
    #: Chosen by ``benchmarks/playbook.py`` (docs/ace.md).
    reinforcement_gain: float = Field(default=_P.reinforcement_gain, ge=0.0)
    max_strength: float = Field(default=_P.max_strength, ge=1.0)
    #: Seed 003's auto-pruning: a bullet marked harmful this many times more than helpful
    #: is removed (0: never).
    harmful_margin: int = Field(default=_P.harmful_margin, ge=0)
    #: Retrieval bonus for the requesting user's own bullets, and for the requested topic.
    user_boost: float = Field(default=_P.user_boost, ge=0.0)
    topic_boost: float = Field(default=_P.topic_boost, ge=0.0)
    #: Retrieval leaves out bullets less relevant (cosine; ``hybrid``: the mean of cosine
    #: and term coverage) than this, except those tagged ``always`` (docs/ace.md).
    min_relevance: float = Field(default=_P.min_relevance, ge=0.0, le=1.0)
    #: The same floor for ``jaccard`` relevance (word overlap runs lower than cosine).
    min_jaccard: float = Field(default=_P.min_jaccard, ge=0.0, le=1.0)
    #: Places in one retrieval that bullets tagged ``always`` take when below the floor.
    general_slots: int = Field(default=_P.general_slots, ge=0)
    #: Versions whose bullets ``show`` and ``rollback`` can reach.
    version_retention: int = Field(default=_P.version_retention, ge=1)
    #: Versions whose delta record (and delta id, for exactly-once) is kept.
    history_retention: int = Field(default=_P.history_retention, ge=1)
    max_content_chars: int = Field(default=_P.max_content_chars, ge=1)
    max_operations: int = Field(default=_P.max_operations, ge=1, le=MAX_DELTA_OPERATIONS)
    max_list_limit: int = Field(default=_P.max_list_limit, ge=1, le=10_000)
    #: Playbooks kept in memory (the store stays the truth; a miss reloads).
    cache_scopes: int = Field(default=_P.cache_scopes, ge=1)
    #: A YAML/JSON list of ``{content, section, tags, memory_type}`` written into every
    #: playbook the first time it is used: seed 001's meta-strategies by default
    #: (``memory_services/playbook/seed.yaml``); ``none`` (or empty): no seeds.
    seed_bullets: Path | None = seeds.DEFAULT
    group_relative: ClassVar[tuple[str, ...]] = ("flows", "seed_bullets")

    @field_validator("seed_bullets", mode="before")
    @classmethod
    def _no_seeds(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
            return None
        return value

    @field_validator("semantic_decay", "episodic_decay", "procedural_decay")
    @classmethod
    def _clamp(cls, value: float) -> float:
        return min(1.0, max(0.0, value))

    def policy(self) -> PlaybookPolicy:
        return PlaybookPolicy(**{k: getattr(self, k) for k in PlaybookPolicy.__dataclass_fields__})

    def rates(self) -> DecayRates:
        return DecayRates(self.semantic_decay, self.episodic_decay, self.procedural_decay)


class PlaybookMemoryProcessor(MemoryProcessor[PlaybookMemorySettings, PlaybookMemory]):
    """Serves the playbook operations (see :mod:`.schema`), each checked against the
    requester's relation to the playbook (:mod:`.access`), and removes expired bullets in
    the background."""

    default_id: ClassVar[str] = "playbook-memory"
    #: Removals, exports and sharing are audited.
    audited_operations: ClassVar[frozenset[str]] = frozenset(
        {"delete", "purge", "forget", "export", "grant", "revoke", "share"}
    )

    def __init__(
        self, settings: ProcessorSettings, transport: Transport, **options: Unpack[MemoryOptions]
    ) -> None:
        super().__init__(settings, transport, **options)
        self.metrics = PlaybookMetrics(self.id, options.get("registry"))
        self.serve_requests(PlaybookRequest, PlaybookResponse, self.with_memory(self.on_request))

    async def open_memory(self, store: VectorStore, embedder: Embedder) -> PlaybookMemory:
        s = self.settings
        memory = PlaybookMemory(
            store,
            embedder,
            policy=s.policy(),
            rates=s.rates(),
            clock=self.clock,
            seed_operations=seeds.load(s.seed_bullets) if s.seed_bullets else (),
            metrics=self.metrics,
        )
        await memory.ensure()
        return memory

    async def sweep(self, memory: PlaybookMemory) -> None:
        removed, held = await memory.sweep()
        self.metrics.bullets.set(held)
        if removed:
            logger.info("%s: removed %d expired bullets", self.id, removed)

    def key(self, ctx: MessageContext, request: PlaybookRequest) -> ScopeKey:
        """The collection-wide playbook of the request's context (``.of(owner)``: another)."""
        parts = (ctx.flow.workspace, request.collection, request.context_scope_id)
        names = (request.user or "", request.playbook_owner or "", *request.grantees)
        if any(len(p) > MAX_SCOPE_ID_CHARS for p in (*parts, *names)):
            raise BadRequest(
                f"collection, context_scope_id, user, playbook_owner and grantees are limited "
                f"to {MAX_SCOPE_ID_CHARS} characters",
                type="too-large",
            )
        if request.operation != "forget" or request.collection:
            Scope(ctx.flow.workspace, request.collection)  # a collection is required
        return ScopeKey(*parts)

    async def on_request(
        self, memory: PlaybookMemory, request: PlaybookRequest, ctx: MessageContext
    ) -> None:
        delta = request.operation == "apply-delta"
        try:
            key = self.key(ctx, request)
            if delta:  # refused over the limits before the screen reads every text of it
                deltas.check(request.delta, memory.policy)
            request = await self.pii.screen(ctx.flow.workspace, request)
            response = masked(await self._run(memory, key, request, ctx.id), request.user or None)
        except BadRequest:
            if delta:
                self.metrics.delta("rejected")
            raise
        except Exception:
            if delta:
                self.metrics.delta("failed")
            raise
        await ctx.reply(response)

    async def _run(
        self, memory: PlaybookMemory, base: ScopeKey, r: PlaybookRequest, request_id: str | None
    ) -> PlaybookResponse:
        op, user = r.operation, r.user or None
        if op == "forget":
            return await self._forget(memory, base, r)
        named = r.collection_wide or bool(r.playbook_owner)
        target = base.of(None if r.collection_wide else (r.playbook_owner or user))
        relation = await memory.access.relation(target, user)
        if relation is None:  # another user's private playbook: as if there were none
            raise BadRequest("no such playbook", type="not-found")
        match op:
            case "retrieve":
                keys = [target] if named else await memory.access.readable(base, user)
                # The clocks the requester moves: their own playbook's and the collection's.
                advance = [k for k in keys if k.owner in (None, user)]
                found, pb = await memory.retrieve(
                    keys,
                    query=r.query,
                    vector=r.vector,
                    top_k=r.top_k,
                    weights=r.weights,
                    relevance=r.relevance,
                    user=user,
                    topic=r.topic,
                    advance_clock=r.advance_clock,
                    advance=advance,
                    min_relevance=r.min_relevance,
                )
                return PlaybookResponse(bullets=found, version=pb.version, clock=pb.clock)
            case "get":
                keys = [target] if named else await memory.access.readable(base, user)
                return PlaybookResponse(bullets=await memory.get(keys, r.ids))
            case "list":
                keys = [target] if named else await memory.access.readable(base, user)
                page, following = await memory.page(
                    keys, limit=r.limit, offset=r.offset, section=r.section
                )
                return PlaybookResponse(bullets=page, next_offset=following)
            case "history":
                return PlaybookResponse(history=await memory.history_of(target, r.limit))
            case "show":
                bullets = await memory.show(target, r.version)
                return PlaybookResponse(bullets=bullets, version=r.version)
            case "stats":
                pb = await memory.stats(target)
                return PlaybookResponse(count=memory.count(pb), version=pb.version, clock=pb.clock)
            case "grant" | "revoke":
                _needs_owner(op, relation)
                return await self._grant(memory, target, r)
            case "grants":
                _needs_owner(op, relation)
                return PlaybookResponse(grants=await memory.access.grants(target))
            case "purge":
                _needs_owner(op, relation)
                removed = await memory.purge(target)
                await memory.compact()
                return PlaybookResponse(removed=dict(removed))
            case "apply-delta":
                _needs_editor(op, relation)
                others = [] if named else (await memory.access.readable(base, user))[1:]
                done = await memory.apply_as(target, others, r.delta, user)
                return PlaybookResponse(
                    version=done.version, applied=done.applied, changes=done.changes
                )
            case "rollback":
                _needs_editor(op, relation)
                done = await memory.rollback(target, r.version, request_id=request_id, user=user)
                return PlaybookResponse(
                    version=done.version, applied=done.applied, changes=done.changes
                )
            case "share":
                _needs_editor(op, relation)
                return await self._share(memory, base, target, r, request_id)
            case "delete":
                _needs_editor(op, relation)
                wanted = set(bullet_ids(r.ids, self.settings.max_list_limit))
                removed = await memory.erase(target, lambda b: b.id in wanted, user=user)
                await memory.compact()
                return PlaybookResponse(removed=dict(removed))
            case _:
                assert_never(op)

    async def _grant(
        self, memory: PlaybookMemory, target: ScopeKey, r: PlaybookRequest
    ) -> PlaybookResponse:
        grantees = [g for g in dict.fromkeys(r.grantees) if g]
        if not grantees or (target.owner or "") in grantees:
            raise BadRequest(
                "grantees: name the users (not the owner) to share with", type="bad-grant"
            )
        if r.operation == "grant" and r.relation is None:
            raise BadRequest("grant needs 'relation': viewer or editor", type="bad-grant")
        relation = r.relation if r.operation == "grant" else None
        await memory.access.grant(target, relation, grantees)
        return PlaybookResponse(count=len(grantees))

    async def _share(
        self,
        memory: PlaybookMemory,
        base: ScopeKey,
        source: ScopeKey,
        r: PlaybookRequest,
        request_id: str | None,
    ) -> PlaybookResponse:
        """Move bullets into the collection-wide playbook (its editors only), screened for
        personal data again as an ADD would be."""
        user = r.user or None
        shared = base.of(None)
        if source == shared:
            raise BadRequest("share moves bullets out of a private playbook", type="bad-share")
        if await memory.access.relation(shared, user) not in ("owner", "editor"):
            raise BadRequest(
                "share needs the owner or an editor of the collection-wide playbook",
                type="forbidden",
            )
        found = await memory.get([source], r.ids)
        if not found:
            raise BadRequest("none of these bullets is in the playbook", type="not-found")
        adds = [
            DeltaOperation(
                type="ADD",
                content=b.content,
                section=b.section,
                tags=b.tags,
                memory_type=b.memory_type,
                topic=b.topic or None,
                concept=b.concept or None,
                helpful=b.helpful,
                harmful=b.harmful,
                neutral=b.neutral,
            )
            for b in found
        ]
        delta = Delta(
            delta_id=f"share:{request_id or uuid.uuid4()}", operations=adds, source="share"
        )
        screened = await self.pii.screen(
            base.workspace, PlaybookRequest(operation="apply-delta", delta=delta)
        )
        done = await memory.apply(shared, screened.delta, user=user)
        moved = {b.id for b in found}
        removed = await memory.erase(source, lambda b: b.id in moved, user=user)
        await memory.compact()
        return PlaybookResponse(
            version=done.version, applied=done.applied, changes=done.changes, removed=dict(removed)
        )

    async def _forget(
        self, memory: PlaybookMemory, base: ScopeKey, r: PlaybookRequest
    ) -> PlaybookResponse:
        if not r.user:
            raise BadRequest("forget needs 'user'", type="missing-user")
        if r.collection:
            collections = [r.collection]
        else:
            scopes = await memory.scopes.scopes()
            collections = sorted({s.collection for s in scopes if s.workspace == base.workspace})
        removed = await memory.forget_user(base.workspace, collections, r.user)
        compacted = await memory.compact()
        forgotten = Forgotten(collections=collections, records=dict(removed), compacted=compacted)
        return PlaybookResponse(removed=dict(removed), collections=collections, forgotten=forgotten)


def _needs_owner(op: str, relation: Relation) -> None:
    if relation != "owner":
        raise BadRequest(f"{op} needs the playbook's owner", type="forbidden")


def _needs_editor(op: str, relation: Relation) -> None:
    if relation == "viewer":
        raise BadRequest(f"{op} needs the owner or an editor of the playbook", type="forbidden")


def masked(response: PlaybookResponse, user: str | None) -> PlaybookResponse:
    """Who wrote a bullet or applied a delta is shown to that user and to the collection
    (a request without a user), never to another user: a shared playbook tells bob what
    alice's lessons say, not that they are alice's."""
    if user is None:
        return response
    bullets = [
        b if b.user in (None, user) else b.model_copy(update={"user": None})
        for b in response.bullets
    ]
    history = [
        r if r.user in (None, user) else r.model_copy(update={"user": None})
        for r in response.history
    ]
    return response.model_copy(update={"bullets": bullets, "history": history})

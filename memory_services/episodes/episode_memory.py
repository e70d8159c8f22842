"""Episode memory over a vector store and an embedder: the operations and retention.

Retention works per scope bucket, i.e. workspace + collection + user (a record without a
user is in the collection's user-less bucket): after a store that takes a bucket past
``max_per_scope``, its least valuable episodes are evicted, down to ``max_per_scope`` less a
batch of 5% of it (at most 50). An episode's value is its score (its importance: 1 for a
clean success) plus its recency, 0.5^(age / ``half_life``): a fresh failure outranks a
month-old failure, and a proven success outlasts newer failures (seeds 002/004: pruning by
value, not by age alone); equal values go oldest first. Finding them means reading the
bucket (≈80 ms for 1000 episodes here, against ≈1 ms for a store), so a full bucket pays
that once per batch, not on every store. Episodes older than ``max_age`` are never
returned and are deleted by :meth:`EpisodeMemory.sweep`, which a background task runs; a
workspace's
``episode-retention-days`` (:mod:`react_mem.retention`) overrides ``max_age``.
Episodes merged into another by consolidation (:mod:`.consolidate`) stay in their bucket
and count towards its limit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import uuid
from collections.abc import Callable, Mapping, Sequence

from memory_services.consolidation.engine import (
    IMPORTANCE_THRESHOLD,
    MIN_IMPORTANCE,
    Engine,
    Options,
    check_id,
)
from memory_services.consolidation.ledger import ConsolidationLedger
from memory_services.episodes.consolidate import EpisodeKind, keep_lineage
from memory_services.episodes.records import (
    EpisodeLimits,
    check_sizes,
    embedded_text,
    episode_id,
    episode_payload,
    query_text,
    to_episode,
    validate_store,
)
from memory_services.forget import forget
from memory_services.retrieval import resolve
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import (
    CollectionSpec,
    Condition,
    FieldType,
    Record,
    Scope,
    VectorStore,
)
from react_mem.embedding.base import Embedder
from react_mem.errors import BadRequest
from react_mem.retention import WorkspaceRetention
from react_mem.schema.consolidation import ConsolidationReport
from react_mem.schema.episodes import Episode, EpisodeRequest
from react_mem.schema.forget import Forgotten

#: Consolidation defaults (the service passes its settings).
CONSOLIDATION = Options(
    similarity_threshold=0.85,
    importance_threshold=IMPORTANCE_THRESHOLD,
    min_importance=MIN_IMPORTANCE,
    max_candidates=10_000,
)
#: Retrieve and list skip episodes merged into another.
_UNMERGED = Condition("consolidated_into", missing=True)
#: What a retrieve ``with_steps=False`` leaves unread: most of a long episode's bytes.
_STEPS = ("steps",)


class EpisodeMemory:
    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        *,
        collection: str,
        registry: ScopeRegistry,
        limits: EpisodeLimits,
        max_per_scope: int,
        max_age: float | None,
        default_top_k: int,
        clock: Callable[[], float],
        consolidation: Options = CONSOLIDATION,
        retention: WorkspaceRetention | None = None,
        half_life: float = 30 * 86400.0,
    ) -> None:
        self._store, self._embedder = store, embedder
        self.collection = collection
        self._registry = registry
        self._limits = limits
        self._max_per_scope, self._max_age = max_per_scope, max_age
        self._retention = retention
        self._default_top_k = default_top_k
        self._clock = clock
        self._half_life = half_life
        self._evicting = asyncio.Lock()
        # Store writes and consolidation passes never interleave.
        self._writing = asyncio.Lock()
        self._consolidation_defaults = consolidation
        kind = EpisodeKind(max_lessons=limits.max_lessons, oldest_kept=self._oldest_kept)
        ledger = ConsolidationLedger(store, f"episode-consolidations-{embedder.dimension}")
        self._consolidation = Engine(store, collection, ledger, kind)

    async def ensure(self) -> None:
        spec = CollectionSpec(
            self.collection,
            vector_size=self._embedder.dimension,
            indexes={
                "outcome": FieldType.KEYWORD,
                "created_at": FieldType.FLOAT,
                "session_id": FieldType.KEYWORD,
                "task_type": FieldType.KEYWORD,
                "consolidated_into": FieldType.KEYWORD,
            },
            text_fields=("goal", "lessons"),
        )
        await self._store.ensure(spec)
        await self._registry.ensure()
        await self._consolidation.ledger.ensure()

    # -- operations --------------------------------------------------------------
    def check_sizes(self, request: EpisodeRequest) -> None:
        """Refuse a ``store`` over the limits before anything reads its texts."""
        if request.operation == "store":
            check_sizes(request, self._limits)

    async def store(self, scope: Scope, request: EpisodeRequest) -> tuple[str, bool, int]:
        """Store one episode; return (id, created, evicted). Idempotent under redelivery."""
        validate_store(request, self._limits)
        record_id = episode_id(scope, request)
        found = await self._store.get(self.collection, [record_id], scope=scope)
        created_at = float(found[0].payload["created_at"]) if found else self._clock()
        payload = episode_payload(scope, request, created_at=created_at, limits=self._limits)
        if _same(found, payload):
            return record_id, False, 0  # a redelivery: already stored, nothing to do
        [vector] = await self._embedder.embed([embedded_text(payload)])
        async with self._writing:
            found = await self._store.get(self.collection, [record_id], scope=scope)
            if _same(found, payload):
                return record_id, False, 0
            payload = keep_lineage(found[0].payload if found else None, payload)
            await self._registry.remember(scope)
            record = Record(id=record_id, payload=payload, vector=vector)
            await self._store.upsert(self.collection, [record])
        return record_id, not found, await self._enforce_count(scope)

    async def retrieve(self, scope: Scope, request: EpisodeRequest) -> list[Episode]:
        return (await self.retrieve_all(scope, request))[0]

    async def retrieve_all(
        self, scope: Scope, request: EpisodeRequest
    ) -> tuple[list[Episode], list[list[Episode]]]:
        """The request's episodes, and those of each of its ``also`` searches: one query
        (its vector checked, or its words embedded, once), searched with each's filters."""
        searches = [request, *(request.model_copy(update=a.model_dump()) for a in request.also)]
        top_ks = [r.top_k or self._default_top_k for r in searches]
        if max(top_ks) > self._limits.max_top_k:
            raise BadRequest(f"retrieve: top_k {max(top_ks)} exceeds {self._limits.max_top_k}")
        if request.vector is not None:
            vector = self._checked_vector(request.vector)
            # Beside a vector, the words hybrid ranking reads (the goal's start, if long).
            words = f"{request.goal}\n{request.context}".strip()
            text = words[: self._limits.max_goal_chars + self._limits.max_context_chars] or None
        else:
            text = query_text(request, self._limits)
            [vector] = await self._embedder.embed([text])
        found = []
        for search, top_k in zip(searches, top_ks, strict=True):
            hits = await self._store.search(
                self.collection,
                vector,
                scope=scope,
                limit=top_k,
                min_score=request.min_score,
                where=[*self._fresh(scope.workspace), *_narrowed(search), _UNMERGED],
                text=text,
                retrieval=resolve(request.retrieval),
                leave_out=() if request.with_steps else _STEPS,
            )
            found.append([to_episode(hit.id, hit.payload, hit.score) for hit in hits])
        return found[0], found[1:]

    async def get(self, scope: Scope, ids: Sequence[str]) -> list[Episode]:
        ids = self._checked_ids(ids)
        records = await self._store.get(self.collection, ids, scope=scope)
        oldest = self._oldest_kept(scope.workspace)
        by_id = {r.id: r for r in records if float(r.payload.get("created_at", 0)) >= oldest}
        return [to_episode(i, by_id[i].payload, None) for i in ids if i in by_id]

    async def page(self, scope: Scope, request: EpisodeRequest) -> tuple[list[Episode], str | None]:
        if request.limit > self._limits.max_page:
            raise BadRequest(f"list: limit {request.limit} exceeds {self._limits.max_page}")
        if request.offset is not None:
            self._checked_ids([request.offset])
        page, next_offset = await self._store.scroll(
            self.collection,
            scope=scope,
            where=[*self._fresh(scope.workspace), *_narrowed(request), _UNMERGED],
            limit=request.limit,
            offset=request.offset,
        )
        return [to_episode(r.id, r.payload, None) for r in page], next_offset

    async def delete(self, scope: Scope, ids: Sequence[str]) -> int:
        ids = self._checked_ids(ids)
        return await self._store.delete(self.collection, scope=scope, ids=ids)

    async def purge(self, scope: Scope) -> int:
        removed = await self._store.delete(self.collection, scope=scope)
        await self._consolidation.ledger.purge(scope)
        return removed

    async def forget(self, workspace: str, collection: str, user: str | None) -> Forgotten:
        """Every episode and consolidation pass of ``user`` in ``collection`` or (``""``)
        every collection, with no bytes left on disk (see :mod:`memory_services.forget`)."""

        async def purge(scope: Scope) -> dict[str, int]:
            episodes = await self._store.delete(self.collection, scope=scope)
            return {
                "episodes": episodes,
                "consolidations": await self._consolidation.ledger.purge(scope),
            }

        return await forget(
            self._store,
            self._registry,
            workspace=workspace,
            collection=collection,
            user=user,
            purge=purge,
            collections=[self.collection, self._consolidation.ledger.collection],
        )

    # -- consolidation -------------------------------------------------------------
    async def consolidate(
        self, scope: Scope, request: EpisodeRequest, consolidation_id: str | None
    ) -> tuple[ConsolidationReport, bool]:
        """Merge near-duplicate low-score episodes (see :mod:`.consolidate`); return the
        report and whether this call changed anything."""
        defaults = self._consolidation_defaults
        options = dataclasses.replace(
            defaults,
            similarity_threshold=request.similarity_threshold or defaults.similarity_threshold,
            importance_threshold=request.importance_threshold or defaults.importance_threshold,
            min_importance=request.min_importance or defaults.min_importance,
            dry_run=request.dry_run,
        )
        pass_id = check_id(consolidation_id, "consolidate")
        async with self._writing:
            return await self._consolidation.consolidate(scope, pass_id, options, self._clock())

    async def unconsolidate(
        self, scope: Scope, consolidation_id: str | None
    ) -> tuple[ConsolidationReport, bool]:
        pass_id = check_id(consolidation_id, "unconsolidate")
        async with self._writing:
            return await self._consolidation.unconsolidate(scope, pass_id, self._clock())

    async def consolidate_all(self, consolidation_id: str) -> list[ConsolidationReport]:
        """A scheduled pass over every owner of every known collection with the default
        thresholds."""
        options = dataclasses.replace(self._consolidation_defaults, record_empty=False)
        reports = []
        engine = self._consolidation
        for everyone in await self._registry.scopes():
            for owner in await engine.owners(everyone, options, self._clock()):
                async with self._writing:
                    report, _ = await engine.consolidate(
                        owner, consolidation_id, options, self._clock()
                    )
                reports.append(report)
        return reports

    # -- retention ---------------------------------------------------------------
    async def sweep(self) -> tuple[int, int]:
        """Delete episodes past the age limit in every known scope; return (removed, held)."""
        removed = held = 0
        for scope in await self._registry.scopes():
            oldest = self._oldest_kept(scope.workspace)
            if not math.isinf(oldest):
                cutoff = [Condition("created_at", lt=oldest)]
                removed += await self._store.delete(self.collection, scope=scope, where=cutoff)
            held += await self._store.count(self.collection, scope=scope)
        return removed, held

    async def _enforce_count(self, scope: Scope) -> int:
        bucket = scope.owner()
        async with self._evicting:
            held = await self._store.count(self.collection, scope=bucket)
            if held <= self._max_per_scope:
                return 0
            now = self._clock()
            values: list[tuple[float, float, str]] = []
            offset: str | None = None
            while True:
                page, offset = await self._store.scroll(
                    self.collection, scope=bucket, limit=512, offset=offset
                )
                for r in page:
                    created = float(r.payload.get("created_at", 0))
                    values.append((self._value(r.payload, created, now), created, r.id))
                if offset is None:
                    break
            keep = self._max_per_scope - min(self._max_per_scope // 20, 50)
            victims = [i for _, _, i in sorted(values)[: max(len(values) - keep, 0)]]
            if not victims:
                return 0
            return await self._store.delete(self.collection, scope=bucket, ids=victims)

    def _value(self, payload: Mapping[str, object], created: float, now: float) -> float:
        """What keeping an episode is worth: its score plus its recency (module doc)."""
        score = payload.get("score")
        age = max(now - created, 0.0)
        recency: float = 0.5 ** (age / self._half_life)
        worth = float(score) if isinstance(score, int | float) else 0.0
        return round(worth + recency, 9)

    # -- helpers -------------------------------------------------------------------
    def _oldest_kept(self, workspace: str | None = None) -> float:
        """Episodes created before this have expired (in ``workspace``; None: by the
        service's default, as consolidation, which has no workspace at hand, judges)."""
        max_age = self._max_age
        if self._retention is not None and workspace is not None:
            max_age = self._retention.seconds(workspace)
        return -math.inf if max_age is None else self._clock() - max_age

    def _fresh(self, workspace: str) -> list[Condition]:
        oldest = self._oldest_kept(workspace)
        return [] if math.isinf(oldest) else [Condition("created_at", gte=oldest)]

    def _checked_vector(self, vector: list[float]) -> list[float]:
        if len(vector) != self._embedder.dimension or not all(map(math.isfinite, vector)):
            raise BadRequest(
                f"retrieve: vector must hold {self._embedder.dimension} finite numbers "
                f"(got {len(vector)})"
            )
        return vector

    def _checked_ids(self, ids: Sequence[str]) -> list[str]:
        if not ids:
            raise BadRequest("give at least one episode id")
        if len(ids) > self._limits.max_ids:
            raise BadRequest(f"{len(ids)} ids exceed {self._limits.max_ids}")
        for value in ids:
            try:
                uuid.UUID(value)
            except ValueError:
                raise BadRequest(f"{value!r} is not an episode id (a UUID)") from None
        return list(dict.fromkeys(ids))


def _same(found: list[Record], payload: dict[str, object]) -> bool:
    return bool(found) and found[0].payload.get("content_hash") == payload["content_hash"]


def _narrowed(request: EpisodeRequest) -> list[Condition]:
    """The retrieve/list filters: outcome, task type, stored since / until."""
    found = []
    if request.outcome is not None:
        found.append(Condition("outcome", equals=request.outcome))
    if request.task_type:
        found.append(Condition("task_type", equals=request.task_type))
    if request.since is not None:
        found.append(Condition("created_at", gte=request.since))
    if request.until is not None:
        found.append(Condition("created_at", lt=request.until))
    return found

"""The playbook operations over a vector store and an embedder (no bus in here).

Every operation on a playbook runs under that playbook's lock (an asyncio lock per scope:
atomic within a process; run one playbook-memory replica per store for cross-replica
atomicity). The playbook is loaded from the store, or taken from the cache when the scope's
state record still holds the cached generation; a version left unfinished by a crash is
rolled forward first (see :mod:`.versions`); a scope never used before gets the seed
bullets. A delta is computed on a copy and committed; the copy replaces the cached
playbook only once the commit is durable, and a failed commit drops the cache entry, so the
next request (the redelivery, typically) reloads and recovers from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memory_services.embedding.base import Embedder
from memory_services.playbook import deltas, refine, seeds
from memory_services.playbook.metrics import PlaybookMetrics
from memory_services.playbook.playbook import Playbook, Vector, as_vector
from memory_services.playbook.records import (
    PlaybookPolicy,
    ScopeKey,
    content_hash,
    expires_at,
    normalise,
    stored,
)
from memory_services.playbook.retrieve import Query, rank
from memory_services.playbook.schema import (
    Bullet,
    BulletChange,
    Delta,
    DeltaOperation,
    DeltaRecord,
    Weights,
)
from memory_services.playbook.scoring import DecayRates, resolve_weights
from memory_services.playbook.store import BulletStore
from memory_services.playbook.versions import History, State
from memory_services.retry import retrying
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import VectorStore
from react_mem.errors import BadRequest

logger = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Applied:
    version: int
    applied: bool
    changes: list[BulletChange]


class PlaybookMemory:
    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        *,
        policy: PlaybookPolicy,
        rates: DecayRates,
        clock: Clock,
        seed_operations: Sequence[DeltaOperation] = (),
        metrics: PlaybookMetrics | None = None,
    ) -> None:
        self.embedder = embedder
        self.policy = policy
        self.rates = rates
        self.clock = clock
        self.seed_operations = list(seed_operations)
        self.metrics = metrics
        self.bullets = BulletStore(store, embedder.dimension)
        self.history = History(store)
        self.scopes = ScopeRegistry(store, "playbook-scopes-1")
        self._cache: OrderedDict[ScopeKey, Playbook] = OrderedDict()
        self._locks: dict[ScopeKey, asyncio.Lock] = {}

    async def ensure(self) -> None:
        """Create the collections if absent (the store must be open)."""
        await self.bullets.ensure()
        await self.history.ensure()
        await self.scopes.ensure()

    # -- reads -------------------------------------------------------------------------
    async def retrieve(
        self,
        key: ScopeKey,
        *,
        query: str | None,
        vector: Sequence[float] | None,
        top_k: int,
        weights: str | Weights,
        relevance: str = "embedding",
        user: str | None = None,
        topic: str | None = None,
        advance_clock: bool = True,
    ) -> tuple[list[Bullet], Playbook]:
        """The best ``top_k`` bullets; the clock then advances by one and each returned
        bullet's active access index moves to the new clock (unless ``advance_clock`` is
        false). Returns the bullets and the playbook (for its version and clock)."""
        chosen = resolve_weights(weights)
        probe = await self._probe(query, vector, relevance)
        text = query or ""
        q = Query(vector=probe, text=text, top_k=top_k, weights=chosen, user=user, topic=topic)
        async with self._open(key) as pb:
            now = self.clock()
            found = rank(pb, q, self.rates, self.policy, now)
            if not advance_clock:
                return found, pb
            tick = pb.clock + 1
            try:
                state = State(tick, pb.version, pb.generation + 1, pb.seeded)
                await self.history.put_state(key, state)
                await self.bullets.touch(key, found, tick, now)
            except BaseException:
                self._forget(key)
                raise
            pb.clock, pb.generation = tick, pb.generation + 1
            pb.touch([b.id for b in found], tick, now)
            scores = ("score", "relevance", "strength", "decay_score")
            return [
                pb.bullets[b.id].model_copy(update={f: getattr(b, f) for f in scores})
                for b in found
            ], pb

    async def _probe(
        self, query: str | None, vector: Sequence[float] | None, relevance: str
    ) -> Vector | None:
        if relevance == "jaccard":
            if not query or not query.strip():
                raise BadRequest("jaccard relevance needs the 'query' text", type="bad-query")
            return None
        if vector is not None:
            probe = as_vector(vector)
            if probe.shape != (self.embedder.dimension,) or not np.all(np.isfinite(probe)):
                raise BadRequest(
                    f"vector must hold {self.embedder.dimension} finite numbers", type="bad-vector"
                )
            norm = float(np.linalg.norm(probe))
            if norm == 0:
                raise BadRequest("vector must be non-zero", type="bad-vector")
            return probe / norm
        if query is None or not query.strip():
            raise BadRequest("retrieve needs 'query' or 'vector'", type="bad-query")
        if len(query) > self.policy.max_content_chars:
            raise BadRequest(
                f"query has {len(query)} characters; at most {self.policy.max_content_chars}",
                type="bad-query",
            )
        [embedded] = await retrying("embedder", self.embedder.embed, [query])
        return as_vector(embedded)

    async def get(self, key: ScopeKey, ids: Sequence[str]) -> list[Bullet]:
        wanted = bullet_ids(ids, self.policy.max_list_limit)
        async with self._open(key) as pb:
            now = self.clock()
            return [
                pb.bullets[i]
                for i in dict.fromkeys(wanted)
                if i in pb.bullets and expires_at(pb.bullets[i]) > now
            ]

    async def page(
        self, key: ScopeKey, *, limit: int, offset: str | None, section: str | None
    ) -> tuple[list[Bullet], str | None]:
        """Live bullets by section, then age, then id; ``offset`` is a position."""
        if limit > self.policy.max_list_limit:
            raise BadRequest(f"limit is {limit}; at most {self.policy.max_list_limit}")
        start = position(offset)
        async with self._open(key) as pb:
            live = [b for b in pb.live(self.clock()) if section is None or b.section == section]
        live.sort(key=lambda b: (b.section, b.created_at, b.id))
        end = start + limit
        return live[start:end], str(end) if end < len(live) else None

    async def stats(self, key: ScopeKey) -> Playbook:
        async with self._open(key) as pb:
            return pb

    def count(self, pb: Playbook) -> int:
        return len(pb.live(self.clock()))

    async def history_of(self, key: ScopeKey, limit: int) -> list[DeltaRecord]:
        """The latest ``limit`` delta records, newest first."""
        async with self._open(key) as pb:
            newest = pb.version
        versions = list(range(newest, max(newest - limit, 0), -1))
        return await self.history.records(key, versions)

    async def show(self, key: ScopeKey, version: int | None) -> list[Bullet]:
        """The bullets as delta ``version`` left them (version 0: none)."""
        async with self._open(key) as pb:
            return await self._snapshot(pb, version)

    async def _snapshot(self, pb: Playbook, version: int | None) -> list[Bullet]:
        if version is None:
            raise BadRequest("show and rollback need 'version'")
        if version > pb.version:
            raise BadRequest(
                f"version {version} does not exist; the playbook is at {pb.version}",
                type="not-found",
            )
        if version == 0:
            return []
        found = await self.history.snapshot(pb.key, version)
        if found is None:
            raise BadRequest(
                f"version {version} is older than the {self.policy.version_retention} kept",
                type="not-found",
            )
        return found

    # -- writes ------------------------------------------------------------------------
    async def apply(
        self, key: ScopeKey, delta: Delta | None, *, user: str | None = None
    ) -> Applied:
        """Apply ``delta`` once: a ``delta_id`` applied before changes nothing."""
        checked = deltas.check(delta, self.policy)
        vectors = await self._embed(deltas.contents(checked))
        async with self._open(key) as pb:
            return await self._apply_once(pb, checked, vectors, user)

    async def _apply_once(
        self, pb: Playbook, delta: Delta, vectors: dict[str, Vector], user: str | None
    ) -> Applied:
        before = await self.history.find(pb.key, delta.delta_id, pb.version)
        if before is not None:
            logger.info(
                "playbook %s: delta %s was applied as version %d; not again",
                pb.key.label,
                delta.delta_id,
                before,
            )
            self._count_delta("duplicate")
            return Applied(before, False, [])
        work = deltas.Work(pb.copy(), self.clock(), self.policy)
        refine.expire(work)
        deltas.apply(work, delta, vectors, user)
        refine.refine(work, self.rates)
        if delta.source == "seed":
            work.pb.seeded = True
        record = DeltaRecord(
            delta_id=delta.delta_id,
            source=delta.source,
            reason=delta.reason,
            applied_at=work.now,
            operations=delta.operations,
            changes=work.changes,
        )
        new = await self._commit(pb, work.pb, record)
        return Applied(new.version, True, record.changes)

    async def rollback(
        self, key: ScopeKey, version: int | None, *, request_id: str | None = None
    ) -> Applied:
        """A new version whose bullets equal those of ``version`` exactly (the access clock
        keeps running: restored access indexes decay from where they were)."""
        async with self._open(key) as pb:
            target = await self._snapshot(pb, version)
            delta_id = f"rollback:{request_id or f'{pb.version + 1}:{version}'}"
            before = await self.history.find(key, delta_id, pb.version)
            if before is not None:
                self._count_delta("duplicate")
                return Applied(before, False, [])
            new = pb.copy()
            new.bullets = {b.id: b for b in target}
            new.vectors = await self._vectors_for(pb, target)
            record = DeltaRecord(
                delta_id=delta_id,
                source="rollback",
                reason=f"rollback to version {version}",
                applied_at=self.clock(),
                changes=difference(pb.bullets, new.bullets),
            )
            committed = await self._commit(pb, new, record)
            return Applied(committed.version, True, record.changes)

    async def sweep(self) -> tuple[int, int]:
        """Remove expired bullets (a ``ttl`` version per playbook that had any); return how
        many were removed and how many bullets the store holds."""
        removed = held = 0
        now = self.clock()
        for scope in await self.scopes.scopes():
            for context in sorted(await self.bullets.expired_contexts(scope, now)):
                key = ScopeKey(scope.workspace, scope.collection, context)
                async with self._open(key) as pb:
                    work = deltas.Work(pb.copy(), self.clock(), self.policy)
                    refine.expire(work)
                    if work.changes:
                        record = DeltaRecord(
                            delta_id=f"ttl:{pb.version + 1}",
                            source="ttl",
                            reason="expired bullets",
                            applied_at=work.now,
                            changes=work.changes,
                        )
                        await self._commit(pb, work.pb, record)
                        removed += len(work.changes)
            held += await self.bullets.count(scope)
        return removed, held

    # -- the playbook lifecycle --------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _open(self, key: ScopeKey) -> AsyncIterator[Playbook]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            pb = await self._load(key)
            if not pb.seeded and self.seed_operations:
                delta = seeds.seed_delta(key, self.seed_operations)
                vectors = await self._embed(deltas.contents(delta))
                await self._apply_once(pb, delta, vectors, None)
                pb = self._cache[key]
            yield pb

    async def _load(self, key: ScopeKey) -> Playbook:
        state = await self.history.state(key)
        cached = self._cache.get(key)
        if cached is not None and state is not None and cached.generation == state.generation:
            self._cache.move_to_end(key)
            return cached
        state = state or State()
        bullets, vectors = await self.bullets.load(key)
        pb = Playbook(
            key,
            self.embedder.dimension,
            bullets,
            vectors,
            clock=state.clock,
            version=state.version,
            generation=state.generation,
            seeded=state.seeded,
        )
        pb = await self._recover(pb)
        self._remember(pb)
        return pb

    async def _recover(self, pb: Playbook) -> Playbook:
        """Roll forward a delta whose commit did not finish (see :mod:`.versions`)."""
        found = await self.history.records(pb.key, [pb.version + 1])
        target = await self.history.snapshot(pb.key, pb.version + 1) if found else None
        if not found or target is None:
            return pb
        pending = found[0]
        new = pb.copy()
        new.bullets = {b.id: b for b in target}
        new.vectors = await self._vectors_for(pb, target)
        new.version, new.generation = pb.version + 1, pb.generation + 1
        new.seeded = pb.seeded or pending.source == "seed"
        await self._write(pb, new)
        logger.warning(
            "playbook %s: rolled forward version %d (delta %s), left unfinished",
            pb.key.label,
            new.version,
            pending.delta_id,
        )
        return new

    async def _commit(self, old: Playbook, new: Playbook, record: DeltaRecord) -> Playbook:
        key = old.key
        new.version, new.generation = old.version + 1, old.generation + 1
        record.version = new.version
        try:
            await self.scopes.remember(key.store_scope)
            await self.history.put_snapshot(key, new.version, new.bullets.values())
            await self.history.put_record(key, record)
            await self._write(old, new)
        except BaseException:
            self._forget(key)
            raise
        self._remember(new)
        for change in record.changes:
            into = f" into {change.into}" if change.into else ""
            logger.info(
                "playbook %s v%d: %s %s%s",
                key.label,
                new.version,
                change.change,
                change.bullet_id,
                into,
            )
        if self.metrics is not None:
            self.metrics.changed(record.changes)
            self.metrics.bullets.inc(len(new.bullets) - len(old.bullets))
        self._count_delta("applied")
        try:
            await self.history.trim(
                key,
                new.version,
                snapshots=self.policy.version_retention,
                records=self.policy.history_retention,
            )
        except Exception:  # retention catches up at the next version
            logger.exception("playbook %s: trimming history failed", key.label)
        return new

    async def _write(self, old: Playbook, new: Playbook) -> None:
        """Make the store's bullets equal ``new`` (given that they equal ``old``), then
        write the state record: the commit point."""
        upserts = [
            (b, new.vectors[i])
            for i, b in new.bullets.items()
            if old.bullets.get(i) != b or old.vectors.get(i) is not new.vectors[i]
        ]
        deletes = [i for i in old.bullets if i not in new.bullets]
        await self.bullets.write(new.key, upserts, deletes)
        state = State(new.clock, new.version, new.generation, new.seeded)
        await self.history.put_state(new.key, state)

    async def _vectors_for(self, pb: Playbook, bullets: Sequence[Bullet]) -> dict[str, Vector]:
        """Vectors of ``bullets``: the playbook's where it holds the same content, else
        embedded again (the model is deterministic)."""
        by_hash = {b.content_hash: pb.vectors[i] for i, b in pb.bullets.items()}
        missing = [b.content for b in bullets if b.content_hash not in by_hash]
        for content, vector in (await self._embed(list(dict.fromkeys(missing)))).items():
            by_hash[content_hash(normalise(content))] = vector
        return {b.id: by_hash[b.content_hash] for b in bullets}

    async def _embed(self, texts: Sequence[str]) -> dict[str, Vector]:
        if not texts:
            return {}
        vectors = await retrying("embedder", self.embedder.embed, list(texts))
        return {t: as_vector(v) for t, v in zip(texts, vectors, strict=True)}

    def _remember(self, pb: Playbook) -> None:
        self._cache[pb.key] = pb
        self._cache.move_to_end(pb.key)
        while len(self._cache) > self.policy.cache_scopes:
            self._cache.popitem(last=False)

    def _forget(self, key: ScopeKey) -> None:
        self._cache.pop(key, None)

    def _count_delta(self, status: str) -> None:
        if self.metrics is not None:
            self.metrics.delta(status)


def difference(old: dict[str, Bullet], new: dict[str, Bullet]) -> list[BulletChange]:
    """What turning ``old`` into ``new`` changes, bullet by bullet (for a rollback)."""
    changes = [BulletChange(bullet_id=i, change="removed") for i in sorted(old) if i not in new]
    for i in sorted(new):
        if i not in old:
            changes.append(BulletChange(bullet_id=i, change="added"))
        elif stored(old[i]) != stored(new[i]):
            changes.append(BulletChange(bullet_id=i, change="updated"))
    return changes


def bullet_ids(ids: Sequence[str], limit: int) -> list[str]:
    if len(ids) > limit:
        raise BadRequest(f"ids: {len(ids)} ids; at most {limit} per request")
    try:
        return [str(uuid.UUID(value)) for value in ids]
    except ValueError:
        raise BadRequest("ids: every id must be a bullet id (a UUID)", type="bad-id") from None


def position(offset: str | None) -> int:
    if offset is None:
        return 0
    if not offset.isdigit():
        raise BadRequest(f"offset {offset!r} is not a position from a previous page")
    return int(offset)

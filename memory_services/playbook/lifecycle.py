"""How a playbook is opened and committed.

Every operation on a playbook runs under that playbook's lock (an asyncio lock per scope:
atomic within a process; run one playbook-memory replica per store for cross-replica
atomicity); a retrieval over several playbooks holds all their locks at once, taken in one
global order, so it ranks and advances them as one step. The playbook is loaded from the
store, or taken from the cache when the scope's state record still holds the cached
generation (so another replica's writes are seen); a
version left unfinished by a crash is rolled forward first (see :mod:`.versions`); a scope
never used before gets the seed bullets (the collection-wide one only: a user's private
playbook starts empty). A delta is computed on a copy and committed; the
copy replaces the cached playbook only once the commit is durable, and a failed commit
drops the cache entry, so the next request (the redelivery, typically) reloads and
recovers from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from memory_services.playbook import deltas, refine, seeds
from memory_services.playbook.metrics import PlaybookMetrics
from memory_services.playbook.playbook import Playbook, Vector, as_vector
from memory_services.playbook.records import PlaybookPolicy, ScopeKey, content_hash, normalise
from memory_services.playbook.scoring import DecayRates
from memory_services.playbook.store import BulletStore
from memory_services.playbook.versions import History, State
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import VectorStore
from react_mem.embedding.base import Embedder
from react_mem.schema.playbook import Bullet, BulletChange, Delta, DeltaOperation, DeltaRecord

logger = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Applied:
    version: int
    applied: bool
    changes: list[BulletChange]


class Playbooks:
    """Playbooks loaded, cached, recovered, seeded and committed (one lock per scope)."""

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
        self.store = store
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
        #: A playbook's lock lives while a holder or a waiter has it: a dict would keep one
        #: per playbook ever opened (a purged user's too) for the life of the process.
        self._locks: weakref.WeakValueDictionary[ScopeKey, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def ensure(self) -> None:
        """Create the collections if absent (the store must be open)."""
        await self.bullets.ensure()
        await self.history.ensure()
        await self.scopes.ensure()

    async def apply_once(
        self, pb: Playbook, delta: Delta, vectors: dict[str, Vector], user: str | None
    ) -> Applied:
        """Apply a checked ``delta`` unless its id was applied before, then grow-and-refine,
        then commit (``vectors``: the embeddings of its contents)."""
        before = await self.history.find(pb.key, delta.delta_id, pb.version)
        if before is not None:
            logger.info(
                "playbook %s: delta %s was applied as version %d; not again",
                pb.key.label,
                delta.delta_id,
                before,
            )
            self.count_delta("duplicate")
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
            user=user,
            operations=delta.operations,
            changes=work.changes,
        )
        new = await self.commit(pb, work.pb, record)
        return Applied(new.version, True, record.changes)

    @contextlib.asynccontextmanager
    async def open(self, key: ScopeKey) -> AsyncIterator[Playbook]:
        """The playbook of ``key`` for one operation: locked, loaded, recovered, seeded."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            yield await self._ready(key)

    @contextlib.asynccontextmanager
    async def open_all(self, keys: Sequence[ScopeKey]) -> AsyncIterator[list[Playbook]]:
        """The playbooks of ``keys``, in that order, for one operation over all
        of them, as :meth:`open` gives one: their locks are taken in one order whatever the
        order of ``keys`` (two requests over overlapping playbooks never wait for each
        other in a cycle) and held until every playbook is done with."""
        async with contextlib.AsyncExitStack() as held:
            for key in sorted(set(keys), key=_lock_order):
                await held.enter_async_context(self._locks.setdefault(key, asyncio.Lock()))
            yield [await self._ready(key) for key in keys]

    async def _ready(self, key: ScopeKey) -> Playbook:
        """Loaded, recovered and seeded (the caller holds ``key``'s lock)."""
        pb = await self._load(key)
        if key.owner is None and not pb.seeded and self.seed_operations:
            delta = seeds.seed_delta(key, self.seed_operations)
            vectors = await self.embed(deltas.contents(delta))
            await self.apply_once(pb, delta, vectors, None)
            pb = self._cache.get(key, pb)
            pb.seeded = True  # persisted by the seed's commit (or by the next one)
        return pb

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
        new.vectors = await self.vectors_for(pb, target)
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

    async def commit(self, old: Playbook, new: Playbook, record: DeltaRecord) -> Playbook:
        key = old.key
        new.version, new.generation = old.version + 1, old.generation + 1
        record.version = new.version
        try:
            await self.scopes.remember(key.store_scope)
            await self.history.put_snapshot(key, new.version, new.bullets.values())
            await self.history.put_record(key, record)
            await self._write(old, new)
        except BaseException:
            self.forget(key)
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
        self.count_delta("applied")
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

    async def vectors_for(self, pb: Playbook, bullets: Sequence[Bullet]) -> dict[str, Vector]:
        """Vectors of ``bullets``: the playbook's where it holds the same content, else
        embedded again (the model is deterministic)."""
        by_hash = {b.content_hash: pb.vectors[i] for i, b in pb.bullets.items()}
        missing = [b.content for b in bullets if b.content_hash not in by_hash]
        for content, vector in (await self.embed(list(dict.fromkeys(missing)))).items():
            by_hash[content_hash(normalise(content))] = vector
        return {b.id: by_hash[b.content_hash] for b in bullets}

    async def embed(self, texts: Sequence[str]) -> dict[str, Vector]:
        if not texts:
            return {}
        vectors = await self.embedder.embed(list(texts))
        return {t: as_vector(v) for t, v in zip(texts, vectors, strict=True)}

    def _remember(self, pb: Playbook) -> None:
        self._cache[pb.key] = pb
        self._cache.move_to_end(pb.key)
        while len(self._cache) > self.policy.cache_scopes:
            self._cache.popitem(last=False)

    def forget(self, key: ScopeKey) -> None:
        self._cache.pop(key, None)

    def count_delta(self, status: str) -> None:
        if self.metrics is not None:
            self.metrics.delta(status)


def _lock_order(key: ScopeKey) -> tuple[str, str, str, str]:
    return (key.workspace, key.collection, key.context, key.owner or "")

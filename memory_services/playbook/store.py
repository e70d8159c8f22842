"""Bullet records in the vector store (collection ``playbook-<dim>``), one per bullet, with
the bullet's embedding; every call is scoped to one playbook (see :mod:`.records`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memory_services.playbook.playbook import Vector, as_vector
from memory_services.playbook.records import BULLET_INDEXES, ScopeKey, from_payload, to_payload
from memory_services.store.base import CollectionSpec, Condition, Record, StoreScope, VectorStore
from react_mem.schema.playbook import Bullet, MemoryType

PAGE = 1000


class BulletStore:
    def __init__(self, store: VectorStore, dim: int) -> None:
        self._store = store
        self.dim = dim
        self.collection = f"playbook-{dim}"

    async def ensure(self) -> None:
        spec = CollectionSpec(self.collection, self.dim, BULLET_INDEXES)
        await self._store.ensure(spec)

    async def load(self, key: ScopeKey) -> tuple[dict[str, Bullet], dict[str, Vector]]:
        """Every bullet of the playbook (expired ones included) and its vector."""
        bullets: dict[str, Bullet] = {}
        vectors: dict[str, Vector] = {}
        offset: str | None = None
        while True:
            page, offset = await self._store.scroll(
                self.collection, scope=key.store_scope, where=key.where(), limit=PAGE, offset=offset
            )
            for record in page:
                bullets[record.id] = from_payload(record.id, record.payload)
                vectors[record.id] = as_vector(record.vector or ())
            if offset is None:
                return bullets, vectors

    async def write(
        self, key: ScopeKey, upserts: Sequence[tuple[Bullet, Vector]], deletes: Sequence[str]
    ) -> None:
        if upserts:
            records = [Record(b.id, to_payload(key, b), vector.tolist()) for b, vector in upserts]
            for start in range(0, len(records), PAGE):
                chunk = records[start : start + PAGE]
                await self._store.upsert(self.collection, chunk)
        if deletes:
            await self._store.delete(
                self.collection, scope=key.store_scope, ids=list(deletes), where=key.where()
            )

    async def drop(self, key: ScopeKey) -> int:
        """Delete every bullet of the playbook ``key``; how many."""
        return await self._store.delete(self.collection, scope=key.store_scope, where=key.where())

    async def contexts(self, scope: StoreScope) -> set[str]:
        """The context scopes in which ``scope``'s owner has bullets."""
        found: set[str] = set()
        offset: str | None = None
        while True:
            page, offset = await self._store.scroll(
                self.collection, scope=scope, limit=PAGE, offset=offset
            )
            found.update(str(r.payload.get("context_scope_id", "")) for r in page)
            if offset is None:
                return found

    async def touch(self, key: ScopeKey, bullets: Iterable[Bullet], clock: int, now: float) -> None:
        """Set the active access index of retrieved bullets to ``clock``, ``last_used`` to
        ``now`` (one write per memory type)."""
        by_type: dict[MemoryType, list[str]] = {}
        for bullet in bullets:
            by_type.setdefault(bullet.memory_type, []).append(bullet.id)
        for kind, ids in sorted(by_type.items()):
            payload = {f"{kind}_access_index": clock, "last_used": now}
            await self._store.set_payload(self.collection, ids, payload, scope=key.store_scope)

    async def expired_contexts(self, scope: StoreScope, now: float) -> set[tuple[str, str]]:
        """The (owner, context) pairs of ``scope`` (workspace + collection) holding expired
        bullets (owner ``""``: the collection-wide playbook)."""
        found: set[tuple[str, str]] = set()
        offset: str | None = None
        where = [Condition(key="expires_at", lte=now)]
        while True:
            page, offset = await self._store.scroll(
                self.collection, scope=scope, where=where, limit=PAGE, offset=offset
            )
            found.update(
                (str(r.payload.get("scope_user") or ""), str(r.payload.get("context_scope_id", "")))
                for r in page
            )
            if offset is None:
                return found

    async def count(self, scope: StoreScope) -> int:
        return await self._store.count(self.collection, scope=scope)

"""The fact store as its readers see it: each fact record with its side-store statistics.

:class:`AccessOverlay` wraps the service's :class:`VectorStore` and is what every fact
operation (retrieve, get, list, history, store's restatements, update, quota eviction,
consolidation and its undo) reads and writes through; collections other than the facts one
pass straight through. On the facts collection:

- reads (search, get, scroll) return payloads with ``access_count`` = the record's + its
  row's count and ``last_accessed`` = the later of the two (a row counts only for the owner
  it was written for);
- a write that sets either field (a restatement, a supersede, a merge or its undo) computed
  it from such a read, so the record takes the row in and the row goes (a field the write
  leaves out is filled from the overlaid record first). A retrieval of the same fact between
  that read and the write may count once, as two retrievals at one instant always could;
- an upsert starts its records afresh (no row), a delete takes the rows of what it deleted,
  and ``compact`` (what ``forget`` ends with) empties the side store's log too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memory_services.facts.access_stats import FIELDS, AccessLog
from memory_services.facts.access_table import OwnerKey, Row
from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    CollectionSpec,
    Condition,
    Hit,
    Record,
    Retrieval,
    Scope,
    StoreScope,
    VectorStore,
    scope_matches,
)

#: Records asked for at once when checking which rows lost their record.
_CHECK = 256


def owner_key(scope: Scope) -> OwnerKey:
    return (scope.workspace, scope.collection, scope.user or "")


def owner_of(payload: Mapping[str, Any]) -> OwnerKey:
    workspace, collection = payload.get("scope_workspace"), payload.get("scope_collection")
    user = payload.get("scope_user")
    if (  # the usual record, whose keys Scope would keep as they are: no Scope made
        type(workspace) is str
        and workspace
        and type(collection) is str
        and collection
        and (user is None or (type(user) is str and user.isascii() and user.isprintable()))
    ):
        return workspace, collection, user or ""
    return owner_key(Scope.of_payload(payload))


def overlaid(payload: Mapping[str, Any], row: Row | None) -> Mapping[str, Any]:
    """``payload`` with ``row``'s retrievals, if the row is this record's owner's."""
    if row is None or row[1] != owner_of(payload):
        return payload
    held = payload.get("last_accessed")
    last = row[3] if held is None else max(float(held), row[3])
    return {**payload, "access_count": int(payload["access_count"]) + row[2], "last_accessed": last}


class AccessOverlay:
    """A :class:`VectorStore` over ``store`` overlaying ``log`` on ``collection``."""

    def __init__(
        self,
        store: VectorStore,
        collection: str,
        log: AccessLog,
        *,
        on_write: Callable[[OwnerKey | None], None] = lambda owner: None,
    ) -> None:
        """``on_write``: told the owner of every write to ``collection`` (None: any owner)
        once it is made, or failed (:mod:`.ranked` drops what it holds of that owner)."""
        self.store = store
        self.collection = collection
        self.log = log
        self.on_write = on_write

    def _writing(self, collection: str, scope: StoreScope) -> None:
        if collection == self.collection:
            self.on_write(owner_key(scope) if isinstance(scope, Scope) else None)

    # -- passed through --------------------------------------------------------------
    async def open(self) -> None:
        await self.store.open()

    async def close(self) -> None:
        await self.store.close()

    async def ensure(self, spec: CollectionSpec) -> None:
        await self.store.ensure(spec)

    async def count(
        self, collection: str, *, scope: StoreScope, where: Sequence[Condition] = ()
    ) -> int:
        return await self.store.count(collection, scope=scope, where=where)

    # -- reads -------------------------------------------------------------------------
    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        *,
        scope: StoreScope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
        text: str | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        boost: Sequence[Condition] = (),
        leave_out: Sequence[str] = (),
    ) -> list[Hit]:
        hits = await self.store.search(
            collection,
            vector,
            scope=scope,
            limit=limit,
            min_score=min_score,
            where=where,
            text=text,
            retrieval=retrieval,
            boost=boost,
            leave_out=leave_out,
        )
        return self._hits(collection, hits)

    async def search_many(
        self,
        collection: str,
        vectors: Sequence[Sequence[float]],
        *,
        scope: StoreScope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
        texts: Sequence[str] | None = None,
        retrieval: Retrieval = DEFAULT_RETRIEVAL,
        boost: Sequence[Condition] = (),
        leave_out: Sequence[str] = (),
    ) -> list[list[Hit]]:
        found = await self.store.search_many(
            collection,
            vectors,
            scope=scope,
            limit=limit,
            min_score=min_score,
            where=where,
            texts=texts,
            retrieval=retrieval,
            boost=boost,
            leave_out=leave_out,
        )
        return [self._hits(collection, hits) for hits in found]

    async def get(self, collection: str, ids: Sequence[str], *, scope: StoreScope) -> list[Record]:
        return self._records(collection, await self.store.get(collection, ids, scope=scope))

    async def scroll(
        self,
        collection: str,
        *,
        scope: StoreScope,
        where: Sequence[Condition] = (),
        limit: int = 100,
        offset: str | None = None,
    ) -> tuple[list[Record], str | None]:
        page, following = await self.store.scroll(
            collection, scope=scope, where=where, limit=limit, offset=offset
        )
        return self._records(collection, page), following

    def _hits(self, collection: str, hits: list[Hit]) -> list[Hit]:
        if collection != self.collection or not hits:
            return hits
        rows = self.log.stats([h.id for h in hits])
        return [Hit(h.id, h.score, overlaid(h.payload, rows.get(h.id))) for h in hits]

    def _records(self, collection: str, records: list[Record]) -> list[Record]:
        if collection != self.collection or not records:
            return records
        rows = self.log.stats([r.id for r in records])
        return [Record(r.id, overlaid(r.payload, rows.get(r.id)), r.vector) for r in records]

    # -- writes ------------------------------------------------------------------------
    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        try:
            await self.store.upsert(collection, records)
        finally:
            if collection == self.collection:
                for owner in {owner_of(record.payload) for record in records}:
                    self.on_write(owner)
        if collection == self.collection:
            by_owner: dict[OwnerKey, list[str]] = {}
            for record in records:
                by_owner.setdefault(owner_of(record.payload), []).append(record.id)
            for owner, ids in by_owner.items():
                self.log.drop(owner, ids)

    async def set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: StoreScope
    ) -> None:
        try:
            await self._set_payload(collection, ids, payload, scope=scope)
        finally:
            self._writing(collection, scope)

    async def _set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: StoreScope
    ) -> None:
        if collection != self.collection or not FIELDS & payload.keys():
            await self.store.set_payload(collection, ids, payload, scope=scope)
            return
        rows = self.log.stats(ids)
        if payload.keys() >= FIELDS or not rows:
            await self.store.set_payload(collection, ids, payload, scope=scope)
            held = await self.store.get(collection, list(rows), scope=scope) if rows else []
        else:  # what the write leaves out comes from the overlaid records
            held = await self.store.get(collection, list(rows), scope=scope)
            for record in held:
                whole = overlaid(record.payload, rows[record.id])
                changes = {key: whole.get(key) for key in FIELDS} | dict(payload)
                await self.store.set_payload(collection, [record.id], changes, scope=scope)
            rest = [id for id in ids if id not in rows]
            if rest:
                await self.store.set_payload(collection, rest, payload, scope=scope)
        for record in held:  # the records took their rows in
            self.log.drop(owner_of(record.payload), [record.id])

    async def delete(
        self,
        collection: str,
        *,
        scope: StoreScope,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        try:
            removed = await self.store.delete(collection, scope=scope, ids=ids, where=where)
        finally:
            self._writing(collection, scope)
        if collection != self.collection or not removed:
            return removed
        whole_owner = isinstance(scope, Scope) and scope.conversation is None
        if whole_owner and ids is None and not where:
            assert isinstance(scope, Scope)
            self.log.drop_owner(owner_key(scope))  # a purge: every row of the owner goes
        else:
            await self.prune(scope, ids)
        return removed

    async def prune(self, scope: StoreScope, ids: Sequence[str] | None = None) -> int:
        """Drop the rows (of ``ids``, or all) in ``scope`` whose records are gone."""
        await self.log.flush()  # pending rows are then in the table, where this looks
        keys, no_user = scope_matches(scope)
        workspace, collection = keys["scope_workspace"], keys["scope_collection"]
        user = keys.get("scope_user", "" if no_user else None)
        candidates = self.log.table.ids_of(workspace, collection, user)
        if ids is not None:
            wanted = set(ids)
            candidates = [id for id in candidates if id in wanted]
        dropped = 0
        for start in range(0, len(candidates), _CHECK):
            chunk = candidates[start : start + _CHECK]
            rows = self.log.table.read(chunk)
            owners = {row[1] for row in rows.values()}
            for owner in owners:
                mine = [id for id, row in rows.items() if row[1] == owner]
                held = await self.store.get(
                    self.collection, mine, scope=Scope(owner[0], owner[1], owner[2] or None)
                )
                kept = {record.id for record in held}
                gone = [id for id in mine if id not in kept]
                self.log.drop(owner, gone)
                dropped += len(gone)
        return dropped

    async def compact(self, collection: str) -> bool:
        compacted = await self.store.compact(collection)
        if collection == self.collection:
            await self.log.table.wipe()
        return compacted

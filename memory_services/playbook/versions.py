"""A playbook's history, in the vector store beside its bullets (so the Qdrant server
backend keeps it too): per scope one *state* record (access clock, version, generation),
one *version* record per applied delta (its :class:`DeltaRecord`, whose ``delta_id`` makes
redelivery harmless) and one *snapshot* record per version (every bullet as the delta left
it, retrieval fields aside; zlib-compressed JSON). Ids derive from the scope and version.

Snapshots of the last ``version_retention`` versions are kept (50 by default: what
``show`` and ``rollback`` can reach); version records, and with them the memory of which
delta ids were applied, for ``history_retention`` versions (10,000).

Commit order of a delta (:meth:`.memory.PlaybookMemory`): snapshot, version record,
bullets, then the state record, the commit point. A crash before the state record leaves a
version record one past the state's version; the next load rolls it forward from its
snapshot, so a half-applied delta is never served and a redelivered one finds its id.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memory_services.playbook.records import ScopeKey, stored
from memory_services.store.base import (
    CollectionSpec,
    Condition,
    FieldType,
    Record,
    Scope,
    VectorStore,
)
from react_mem.schema.playbook import Bullet, DeltaRecord

COLLECTION = "playbook-history-1"
INDEXES = {
    "context_key": FieldType.KEYWORD,
    "kind": FieldType.KEYWORD,
    "delta_id": FieldType.KEYWORD,
    "version": FieldType.INTEGER,
}
_VECTOR = [1.0]  # history records are read by id or filter, never searched


@dataclass(frozen=True, slots=True)
class State:
    clock: int = 0
    version: int = 0
    generation: int = 0
    seeded: bool = False


def encode(bullets: Iterable[Bullet]) -> str:
    rows = [stored(b).model_dump(mode="json") for b in sorted(bullets, key=lambda b: b.id)]
    packed = zlib.compress(json.dumps(rows, separators=(",", ":")).encode(), 6)
    return base64.b64encode(packed).decode("ascii")


def decode(text: str) -> list[Bullet]:
    rows = json.loads(zlib.decompress(base64.b64decode(text)))
    return [Bullet.model_validate(row) for row in rows]


class History:
    def __init__(self, store: VectorStore) -> None:
        self._store = store

    async def ensure(self) -> None:
        spec = CollectionSpec(COLLECTION, vector_size=len(_VECTOR), indexes=INDEXES)
        await self._store.ensure(spec)

    # -- records ---------------------------------------------------------------------
    def _record(self, key: ScopeKey, id: str, kind: str, fields: dict[str, Any]) -> Record:
        base = key.store_scope.payload() | {"context_key": key.context_key, "kind": kind}
        return Record(id=id, payload=base | fields, vector=_VECTOR)

    async def _put(self, record: Record) -> None:
        await self._store.upsert(COLLECTION, [record])

    async def _get(self, key: ScopeKey, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        found = await self._store.get(COLLECTION, ids, scope=key.store_scope)
        return {
            r.id: dict(r.payload) for r in found if r.payload.get("context_key") == key.context_key
        }

    # -- state -----------------------------------------------------------------------
    async def state(self, key: ScopeKey) -> State | None:
        id = key.record_id("state")
        payload = (await self._get(key, [id])).get(id)
        if payload is None:
            return None
        return State(
            clock=int(payload["clock"]),
            version=int(payload["version"]),
            generation=int(payload["generation"]),
            seeded=bool(payload["seeded"]),
        )

    async def put_state(self, key: ScopeKey, state: State) -> None:
        await self.put_states([(key, state)])

    async def put_states(self, states: Sequence[tuple[ScopeKey, State]]) -> None:
        """Several playbooks' state records in one write (a retrieval's clocks)."""
        records = [
            self._record(
                key,
                key.record_id("state"),
                "state",
                {
                    "clock": state.clock,
                    "version": state.version,
                    "generation": state.generation,
                    "seeded": state.seeded,
                },
            )
            for key, state in states
        ]
        if records:
            await self._store.upsert(COLLECTION, records)

    # -- versions --------------------------------------------------------------------
    async def put_record(self, key: ScopeKey, record: DeltaRecord) -> None:
        fields = {
            "version": record.version,
            "delta_id": record.delta_id,
            "record": record.model_dump(mode="json"),
        }
        id = key.record_id("version", str(record.version))
        await self._put(self._record(key, id, "version", fields))

    async def records(self, key: ScopeKey, versions: Sequence[int]) -> list[DeltaRecord]:
        """The version records of ``versions`` that are still kept, in that order."""
        ids = {v: key.record_id("version", str(v)) for v in versions}
        found = await self._get(key, list(ids.values())) if ids else {}
        return [
            DeltaRecord.model_validate(found[ids[v]]["record"]) for v in versions if ids[v] in found
        ]

    async def find(self, key: ScopeKey, delta_id: str, upto: int) -> int | None:
        """The version at which ``delta_id`` was applied (at most ``upto``), if it was."""
        where = [
            *key.where(),
            Condition(key="kind", equals="version"),
            Condition(key="delta_id", equals=delta_id),
            Condition(key="version", lte=upto),
        ]
        page, _ = await self._store.scroll(COLLECTION, scope=key.store_scope, where=where, limit=1)
        return int(page[0].payload["version"]) if page else None

    # -- snapshots -------------------------------------------------------------------
    async def put_snapshot(self, key: ScopeKey, version: int, bullets: Iterable[Bullet]) -> None:
        id = key.record_id("snapshot", str(version))
        fields = {"version": version, "bullets": encode(bullets)}
        await self._put(self._record(key, id, "snapshot", fields))

    async def snapshot(self, key: ScopeKey, version: int) -> list[Bullet] | None:
        id = key.record_id("snapshot", str(version))
        payload = (await self._get(key, [id])).get(id)
        return None if payload is None else decode(str(payload["bullets"]))

    async def scan(self, key: ScopeKey, kind: str) -> list[Record]:
        """Every record of ``kind`` of the playbook ``key``."""
        where = [*key.where(), Condition(key="kind", equals=kind)]
        found: list[Record] = []
        offset: str | None = None
        while True:
            page, offset = await self._store.scroll(
                COLLECTION, scope=key.store_scope, where=where, limit=1000, offset=offset
            )
            found += page
            if offset is None:
                return found

    async def rewrite(self, records: Sequence[Record]) -> None:
        """Put back records changed in place (a scrubbed snapshot or delta record)."""
        if records:
            await self._store.upsert(COLLECTION, list(records))

    async def contexts(self, scope: Scope) -> set[str]:
        """The context scopes in which ``scope``'s owner has history (or relations)."""
        found: set[str] = set()
        offset: str | None = None
        while True:
            page, offset = await self._store.scroll(
                COLLECTION, scope=scope, limit=1000, offset=offset
            )
            found.update(str(r.payload.get("context_key", "c:"))[2:] for r in page)
            if offset is None:
                return found

    async def drop(self, key: ScopeKey) -> dict[str, int]:
        """Delete every history record of the playbook ``key``: how many of each kind."""
        counts: dict[str, int] = {}
        for kind in ("version", "snapshot", "state"):
            where = [*key.where(), Condition(key="kind", equals=kind)]
            counts[kind] = await self._store.delete(COLLECTION, scope=key.store_scope, where=where)
        return counts

    async def trim(self, key: ScopeKey, version: int, *, snapshots: int, records: int) -> None:
        """Forget the snapshot ``snapshots`` versions back and the record ``records`` back
        (one each per version, so nothing older than the retention stays)."""
        ids = []
        if version - snapshots >= 1:
            ids.append(key.record_id("snapshot", str(version - snapshots)))
        if version - records >= 1:
            ids.append(key.record_id("version", str(version - records)))
        if ids:
            await self._store.delete(COLLECTION, scope=key.store_scope, ids=ids)

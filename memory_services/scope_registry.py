"""The (workspace, collection) pairs a memory service has written to, kept in its store.

A store cannot be asked anything without a scope (workspace + collection), so a background
sweep (age retention, idle conversations) could not find the data written before a
restart. Each service therefore remembers every pair it writes to in a small collection of
its own, under one fixed internal scope that no flow can name (reserved workspaces start
with ``_`` and never run flows), and the sweeps walk that list. The pairs already written
are kept in memory, at most ``remembered`` of them, least recently used out first: a caller
inventing collections cannot grow the process, and a forgotten pair costs one idempotent
upsert.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from memory_services.store.base import (
    AllOwners,
    CollectionSpec,
    FieldType,
    Record,
    Scope,
    VectorStore,
)

#: The scope every registry entry lives in (never returned to a request).
REGISTRY_SCOPE = Scope(workspace="__memory__", collection="scopes")
_NAMESPACE = uuid.UUID("6f1c3a52-4f0e-5b7e-9d8a-2c1e7b3f9a10")
_VECTOR = [1.0]  # entries are listed, never searched
#: Pairs known to be written, kept in memory.
REMEMBERED = 10_000


class ScopeRegistry:
    """Remembers pairs idempotently (one record per pair) and lists them."""

    def __init__(
        self, store: VectorStore, collection: str, *, remembered: int = REMEMBERED
    ) -> None:
        self._store = store
        self.collection = collection
        self.remembered = remembered
        self._known: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def ensure(self) -> None:
        spec = CollectionSpec(
            self.collection,
            vector_size=len(_VECTOR),
            indexes={"workspace": FieldType.KEYWORD, "collection": FieldType.KEYWORD},
        )
        await self._store.ensure(spec)
        for scope in await self.scopes():
            self._know((scope.workspace, scope.collection))

    async def remember(self, scope: Scope) -> None:
        """Record the scope's workspace and collection (a no-op once known)."""
        pair = (scope.workspace, scope.collection)
        if pair in self._known:
            self._known.move_to_end(pair)
            return
        key = "\x1f".join(pair)
        record = Record(
            id=str(uuid.uuid5(_NAMESPACE, key)),
            payload=REGISTRY_SCOPE.payload()
            | {"workspace": scope.workspace, "collection": scope.collection},
            vector=_VECTOR,
        )
        await self._store.upsert(self.collection, [record])
        self._know(pair)

    def _know(self, pair: tuple[str, str]) -> None:
        self._known[pair] = None
        self._known.move_to_end(pair)
        while len(self._known) > self.remembered:
            self._known.popitem(last=False)

    async def scopes(self) -> list[AllOwners]:
        """Every remembered pair, for a maintenance pass over all of its owners."""
        found: list[AllOwners] = []
        offset: str | None = None
        while True:
            page, offset = await self._store.scroll(
                self.collection, scope=REGISTRY_SCOPE, limit=256, offset=offset
            )
            found.extend(_scopes(r.payload for r in page))
            if offset is None:
                return found


def _scopes(payloads: Iterable[Mapping[str, Any]]) -> list[AllOwners]:
    return [
        AllOwners(str(p["workspace"]), str(p["collection"]))
        for p in payloads
        if p.get("workspace") and p.get("collection")
    ]

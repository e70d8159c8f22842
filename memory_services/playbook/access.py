"""Who may read or change a playbook (seed 002's relationship-based access).

Every playbook (see :mod:`.records`) has an owner: a user, or none for the collection-wide
playbook, whose owner is the collection itself (requests without a user act for it). The
owner grants other users ``viewer`` (read) or ``editor`` (read and write) on it. The
relations are tuples on the object (an *acl* record in the owner's scope) and, so a user's
request finds what was shared with them without reading any other owner's records, an
index entry (*grant*) in the grantee's scope. Everyone in the collection views the
collection-wide playbook.

A request reads the collection-wide playbook, its own, and those shared with it; another
user's private playbook is, to everyone else, as if it did not exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from memory_services.playbook.records import ScopeKey
from memory_services.playbook.versions import COLLECTION
from memory_services.store.base import Condition, Record, VectorStore
from react_mem.schema.playbook import Grant

Relation = Literal["owner", "editor", "viewer"]
Granted = Literal["editor", "viewer"]
_VECTOR = [1.0]


@dataclass(frozen=True, slots=True)
class Acl:
    viewers: tuple[str, ...] = ()
    editors: tuple[str, ...] = ()


class PlaybookAccess:
    def __init__(self, store: VectorStore) -> None:
        self._store = store

    async def acl(self, key: ScopeKey) -> Acl:
        id = key.record_id("acl")
        found = await self._store.get(COLLECTION, [id], scope=key.store_scope)
        for record in found:
            if record.payload.get("context_key") == key.context_key:
                p = record.payload
                return Acl(tuple(p.get("viewers") or ()), tuple(p.get("editors") or ()))
        return Acl()

    async def relation(self, key: ScopeKey, user: str | None) -> Relation | None:
        """``user``'s relation to the playbook ``key`` (None: none, it cannot see it)."""
        user = user or None
        if key.owner == user:
            return "owner"
        if user is None:  # the collection does not see its users' private playbooks
            return None
        acl = await self.acl(key)
        if user in acl.editors:
            return "editor"
        if user in acl.viewers or key.owner is None:
            return "viewer"
        return None

    async def shared_with(self, key: ScopeKey, user: str | None) -> list[ScopeKey]:
        """The other users' playbooks of this context shared with ``user`` (whose grant
        index entries live in ``user``'s own scope)."""
        if not user:
            return []
        mine = key.of(user)
        where = [*mine.where(), Condition(key="kind", equals="grant")]
        page, _ = await self._store.scroll(
            COLLECTION, scope=mine.store_scope, where=where, limit=1000
        )
        owners = sorted(
            {str(r.payload["playbook_owner"]) for r in page if r.payload.get("playbook_owner")}
        )
        return [key.of(owner) for owner in owners]

    async def readable(self, key: ScopeKey, user: str | None) -> list[ScopeKey]:
        """Every playbook ``user`` reads in ``key``'s context: their own, the
        collection-wide one, then those shared with them (for a request without a user,
        its own is the collection-wide one)."""
        if not user:
            return [key.of(None)]
        return [key.of(user), key.of(None), *await self.shared_with(key, user)]

    async def grants(self, key: ScopeKey) -> list[Grant]:
        """The grants in force on ``key`` (its acl), by user: for its owner's eyes only."""
        acl = await self.acl(key)
        held = [Grant(user=u, relation="viewer") for u in acl.viewers]
        held += [Grant(user=u, relation="editor") for u in acl.editors]
        return sorted(held, key=lambda g: g.user)

    async def grant(self, key: ScopeKey, relation: Granted | None, grantees: Sequence[str]) -> Acl:
        """Give (``relation``) or take away (None) ``grantees``' relation to ``key``."""
        acl = await self.acl(key)
        viewers, editors = set(acl.viewers), set(acl.editors)
        for user in grantees:
            viewers.discard(user)
            editors.discard(user)
            if relation == "viewer":
                viewers.add(user)
            elif relation == "editor":
                editors.add(user)
        new = Acl(tuple(sorted(viewers)), tuple(sorted(editors)))
        await self._put_acl(key, new)
        for user in grantees:
            entry = self._entry_id(key, user)
            if relation is None:
                await self._delete(key.of(user), [entry])
            else:
                fields = {"kind": "grant", "playbook_owner": key.owner or "", "relation": relation}
                await self._put(key.of(user), entry, fields)
        return new

    async def drop_all(self, key: ScopeKey) -> int:
        """Remove the playbook's relations (its acl and its grantees' index entries)."""
        acl = await self.acl(key)
        grantees = sorted({*acl.viewers, *acl.editors})
        for user in grantees:
            await self._delete(key.of(user), [self._entry_id(key, user)])
        await self._delete(key, [key.record_id("acl")])
        return len(grantees)

    async def forget_grantee(self, key: ScopeKey, user: str) -> int:
        """Take ``user`` out of every acl of this context that names them (found through
        their own index entries) and delete those entries."""
        granted = await self.shared_with(key, user)
        for owner_key in granted:
            await self.grant(owner_key, None, [user])
        return len(granted)

    def _entry_id(self, key: ScopeKey, grantee: str) -> str:
        return key.of(grantee).record_id("grant", key.owner or "")

    async def _put_acl(self, key: ScopeKey, acl: Acl) -> None:
        fields = {"kind": "acl", "viewers": list(acl.viewers), "editors": list(acl.editors)}
        await self._put(key, key.record_id("acl"), fields)

    async def _put(self, key: ScopeKey, id: str, fields: Mapping[str, object]) -> None:
        payload: dict[str, object] = {**key.store_scope.payload(), "context_key": key.context_key}
        payload |= fields
        record = Record(id=id, payload=payload, vector=_VECTOR)
        await self._store.upsert(COLLECTION, [record])

    async def _delete(self, key: ScopeKey, ids: list[str]) -> None:
        await self._store.delete(COLLECTION, scope=key.store_scope, ids=ids)

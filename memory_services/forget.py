"""A service's ``forget`` operation: every record one user owns, in one collection or in all
of the workspace's, then the store's files rewritten so no deleted byte stays on disk.

``purge`` deletes an owner's records; a deleted record's payload stays in the edge shard's
segment and write-ahead log until the shard is rewritten, so ``forget`` compacts every
collection it touched (see :meth:`~memory_services.store.edge.EdgeStore.compact`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence

from memory_services import dedup_guard, heap
from memory_services.scope_registry import ScopeRegistry
from memory_services.store.base import Scope, VectorStore
from react_mem.errors import BadRequest
from react_mem.schema.forget import Forgotten

#: Removes one owner's records; returns the count per kind.
Purge = Callable[[Scope], Awaitable[Mapping[str, int]]]


def check_user(user: str | None) -> str:
    if not user:
        raise BadRequest("forget needs 'user' (the collection's shared memory is purged)")
    return user


async def owners(
    registry: ScopeRegistry, workspace: str, collection: str, user: str
) -> list[Scope]:
    """The user's scopes: in ``collection``, or (``""``) in every collection of the workspace
    the service ever wrote to."""
    if collection:
        return [Scope(workspace, collection, user)]
    pairs = {(s.workspace, s.collection) for s in await registry.scopes()}
    return [Scope(w, c, user) for w, c in sorted(pairs) if w == workspace]


async def forget(
    store: VectorStore,
    registry: ScopeRegistry,
    *,
    workspace: str,
    collection: str,
    user: str | None,
    purge: Purge,
    collections: Sequence[str],
) -> Forgotten:
    """Purge ``user``'s records in each of their scopes, then compact ``collections`` (the
    store collections that held them). Compacting every time, not only when something was
    deleted, makes a repeated forget finish one that stopped between the two."""
    who = check_user(user)
    scopes = await owners(registry, workspace, collection, who)
    removed: Counter[str] = Counter()
    for scope in scopes:
        removed.update(await purge(scope))
    compacted = [c for c in collections if await store.compact(c)]
    dedup_guard.forget_readings()  # the merge guard's kept readings hold users' words
    await heap.release()  # the rebuilds freed the old shards' memory: give it back
    return Forgotten(
        collections=[s.collection for s in scopes], records=dict(removed), compacted=compacted
    )

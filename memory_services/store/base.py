"""The vector-store seam: scoped records with payloads, searched by cosine similarity.

Every read and write that can touch more than named ids takes a :class:`Scope`, and every
query a backend sends carries the scope's payload filter: asking without one is a
programming error and fails loudly (:class:`ScopeRequired`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from react_mem.errors import BadRequest

#: Payload keys that hold the scope; backends create keyword indexes on them.
SCOPE_KEYS = ("scope_workspace", "scope_collection", "scope_user", "scope_conversation")


class ScopeRequired(BadRequest):
    def __init__(self, message: str) -> None:
        super().__init__(message, type="missing-scope")


@dataclass(frozen=True, slots=True)
class Scope:
    """Workspace (from the flow) + collection (from the request) + optional user/conversation.

    A query matches records whose scope keys equal every part given here; a record written
    with a user is therefore invisible to another user's query, and a query without a user
    sees the whole collection.
    """

    workspace: str
    collection: str
    user: str | None = None
    conversation: str | None = None

    def __post_init__(self) -> None:
        if not self.workspace or not self.collection:
            raise ScopeRequired("a scope needs a workspace and a collection")

    def payload(self) -> dict[str, str]:
        """The scope keys stored on a record (only the parts that are set)."""
        values = (self.workspace, self.collection, self.user, self.conversation)
        return {k: v for k, v in zip(SCOPE_KEYS, values, strict=True) if v}

    def narrowed(self, *, user: str | None = None, conversation: str | None = None) -> Scope:
        return Scope(
            self.workspace, self.collection, user or self.user, conversation or self.conversation
        )


def require_scope(scope: object) -> Scope:
    if not isinstance(scope, Scope):
        raise ScopeRequired(f"store query without a scope (got {scope!r})")
    return scope


class FieldType(StrEnum):
    KEYWORD = "keyword"
    INTEGER = "integer"
    FLOAT = "float"
    BOOL = "bool"


@dataclass(frozen=True, slots=True)
class Condition:
    """One payload condition; exactly one of the matchers is set."""

    key: str
    equals: str | int | bool | None = None
    any_of: Sequence[str | int] | None = None
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None
    #: True: the key is absent, null or an empty list (Qdrant's is-empty); False: the opposite.
    missing: bool | None = None


@dataclass(frozen=True, slots=True)
class Record:
    id: str  # a UUID string (both Qdrant engines require UUID or integer ids)
    payload: Mapping[str, Any]
    vector: Sequence[float] | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    score: float
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CollectionSpec:
    """A collection: its name should show the kind and vector size, e.g. ``facts-384``."""

    name: str
    vector_size: int
    indexes: Mapping[str, FieldType] = field(default_factory=dict)


class VectorStore(Protocol):
    async def open(self) -> None: ...

    async def ensure(self, spec: CollectionSpec) -> None:
        """Create the collection (with scope-key and ``indexes`` payload indexes) if absent."""

    async def upsert(self, collection: str, records: Sequence[Record]) -> None:
        """Insert or replace; each record's payload must already hold its scope keys."""

    async def search(
        self,
        collection: str,
        vector: Sequence[float],
        *,
        scope: Scope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
    ) -> list[Hit]: ...

    async def search_many(
        self,
        collection: str,
        vectors: Sequence[Sequence[float]],
        *,
        scope: Scope,
        limit: int,
        min_score: float | None = None,
        where: Sequence[Condition] = (),
    ) -> list[list[Hit]]:
        """:meth:`search` for each vector, as one batch (one pass over unindexed points)."""

    async def get(self, collection: str, ids: Sequence[str], *, scope: Scope) -> list[Record]:
        """Records by id, only those inside ``scope``; vectors included."""

    async def scroll(
        self,
        collection: str,
        *,
        scope: Scope,
        where: Sequence[Condition] = (),
        limit: int = 100,
        offset: str | None = None,
    ) -> tuple[list[Record], str | None]:
        """A page of records in id order and the offset of the next page (None at the end)."""

    async def count(
        self, collection: str, *, scope: Scope, where: Sequence[Condition] = ()
    ) -> int: ...

    async def set_payload(
        self, collection: str, ids: Sequence[str], payload: Mapping[str, Any], *, scope: Scope
    ) -> None:
        """Merge ``payload`` into the records ``ids`` that lie inside ``scope``."""

    async def delete(
        self,
        collection: str,
        *,
        scope: Scope,
        ids: Sequence[str] | None = None,
        where: Sequence[Condition] = (),
    ) -> int:
        """Delete records inside ``scope`` (restricted to ``ids`` when given); return how many."""

    async def close(self) -> None: ...

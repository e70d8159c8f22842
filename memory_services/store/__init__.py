"""Vector stores: one Protocol, two real Qdrant backends (embedded edge, and server).

The backends live in :mod:`memory_services.store.edge` and
:mod:`memory_services.store.qdrant_server` (imported lazily, so that importing the seam does
not load either engine); :func:`memory_services.runtime.make_store` picks one from settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_services.store.base import (
    DEFAULT_RETRIEVAL,
    SCOPE_KEYS,
    AllOwners,
    CollectionSpec,
    Condition,
    FieldType,
    Hit,
    Record,
    Retrieval,
    Scope,
    ScopeRequired,
    StoreScope,
    VectorStore,
    require_scope,
)

if TYPE_CHECKING:
    from memory_services.store.edge import EdgeStore
    from memory_services.store.qdrant_server import QdrantServerStore

__all__ = [
    "DEFAULT_RETRIEVAL",
    "SCOPE_KEYS",
    "AllOwners",
    "CollectionSpec",
    "Condition",
    "EdgeStore",
    "FieldType",
    "Hit",
    "QdrantServerStore",
    "Record",
    "Retrieval",
    "Scope",
    "ScopeRequired",
    "StoreScope",
    "VectorStore",
    "require_scope",
]


def __getattr__(name: str) -> Any:
    if name == "EdgeStore":
        from memory_services.store.edge import EdgeStore

        return EdgeStore
    if name == "QdrantServerStore":
        from memory_services.store.qdrant_server import QdrantServerStore

        return QdrantServerStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

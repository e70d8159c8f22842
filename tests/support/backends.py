"""The vector-store backends the contract tests run against, by name: the edge store in
process, the edge store hosted by a child process, and the Qdrant server code path on
qdrant-client's in-memory mode."""

from __future__ import annotations

from pathlib import Path

from memory_services.store import EdgeStore, QdrantServerStore, VectorStore
from memory_services.store.hosted import HostedStore

#: Every backend of the seam; the first two are the embedded engine.
BACKENDS = ["edge", "hosted", "qdrant"]


def backend_named(name: str, path: Path) -> VectorStore:
    """A store of backend ``name`` (not yet opened); the edge ones under ``path``."""
    if name == "edge":
        return EdgeStore(path)
    if name == "hosted":
        return HostedStore(path)
    if name == "qdrant":
        return QdrantServerStore(":memory:")
    raise ValueError(f"no backend {name!r}")

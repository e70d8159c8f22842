"""The open shards of an edge store, one per collection, and the one way to call the engine.

Engine calls run inline on the event loop (:meth:`Shards.call`). The binding holds the GIL
for the whole call, so a worker thread cannot free the loop (measured: a search moved to a
thread still stalls the loop for its full duration) and the hop (≈0.05 ms) would cost as much
as a typical call: a search in a scope of 100-1,000 points takes 0.15-0.3 ms, a one-point
upsert 0.05 ms. Opening shards, creating indexes, flushing and closing (file I/O, fsync) go
through :func:`asyncio.to_thread` so that a binding which releases the GIL would stop
blocking at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import qdrant_edge as qe

from memory_services.store import edge_build, lexical
from react_mem.errors import ConfigurationError, ReactMemError, TransientError

T = TypeVar("T")


class Shards:
    """Each ensured collection's live shard, its vector size, text fields and payload
    indexes; when the last engine call for a caller came (what makes the store busy)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.live: dict[str, qe.EdgeShard] = {}
        self.sizes: dict[str, int] = {}
        #: Each collection's text fields, the source of its lexical vectors.
        self.fields: dict[str, tuple[str, ...]] = {}
        #: Each collection's payload indexes (field -> kind), kept by an index rebuild too.
        self.wanted: dict[str, dict[str, str]] = {}
        #: Held while a shard is loaded or replaced: two loads of one shard would fight over
        #: its WAL lock, and a flush must not reach a shard an index swap is closing.
        self.ensuring = asyncio.Lock()
        self.last_call = time.monotonic()
        self.opened = False

    def __getitem__(self, collection: str) -> qe.EdgeShard:
        try:
            return self.live[collection]
        except KeyError:
            if not self.opened:
                raise TransientError("edge store is closed") from None
            raise ConfigurationError(f"collection {collection!r} was never ensured") from None

    def idle_for(self) -> float:
        """Seconds since the last engine call made for a caller."""
        return time.monotonic() - self.last_call

    def call(self, fn: Callable[[], T]) -> T:
        """One engine call for a caller (it makes the store busy, see :meth:`idle_for`)."""
        self.last_call = time.monotonic()
        return self.run(fn)

    @staticmethod
    def run(fn: Callable[[], T]) -> T:
        """One engine call; its errors become TransientError (ours pass through)."""
        try:
            return fn()
        except ReactMemError:
            raise
        except Exception as exc:
            raise TransientError(f"qdrant-edge: {exc}") from exc

    async def load(self, name: str, size: int) -> qe.EdgeShard:
        """Open the collection's live shard (creating it if new); call under ``ensuring``."""
        path = await asyncio.to_thread(edge_build.live_path, self.root, name)
        config = edge_build.config(size)
        exists = await asyncio.to_thread((path / "edge_config.json").exists)
        try:
            if exists:
                shard = await asyncio.to_thread(_load_shard, path, size)
            else:
                shard = await asyncio.to_thread(qe.EdgeShard.create, str(path), config)
        except Exception as exc:
            if "ncompatible" in str(exc) or "dimension" in str(exc).lower():
                raise ConfigurationError(f"edge shard {path} does not fit {size}-d: {exc}") from exc
            raise TransientError(f"cannot open edge shard {path}: {exc}") from exc
        # Holding the live shard (its WAL lock), no other store uses these directories.
        await asyncio.to_thread(edge_build.remove_stale, self.root, name)
        return shard

    async def close_all(self) -> None:
        """Flush and close every shard (the store is closed: :attr:`opened` is False)."""
        shards = list(self.live.values())
        self.live.clear()
        for shard in shards:
            await asyncio.to_thread(close, shard)


def _load_shard(path: Path, size: int) -> qe.EdgeShard:
    """An existing shard; one from before lexical search opens without its lexical vector,
    which :func:`edge_query.add_lexical` then adds."""
    try:
        return qe.EdgeShard.load(str(path), edge_build.config(size))
    except Exception as exc:
        if "vector storages" not in str(exc) or lexical.VECTOR not in str(exc):
            raise
    return qe.EdgeShard.load(str(path), edge_build.config(size, with_terms=False))


def close(shard: qe.EdgeShard, *, flush: bool = True) -> None:
    """Close a shard. The engine's ``close()`` flushes by itself (the same 40-70 syncs as
    ``flush()``, holding the GIL), so ``flush`` only makes a failing flush raise here: what
    the store's own close wants; a shard replaced by an index swap, whose directory is
    deleted next, is closed without it (half the syncs)."""
    try:
        if flush:
            shard.flush()
    finally:
        shard.close()

"""What a memory service holds in memory stays bounded: the edge store's shard files are read
as searches touch them (not whole when a shard opens), and the scope registry's cache of
written pairs has a size limit."""

from __future__ import annotations

import random
import sys
import uuid
from pathlib import Path

import pytest

from memory_services.scope_registry import ScopeRegistry
from memory_services.store import CollectionSpec, EdgeStore, Record, Scope

HOME = Scope("ws-a", "default")


def resident_mib(under: Path, part: str) -> float:
    """MiB of this process's mappings of files under ``under`` whose path has ``part``."""
    total, counting = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header
            counting = len(fields) > 5 and fields[5].startswith(str(under)) and part in fields[5]
        elif counting and fields[0] == "Rss:":
            total += int(fields[1])
    return total / 1024


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/smaps")
async def test_a_reopened_shard_reads_its_vectors_only_as_searches_touch_them(
    tmp_path: Path,
) -> None:
    spec = CollectionSpec("facts-384", 384)
    rng = random.Random(3)
    points = [
        Record(str(uuid.uuid4()), HOME.payload(), [rng.gauss(0, 1) for _ in range(384)])
        for _ in range(2_000)
    ]  # 3 MiB of vectors; the engine preallocates its vector files in larger chunks
    first = EdgeStore(tmp_path / "edge", flush_interval=0)
    await first.open()
    await first.ensure(spec)
    await first.upsert(spec.name, points)
    await first.close()

    store = EdgeStore(tmp_path / "edge", flush_interval=0)
    await store.open()
    await store.ensure(spec)
    try:
        opened = resident_mib(tmp_path / "edge", "vector_storage")
        [hit] = await store.search(spec.name, points[7].vector or [], scope=HOME, limit=1)
        assert hit.id == points[7].id  # the search scanned every vector
        searched = resident_mib(tmp_path / "edge", "vector_storage")
    finally:
        await store.close()
    assert opened < 1  # the engine's default (Cached) read the whole chunk (32 MiB) here
    assert 2 < searched < 8  # what the scan touched: the 3 MiB of vectors, not the chunk


class _Recording:
    """A store that keeps upserts (the registry's only writes) and lists nothing."""

    def __init__(self) -> None:
        self.upserts: list[str] = []

    async def upsert(self, collection: str, records: list[Record]) -> None:
        self.upserts.extend(r.id for r in records)


async def test_the_scope_registry_remembers_a_bounded_number_of_pairs() -> None:
    store = _Recording()
    registry = ScopeRegistry(store, "fact-scopes-1", remembered=3)  # type: ignore[arg-type]
    scopes = [Scope("ws", f"c{n}") for n in range(4)]
    for scope in scopes[:3]:
        await registry.remember(scope)
    await registry.remember(scopes[0])  # known: no write, and now the most recently used
    assert len(store.upserts) == 3
    await registry.remember(scopes[3])  # a fourth pair: the least recently used goes
    assert len(registry._known) == 3
    assert list(registry._known) == [("ws", "c2"), ("ws", "c0"), ("ws", "c3")]
    await registry.remember(scopes[0])  # still known
    await registry.remember(scopes[1])  # forgotten: written again, under the same id
    assert len(store.upserts) == 5 and store.upserts[4] == store.upserts[1]
    assert len(registry._known) == 3

"""What a memory service holds in memory stays bounded: the edge store's shard files are read
as searches touch them (not whole when a shard opens), what it wrote or read of them is paged
out (its logs and payload indexes always, its vectors past a budget) without losing a write,
and the scope registry's cache of written pairs has a size limit."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import uuid
from pathlib import Path

import pytest

from memory_services.scope_registry import ScopeRegistry
from memory_services.store import CollectionSpec, EdgeStore, Record, Scope, residency

HOME = Scope("ws-a", "default")
SPEC = CollectionSpec("facts-384", 384)
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/smaps")
MiB = 2**20
ROOT = Path(__file__).resolve().parents[1]


def points(count: int, seed: int = 3) -> list[Record]:
    rng = random.Random(seed)
    return [
        Record(str(uuid.uuid4()), HOME.payload(), [rng.gauss(0, 1) for _ in range(384)])
        for _ in range(count)
    ]


async def written(path: Path, records: list[Record]) -> None:
    """A store at ``path`` holding ``records``, closed."""
    store = EdgeStore(path, flush_interval=0)
    await store.open()
    await store.ensure(SPEC)
    await store.upsert(SPEC.name, records)
    await store.close()


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


@linux_only
async def test_a_reopened_store_pages_out_the_log_and_index_files_it_read(tmp_path: Path) -> None:
    await written(tmp_path / "edge", points(2_000))
    kept = EdgeStore(tmp_path / "edge", flush_interval=0, resident_mib=None)  # as before
    await kept.open()
    await kept.ensure(SPEC)
    try:
        before = residency.resident(tmp_path / "edge")
    finally:
        await kept.close()
    store = EdgeStore(tmp_path / "edge", flush_interval=0)
    await store.open()
    await store.ensure(SPEC)
    try:
        after = residency.resident(tmp_path / "edge")
        assert await store.count(SPEC.name, scope=HOME) == 2_000
    finally:
        await store.close()
    # Opening reads each keyword index's preallocated 4 MiB file whole, and replays the log.
    assert before[residency.INDEX] + before[residency.LOG] > 8 * MiB
    assert after[residency.INDEX] + after[residency.LOG] < 1 * MiB


@linux_only
async def test_vectors_past_the_budget_are_paged_out_and_read_again_by_searches(
    tmp_path: Path,
) -> None:
    records = points(2_000)  # 3 MiB of vectors, resident in the process that wrote them
    store = EdgeStore(tmp_path / "edge", flush_interval=0, resident_mib=4)
    await store.open()
    await store.ensure(SPEC)
    try:
        await store.upsert(SPEC.name, records)
        found = await store.trim()  # within the budget: only the log goes
        kept = residency.resident(tmp_path / "edge")
        store.resident_mib = 1
        await store.trim()
        paged = residency.resident(tmp_path / "edge")
        [hit] = await store.search(SPEC.name, records[7].vector or [], scope=HOME, limit=1)
        searched = residency.resident(tmp_path / "edge")
    finally:
        await store.close()
    assert found[residency.LOG] > 1 * MiB and kept[residency.LOG] < MiB / 4
    assert kept[residency.DATA] > 2 * MiB
    assert paged[residency.DATA] < MiB / 4
    assert hit.id == records[7].id and hit.score > 0.99
    assert searched[residency.DATA] > 2 * MiB  # the scan read every vector from the file again


@linux_only
async def test_maintenance_keeps_what_searches_read_until_the_store_is_idle(
    tmp_path: Path,
) -> None:
    """Paged out between two searches, the vectors were read straight back from the files."""
    records = points(2_000)
    store = EdgeStore(tmp_path / "edge", flush_interval=60, resident_mib=1)  # no tick of its own
    await store.open()
    await store.ensure(SPEC)
    try:
        await store.upsert(SPEC.name, records)
        await store.flush()  # a tick as the maintenance task runs it
        await store.maintain()  # the write was just now: busy
        busy = residency.resident(tmp_path / "edge")
        store.flush_interval = 0.05
        # No engine call for longer than that: idle. Idleness is time itself here, and a
        # slower machine only makes the pause longer, never too short.
        await asyncio.sleep(0.1)
        await store.maintain()
        idle = residency.resident(tmp_path / "edge")
    finally:
        await store.close()
    assert busy[residency.LOG] < MiB / 4  # the log goes at every tick
    assert busy[residency.DATA] > 2 * MiB
    assert idle[residency.DATA] < MiB / 4


_WRITER = """
import asyncio, os, signal, sys
from pathlib import Path
from memory_services.store import CollectionSpec, EdgeStore, Record, Scope, residency

async def main() -> None:
    store = EdgeStore(Path(sys.argv[1]), flush_interval=0, resident_mib=0)
    await store.open()
    await store.ensure(CollectionSpec("facts-384", 384))
    for n in range(20):
        batch = [Record(f"00000000-0000-0000-0000-{n:06d}{i:06d}", Scope("ws-a", "default")
                 .payload(), [float(n + 1), float(i + 1)] + [0.5] * 382) for i in range(100)]
        await store.upsert("facts-384", batch)
        await store.trim()  # logs and vectors paged out before any flush
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


@linux_only
async def test_paging_out_before_a_flush_loses_no_write_when_the_process_dies(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _WRITER, str(tmp_path / "edge"), env=env
    )
    assert await writer.wait() == -signal.SIGKILL
    store = EdgeStore(tmp_path / "edge", flush_interval=0)
    await store.open()
    await store.ensure(SPEC)
    try:
        count = await store.count(SPEC.name, scope=HOME)
        last = await store.get(SPEC.name, ["00000000-0000-0000-0000-000019000099"], scope=HOME)
    finally:
        await store.close()
    assert count == 2_000 and len(last) == 1  # the last batch too, written just before

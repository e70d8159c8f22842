"""Storage work that leaves the event loop free (benchmarks/loop_stall.py measures it).

The engine's own flush holds the GIL for its whole run (0.1-0.5 s: a device cache flush per
segment file), stalling every request in the process; the store's flush fsyncs the shard's
write-ahead log from a worker thread instead, and leaves the engine's flush to index swaps,
close, and a log grown past its bound (edge_flush.py). A big upsert, payload update or delete
is done a chunk per engine call, the loop free in between (edge_points.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

from memory_services.store import CollectionSpec, EdgeStore, Record, Scope, edge_build, edge_shards
from memory_services.store.edge_points import DELETE_CHUNK, UPSERT_CHUNK
from react_mem.errors import BadRequest
from tests.support.recording import eventually

SPEC = CollectionSpec("notes-8", 8)
HOME = Scope("ws-a", "default", "alice")


def records(count: int, size: int = 8, seed: int = 0) -> list[Record]:
    vectors = np.random.default_rng(seed).standard_normal((count, size), dtype=np.float32)
    return [
        Record(str(uuid.uuid4()), HOME.payload() | {"n": n}, v.tolist())
        for n, v in enumerate(vectors)
    ]


async def opened(path: Path, spec: CollectionSpec = SPEC, **settings: bool) -> EdgeStore:
    store = EdgeStore(path, flush_interval=0, index_after=0, **settings)
    await store.open()
    await store.ensure(spec)
    return store


async def test_the_loop_serves_while_a_flush_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush cannot finish before a task on the loop ran in the middle of it: one that held
    the loop, or the GIL as the engine's own flush does, would never let that task run."""
    store = await opened(tmp_path / "edge")
    try:
        written = records(20)
        await store.upsert(SPEC.name, written)
        syncing, served = threading.Event(), threading.Event()
        fsync = os.fsync

        def gated(fd: int) -> None:
            syncing.set()
            served.wait(30)  # released by the loop: it must be free meanwhile
            fsync(fd)

        monkeypatch.setattr(os, "fsync", gated)
        flushing = asyncio.create_task(store.flush())
        await eventually(syncing.is_set, timeout=30)  # the flush is in its sync ...
        # ... and the loop answers a read meanwhile.
        got = await store.get(SPEC.name, [written[3].id], scope=HOME)
        assert not flushing.done()
        served.set()
        await flushing
        assert [r.id for r in got] == [written[3].id]
        assert store.unflushed == frozenset()
    finally:
        monkeypatch.undo()
        await store.close()


async def test_a_restart_after_a_flush_finds_every_write_from_the_log(tmp_path: Path) -> None:
    """What a flush made durable is the log: a directory whose segments are as the engine
    last flushed them (at close) and whose log is as the store's flush synced it still
    holds every write acknowledged before, new points and changed payloads alike."""
    root, lost = tmp_path / "edge", tmp_path / "lost"
    store = await opened(root)
    before = records(50)
    await store.upsert(SPEC.name, before)
    await store.close()  # the engine's flush: the segments as a power loss would find them
    shutil.copytree(root, lost)

    store = await opened(root)
    after = records(50, seed=1)
    await store.upsert(SPEC.name, after)
    await store.set_payload(SPEC.name, [r.id for r in before[:10]], {"seen": 1}, scope=HOME)
    await store.flush()
    log = edge_build.live_path(root, SPEC.name) / "wal"
    shutil.rmtree(edge_build.live_path(lost, SPEC.name) / "wal")
    shutil.copytree(log, edge_build.live_path(lost, SPEC.name) / "wal")  # the synced log
    await store.close()

    restarted = await opened(lost)
    try:
        everything = [r.id for r in before + after]
        got = await restarted.get(SPEC.name, everything, scope=HOME)
        assert {r.id for r in got} == set(everything)
        seen = {r.id for r in got if r.payload.get("seen") == 1}
        assert seen == {r.id for r in before[:10]}
    finally:
        await restarted.close()


def closed_segments(root: Path, name: str) -> int:
    log = edge_build.live_path(root, name) / "wal"
    return sum(entry.startswith("closed-") for entry in os.listdir(log))


async def test_a_log_past_its_bound_gets_the_engines_flush_which_truncates_it(
    tmp_path: Path,
) -> None:
    """Without index runs the log would grow with every write (and a replay after a crash
    with it): past ``log_segments`` closed segments a flush is the engine's, which writes the
    segments and drops the log they hold."""
    wide = CollectionSpec("wide-4096", 4096)  # 16 KiB a point: a log segment in ~2k points
    root = tmp_path / "edge"
    store = await opened(root, wide)
    try:
        store._flusher.log_segments = 1
        seed = 0
        while closed_segments(root, wide.name) < 2:
            await store.upsert(wide.name, records(200, 4096, seed))
            seed += 1
        grown = closed_segments(root, wide.name)
        await store.flush()
        assert closed_segments(root, wide.name) < grown
    finally:
        await store.close()


async def test_below_the_bound_a_flush_leaves_the_log_to_replay(tmp_path: Path) -> None:
    """The same log under the default bound is only synced: nothing truncates it."""
    wide = CollectionSpec("wide-4096", 4096)
    root = tmp_path / "edge"
    store = await opened(root, wide)
    try:
        seed = 0
        while closed_segments(root, wide.name) < 2:
            await store.upsert(wide.name, records(200, 4096, seed))
            seed += 1
        grown = closed_segments(root, wide.name)
        await store.flush()
        assert closed_segments(root, wide.name) == grown
        assert store.unflushed == frozenset()
    finally:
        await store.close()


async def test_a_big_upsert_lets_the_loop_serve_between_its_chunks(tmp_path: Path) -> None:
    """A read started after a big upsert began is answered before it ends (it sees the
    chunks written so far); in one engine call the upsert would end before the read began."""
    store = await opened(tmp_path / "edge")
    try:
        batch = records(4 * UPSERT_CHUNK)
        upserting = asyncio.create_task(store.upsert(SPEC.name, batch))
        await asyncio.sleep(0)  # the upsert starts: its first chunk, then it lets the loop go
        counted = await store.count(SPEC.name, scope=HOME)
        assert not upserting.done()
        await upserting
        assert 0 < counted < len(batch)
        assert await store.count(SPEC.name, scope=HOME) == len(batch)
    finally:
        await store.close()


async def test_a_big_upsert_with_a_bad_record_writes_nothing(tmp_path: Path) -> None:
    """Every record is checked before the first chunk is written."""
    store = await opened(tmp_path / "edge")
    try:
        batch = records(3 * UPSERT_CHUNK)
        bad = batch[-1]
        batch[-1] = Record(bad.id, bad.payload, [1.0, 2.0])  # the wrong size, last
        with pytest.raises(BadRequest):
            await store.upsert(SPEC.name, batch)
        assert await store.count(SPEC.name, scope=HOME) == 0
    finally:
        await store.close()


async def test_a_big_payload_update_lets_the_loop_serve_between_its_chunks(
    tmp_path: Path,
) -> None:
    store = await opened(tmp_path / "edge")
    try:
        batch = records(3 * UPSERT_CHUNK)
        await store.upsert(SPEC.name, batch)
        ids = [r.id for r in batch]
        updating = asyncio.create_task(store.set_payload(SPEC.name, ids, {"seen": 1}, scope=HOME))
        await asyncio.sleep(0)  # the update starts: its first chunk, then it lets the loop go
        seen = [r for r in await store.get(SPEC.name, ids, scope=HOME) if r.payload.get("seen")]
        assert not updating.done()
        await updating
        assert 0 < len(seen) < len(batch)
        after = await store.get(SPEC.name, ids, scope=HOME)
        assert all(r.payload.get("seen") == 1 for r in after) and len(after) == len(batch)
    finally:
        await store.close()


async def test_a_big_delete_lets_the_loop_serve_between_its_chunks(tmp_path: Path) -> None:
    """A read started after a big delete began is answered before it ends (it sees the
    points not yet deleted); in one engine call the delete would end before the read began."""
    store = await opened(tmp_path / "edge")
    try:
        batch = records(4 * DELETE_CHUNK)
        await store.upsert(SPEC.name, batch)
        ids = [r.id for r in batch]
        deleting = asyncio.create_task(store.delete(SPEC.name, scope=HOME, ids=ids))
        await asyncio.sleep(0)  # the delete starts: its first chunk, then it lets the loop go
        counted = await store.count(SPEC.name, scope=HOME)
        assert not deleting.done()
        assert await deleting == len(batch)
        assert 0 < counted < len(batch)
        assert await store.count(SPEC.name, scope=HOME) == 0
    finally:
        await store.close()


async def test_a_delete_by_condition_leaves_nothing_written_while_it_ran(tmp_path: Path) -> None:
    """A delete of a whole scope goes chunk by chunk until nothing in the scope is left: a
    point written into the scope between its chunks is deleted too (a forget leaves
    nothing), and another owner's points stay."""
    store = await opened(tmp_path / "edge")
    other = Scope("ws-a", "default", "bob")
    try:
        await store.upsert(SPEC.name, records(3 * DELETE_CHUNK))
        kept = [Record(str(uuid.uuid4()), other.payload(), [1.0] * 8) for _ in range(5)]
        await store.upsert(SPEC.name, kept)
        deleting = asyncio.create_task(store.delete(SPEC.name, scope=HOME))
        await asyncio.sleep(0)  # the first chunk is gone
        assert not deleting.done()
        late = records(2, seed=9)
        await store.upsert(SPEC.name, late)  # written between two chunks
        assert await deleting == 3 * DELETE_CHUNK + len(late)
        assert await store.count(SPEC.name, scope=HOME) == 0
        assert await store.count(SPEC.name, scope=other) == len(kept)
    finally:
        await store.close()


async def test_a_big_delete_with_a_bad_id_deletes_nothing(tmp_path: Path) -> None:
    """Every id is checked before the first chunk is deleted."""
    store = await opened(tmp_path / "edge")
    try:
        batch = records(3 * DELETE_CHUNK)
        await store.upsert(SPEC.name, batch)
        ids: list[str] = [r.id for r in batch] + ["not an id"]
        with pytest.raises(BadRequest):
            await store.delete(SPEC.name, scope=HOME, ids=ids)
        assert await store.count(SPEC.name, scope=HOME) == len(batch)
    finally:
        await store.close()


async def test_flushes_go_on_while_an_index_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The maintenance task keeps flushing while an index build (its upkeep) runs: a write
    made during the build is synced before the build ends."""
    gate, finished = asyncio.Event(), edge_build.finished

    async def held(proc: asyncio.subprocess.Process) -> bool:
        await gate.wait()  # the build is not done until the test says so
        return await finished(proc)

    monkeypatch.setattr(edge_build, "finished", held)
    store = EdgeStore(tmp_path / "edge", flush_interval=0.05, index_after=100, index_when_idle=0.1)
    await store.open()
    await store.ensure(SPEC)
    try:
        await store.upsert(SPEC.name, records(200))
        await eventually(lambda: bool(store._indexer.touched), timeout=60)  # building
        late = records(1, seed=3)
        await store.upsert(SPEC.name, late)
        assert SPEC.name in store.unflushed
        await eventually(lambda: store.unflushed == frozenset(), timeout=30)
        assert store.indexed == 0  # still building
        gate.set()
        await eventually(lambda: store.indexed == 1, timeout=120)
        assert [r.id for r in await store.get(SPEC.name, [late[0].id], scope=HOME)] == [late[0].id]
    finally:
        gate.set()
        await store.close()


async def test_an_index_swap_reads_the_new_shard_with_the_loop_free_before_opening_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the built shard holds the GIL for every disk read it makes; the swap first
    reads those files into the page cache from a worker thread, and the loop answers a
    read meanwhile."""
    warm, load = edge_build.warm, edge_build.load
    steps: list[str] = []
    warming, served = threading.Event(), threading.Event()

    def gated_warm(path: Path) -> int:
        steps.append("warm")
        warming.set()
        served.wait(60)  # released by the loop: it must be free meanwhile
        return warm(path)

    def noted_load(path: Path) -> object:
        steps.append("load")
        return load(path)

    monkeypatch.setattr(edge_build, "warm", gated_warm)
    monkeypatch.setattr(edge_build, "load", noted_load)
    store = await opened(tmp_path / "edge")
    try:
        written = records(300)
        await store.upsert(SPEC.name, written)
        indexing = asyncio.create_task(store.optimize(SPEC.name))
        await eventually(warming.is_set, timeout=120)  # built; the swap reads its files ...
        got = await store.get(SPEC.name, [written[7].id], scope=HOME)  # ... and the loop serves
        assert not indexing.done()
        served.set()
        await indexing
        assert steps == ["warm", "load"]
        assert [r.id for r in got] == [written[7].id]
        assert await store.count(SPEC.name, scope=HOME) == len(written)
    finally:
        served.set()
        await store.close()


def test_warming_reads_the_log_and_indexes_but_not_the_stored_vectors(tmp_path: Path) -> None:
    """What opening reads whole (log, id tracker, indexes) is read; what searches read as
    they need (the vector and payload storage) is not."""
    shard = tmp_path / "shard"
    (shard / "wal").mkdir(parents=True)
    (shard / "wal" / "open-1").write_bytes(b"l" * 1000)
    segment = shard / "segments" / "s1"
    for folder, size in [
        ("payload_index", 300),
        ("vector_storage", 5000),
        ("payload_storage", 7000),
    ]:
        (segment / folder).mkdir(parents=True)
        (segment / folder / "page_0.dat").write_bytes(b"x" * size)
    (segment / "id_tracker.mappings").write_bytes(b"m" * 20)
    assert edge_build.warm(shard) == 1000 + 300 + 20


async def test_the_engines_close_flushes_so_a_replaced_shard_needs_no_flush_of_its_own(
    tmp_path: Path,
) -> None:
    """The swap closes the shard it replaces without flushing it first (its directory is
    deleted next), and the store relies on the engine's close to flush (its own close
    still asks for the flush first, to see it fail): a shard closed that way holds every
    write in its segments, with no log to replay."""
    root = tmp_path / "edge"
    store = await opened(root)
    written = records(50)
    await store.upsert(SPEC.name, written)
    await store.set_payload(SPEC.name, [r.id for r in written[:5]], {"seen": 1}, scope=HOME)
    shard = store._shards.live.pop(SPEC.name)
    edge_shards.close(shard, flush=False)
    await store.close()
    shutil.rmtree(edge_build.live_path(root, SPEC.name) / "wal")

    reopened = await opened(root)
    try:
        got = await reopened.get(SPEC.name, [r.id for r in written], scope=HOME)
        assert {r.id for r in got} == {r.id for r in written}
        assert {r.id for r in got if r.payload.get("seen") == 1} == {r.id for r in written[:5]}
    finally:
        await reopened.close()


async def test_an_index_swap_syncs_its_pointer_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Naming the new shard live needs two syncs (the pointer file, then its directory):
    they run in worker threads, leaving the loop only a rename, and the pointer names the
    new shard once the run is done."""
    loop_thread, on_the_loop = threading.get_ident(), []
    fsync = os.fsync

    def noted(fd: int) -> None:
        if threading.get_ident() == loop_thread:
            on_the_loop.append(fd)
        fsync(fd)

    store = await opened(tmp_path / "edge")
    try:
        await store.upsert(SPEC.name, records(300))
        monkeypatch.setattr(os, "fsync", noted)
        await store.optimize(SPEC.name)
        monkeypatch.undo()
        assert on_the_loop == []
        assert edge_build.live_path(tmp_path / "edge", SPEC.name).name == f"{SPEC.name}@1"
        assert await store.count(SPEC.name, scope=HOME) == 300
    finally:
        monkeypatch.undo()
        await store.close()

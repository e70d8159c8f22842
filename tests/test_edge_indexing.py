"""The edge store indexes a collection in a child process and swaps the indexed copy in: reads
and writes go on meanwhile, nothing written during the build is lost, and the results after
the swap are those of before."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path
from typing import Any

from memory_services.store import (
    CollectionSpec,
    Condition,
    EdgeStore,
    FieldType,
    Record,
    Scope,
    edge_query,
)
from memory_services.store.edge_build import live_path
from tests.support.recording import eventually

BIG = CollectionSpec("big-384", 384, {"kind": FieldType.KEYWORD})
HOME, OTHER = Scope("ws-a", "default"), Scope("ws-b", "default")


def vector(rng: random.Random) -> list[float]:
    raw = [rng.gauss(0, 1) for _ in range(384)]
    norm = sum(v * v for v in raw) ** 0.5
    return [v / norm for v in raw]


def point(rng: random.Random, scope: Scope, **payload: Any) -> Record:
    return Record(str(uuid.uuid4()), {**scope.payload(), **payload}, vector(rng))


async def everything(store: EdgeStore, scope: Scope) -> dict[str, dict[str, Any]]:
    """Every record of the scope: id -> payload."""
    out: dict[str, dict[str, Any]] = {}
    offset: str | None = None
    while True:
        page, offset = await store.scroll(BIG.name, scope=scope, limit=1000, offset=offset)
        out.update({r.id: dict(r.payload) for r in page})
        if offset is None:
            return out


async def test_reads_and_writes_go_on_while_an_index_is_built_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    rng = random.Random(11)
    store = EdgeStore(tmp_path / "edge", flush_interval=0.2, index_after=0)
    await store.open()
    await store.ensure(BIG)
    # Past the engine's own threshold (≈6.5k 384-d points), so the build makes an HNSW index.
    points = [point(rng, HOME, kind="kept" if n % 10 else "doomed") for n in range(8_000)]
    others = [point(rng, OTHER, kind="kept") for _ in range(100)]
    for first in range(0, len(points), 1_000):
        await store.upsert(BIG.name, points[first : first + 1_000])
    await store.upsert(BIG.name, others)
    probes = [p for p in points[1::400] if p.payload["kind"] == "kept"]
    before = await store.search_many(
        BIG.name, [p.vector or [] for p in probes], scope=HOME, limit=1
    )
    expected = {p.id: dict(p.payload) for p in points}

    build = asyncio.create_task(store.optimize(BIG.name))
    rounds = 0
    try:
        while not build.done():  # the build runs in a child process: this loop is served
            probe = probes[rounds % len(probes)]
            [hit] = await store.search(BIG.name, probe.vector or [], scope=HOME, limit=1)
            assert hit.id == probe.id
            if 3 + 10 * rounds >= len(points):  # a slow build: the points to change ran out
                await asyncio.sleep(0.01)
                continue
            added = point(rng, HOME, kind="added", round=rounds)
            await store.upsert(BIG.name, [added])
            expected[added.id] = dict(added.payload)
            changed = points[2 + 10 * rounds]  # a "kept" point exported before or after this
            await store.set_payload(BIG.name, [changed.id], {"round": rounds}, scope=HOME)
            expected[changed.id]["round"] = rounds
            removed = points[3 + 10 * rounds]
            assert await store.delete(BIG.name, scope=HOME, ids=[removed.id]) == 1
            del expected[removed.id]
            if rounds == 5:  # a delete by filter: the store lists what it removes
                doomed = await store.delete(
                    BIG.name, scope=HOME, where=[Condition("kind", equals="doomed")]
                )
                assert doomed == 800
                expected = {k: v for k, v in expected.items() if v["kind"] != "doomed"}
            rounds += 1
            await asyncio.sleep(0.01)
        assert await build is True
        assert rounds > 5  # the writes above ran while the index was being built

        shard = store._shards[BIG.name]
        info = shard.info()
        assert info.points_count == len(expected) + len(others)
        assert info.indexed_vectors_count >= 7_000  # HNSW (it counts points deleted since)
        assert live_path(tmp_path / "edge", BIG.name).name == f"{BIG.name}@1"
        assert await everything(store, HOME) == expected
        assert set(await everything(store, OTHER)) == {p.id for p in others}
        after = await store.search_many(
            BIG.name, [p.vector or [] for p in probes], scope=HOME, limit=1
        )
        assert [[h.id for h in hits] for hits in after] == [[h.id for h in hits] for hits in before]
        added_later = point(rng, HOME, kind="after")  # the new shard takes writes
        await store.upsert(BIG.name, [added_later])
        expected[added_later.id] = dict(added_later.payload)
    finally:
        build.cancel()
        await store.close()

    again = EdgeStore(tmp_path / "edge", flush_interval=0)  # the swap survives a restart
    await again.open()
    await again.ensure(BIG)
    try:
        assert await everything(again, HOME) == expected
        dirs = sorted(p.name for p in (tmp_path / "edge").iterdir() if p.is_dir())
        assert dirs == [f"{BIG.name}@1"]  # the old generation is gone
    finally:
        await again.close()


async def test_an_abandoned_build_leaves_the_collection_as_it_was(tmp_path: Path) -> None:
    rng = random.Random(5)
    store = EdgeStore(tmp_path / "edge", flush_interval=0, index_after=0)
    await store.open()
    await store.ensure(BIG)
    points = [point(rng, HOME, kind="kept") for _ in range(2_000)]
    await store.upsert(BIG.name, points)
    build = asyncio.create_task(store.optimize(BIG.name))
    await eventually(lambda: bool(store._indexer.touched))  # the build has started
    build.cancel()
    await asyncio.gather(build, return_exceptions=True)
    try:
        assert set(await everything(store, HOME)) == {p.id for p in points}
        assert live_path(tmp_path / "edge", BIG.name).name == BIG.name
        shards = [p.name for p in (tmp_path / "edge").iterdir() if p.is_dir()]
        assert shards == [BIG.name]  # copy removed
        await store.upsert(BIG.name, [point(rng, HOME, kind="kept")])  # still writable
        assert await store.optimize(BIG.name) is False  # below the engine's threshold
        assert len(await everything(store, HOME)) == 2_001
    finally:
        await store.close()


NOTES = CollectionSpec("notes-384", 384, text_fields=("text",))  # lexical vectors too


def notes_store(path: Path) -> EdgeStore:
    return EdgeStore(path, flush_interval=0.05, index_after=2_000, index_when_idle=0.2)


async def indexed_notes(store: EdgeStore, rng: random.Random) -> list[Record]:
    """7,000 notes in an HNSW index (past the engine's threshold)."""
    await store.open()
    await store.ensure(NOTES)
    points = [point(rng, HOME, text=f"note {n} about item{n}") for n in range(7_000)]
    for first in range(0, len(points), 1_000):
        await store.upsert(NOTES.name, points[first : first + 1_000])
    await eventually(lambda: store.indexed == 1, timeout=120)
    return points


async def give_payloads(store: EdgeStore, points: list[Record]) -> None:
    for first in range(0, len(points), 50):
        page = [p.id for p in points[first : first + 50]]
        await store.set_payload(NOTES.name, page, {"seen": first}, scope=HOME)


async def test_points_given_new_payloads_or_deleted_bring_the_next_index_run(
    tmp_path: Path,
) -> None:
    # The engine moves a point given a new payload out of its indexed segment, into the one
    # searches scan, and its indexed count then hides it (as it hides deletions): a store that
    # only retrieves (access statistics) would scan ever more points and never index again.
    rng = random.Random(5)
    store = notes_store(tmp_path / "edge")
    try:
        points = await indexed_notes(store, rng)
        await give_payloads(store, points[:2_500])
        info = store._shards[NOTES.name].info()
        assert edge_query.unindexed(info) < 2_000  # the engine's count alone hides them
        await eventually(lambda: store.indexed == 2, timeout=120)

        # 1,500 deleted from the index and 1,200 new: 1,200 to scan, no index run yet...
        doomed = [p.id for p in points[3_000:4_500]]
        assert await store.delete(NOTES.name, scope=HOME, ids=doomed) == 1_500
        fresh = [point(rng, HOME, text=f"later note {n}") for n in range(2_200)]
        await store.upsert(NOTES.name, fresh[:1_200])
        assert await store.index_due(idle=True) == []  # the tick's own decision, idle or not
        assert store.indexed == 2
        await store.upsert(NOTES.name, fresh[1_200:])  # ...2,200: one
        await eventually(lambda: store.indexed == 3, timeout=120)
        found = await store.search(NOTES.name, fresh[-1].vector or [], scope=HOME, limit=1)
        assert [hit.id for hit in found] == [fresh[-1].id]
    finally:
        await store.close()


async def test_points_changed_before_a_restart_still_count(tmp_path: Path) -> None:
    store = notes_store(tmp_path / "edge")
    try:
        points = await indexed_notes(store, random.Random(6))
        await give_payloads(store, points[:1_500])
        assert await store.index_due(idle=True) == []  # 1,500 moved: not yet
        assert store.indexed == 1
    finally:
        await store.close()
    again = notes_store(tmp_path / "edge")
    await again.open()
    await again.ensure(NOTES)
    try:
        await give_payloads(again, points[1_500:2_100])  # 2,100 in all
        await eventually(lambda: again.indexed == 1, timeout=120)
    finally:
        await again.close()

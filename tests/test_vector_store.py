"""The VectorStore contract, run against both backends: Qdrant Edge in a temporary directory and
the Qdrant server code path on qdrant-client's in-memory mode."""

from __future__ import annotations

import asyncio
import math
import os
import random
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe

from memory_services.runtime import MemorySettings, make_store
from memory_services.store import (
    AllOwners,
    CollectionSpec,
    Condition,
    EdgeStore,
    FieldType,
    QdrantServerStore,
    Record,
    Scope,
    ScopeRequired,
    VectorStore,
    edge_build,
)
from react_mem.errors import BadRequest, ConfigurationError, TransientError
from tests.support.backends import backend_named
from tests.support.recording import eventually

SPEC = CollectionSpec("tests-4", 4, {"kind": FieldType.KEYWORD, "rank": FieldType.INTEGER})
C = SPEC.name
HOME = Scope("ws-a", "default")


def record(scope: Scope, vector: Sequence[float], **payload: Any) -> Record:
    return Record(str(uuid.uuid4()), {**scope.payload(), **payload}, vector)


def ids(records: Sequence[Record]) -> set[str]:
    return {r.id for r in records}


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


@pytest.fixture(params=["edge", "hosted", "qdrant"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    backend = backend_named(request.param, tmp_path / "edge")
    await backend.open()
    await backend.ensure(SPEC)
    yield backend
    await backend.close()


async def test_upsert_then_get_returns_payload_and_unit_vector(store: VectorStore) -> None:
    a = record(HOME, [3, 4, 0, 0], kind="fact", rank=2, tags=["x", "y"], nested={"k": 1.5})
    b = record(HOME, [0, 0, 1, 0], kind="fact")
    await store.upsert(C, [a, b])
    got = await store.get(C, [b.id, str(uuid.uuid4()), a.id.upper()], scope=HOME)
    assert [r.id for r in got] == [b.id, a.id]  # asked-for order; unknown ids left out
    assert dict(got[1].payload) == dict(a.payload)
    assert got[1].vector == pytest.approx([0.6, 0.8, 0, 0], abs=1e-6)  # cosine stores unit


async def test_upsert_with_the_same_id_replaces(store: VectorStore) -> None:
    a = record(HOME, [1, 0, 0, 0], kind="old")
    await store.upsert(C, [a])
    await store.upsert(C, [Record(a.id, {**HOME.payload(), "kind": "new"}, [0, 1, 0, 0])])
    assert await store.count(C, scope=HOME) == 1
    (got,) = await store.get(C, [a.id], scope=HOME)
    assert got.payload["kind"] == "new" and got.vector == pytest.approx([0, 1, 0, 0])


async def test_search_ranks_by_cosine_with_limit_and_min_score(store: VectorStore) -> None:
    near, mid, far = (
        record(HOME, [1, 0.1, 0, 0]),
        record(HOME, [1, 1, 0, 0]),
        record(HOME, [-1, 0, 0, 0]),
    )
    await store.upsert(C, [far, near, mid])
    hits = await store.search(C, [1, 0, 0, 0], scope=HOME, limit=10)
    assert [h.id for h in hits] == [near.id, mid.id, far.id]
    assert hits[0].score == pytest.approx(unit([1, 0.1, 0, 0])[0], abs=1e-5)
    assert hits[2].score == pytest.approx(-1.0, abs=1e-5)
    assert hits[0].payload["scope_workspace"] == "ws-a"
    assert [h.id for h in await store.search(C, [1, 0, 0, 0], scope=HOME, limit=1)] == [near.id]
    above = await store.search(C, [1, 0, 0, 0], scope=HOME, limit=10, min_score=0.5)
    assert [h.id for h in above] == [near.id, mid.id]


async def test_search_many_answers_each_vector_as_search_does(store: VectorStore) -> None:
    mine = [record(HOME, v) for v in ([1, 0.1, 0, 0], [0, 1, 0.2, 0], [0, 0, 1, 0])]
    theirs = record(Scope("ws-b", "default"), [1, 0, 0, 0])
    await store.upsert(C, [*mine, theirs])
    probes = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1]]
    batched = await store.search_many(C, probes, scope=HOME, limit=2, min_score=0.3)
    singles = [await store.search(C, p, scope=HOME, limit=2, min_score=0.3) for p in probes]
    assert [[h.id for h in hits] for hits in batched] == [[h.id for h in s] for s in singles]
    assert [[h.id for h in hits] for hits in batched] == [[mine[0].id], [mine[1].id], []]
    assert batched[0][0].score == pytest.approx(singles[0][0].score, abs=1e-6)
    assert await store.search_many(C, [], scope=HOME, limit=1) == []
    with pytest.raises(BadRequest):
        await store.search_many(C, [[1, 0, 0, 0], [1, 0]], scope=HOME, limit=1)


async def test_scroll_pages_through_everything_in_id_order(store: VectorStore) -> None:
    written = [record(HOME, [1, n, 0, 0], rank=n) for n in range(25)]
    await store.upsert(C, written)
    await store.upsert(C, [record(Scope("ws-b", "default"), [1, 0, 0, 0])])  # not ours
    pages: list[list[Record]] = []
    offset: str | None = None
    while True:
        page, offset = await store.scroll(C, scope=HOME, limit=10, offset=offset)
        pages.append(page)
        if offset is None:
            break
    assert [len(p) for p in pages] == [10, 10, 5]
    seen = [r.id for p in pages for r in p]
    assert seen == sorted(seen, key=uuid.UUID) and set(seen) == ids(written)
    assert all(r.vector is not None and len(r.vector) == 4 for p in pages for r in p)
    low, _ = await store.scroll(C, scope=HOME, where=[Condition("rank", lt=3)], limit=100)
    assert sorted(r.payload["rank"] for r in low) == [0, 1, 2]


async def test_count_set_payload_and_delete(store: VectorStore) -> None:
    a, b, c = (record(HOME, [1, n, 0, 0], kind="k", rank=n) for n in range(3))
    await store.upsert(C, [a, b, c])
    assert await store.count(C, scope=HOME) == 3
    await store.set_payload(C, [a.id, b.id], {"kind": "tagged", "seen": 2}, scope=HOME)
    (got,) = await store.get(C, [a.id], scope=HOME)
    assert got.payload["kind"] == "tagged" and got.payload["seen"] == 2 and got.payload["rank"] == 0
    assert await store.count(C, scope=HOME, where=[Condition("kind", equals="tagged")]) == 2
    assert await store.delete(C, scope=HOME, ids=[a.id, str(uuid.uuid4())]) == 1
    assert await store.delete(C, scope=HOME, where=[Condition("kind", equals="tagged")]) == 1
    assert ids(await store.get(C, [a.id, b.id, c.id], scope=HOME)) == {c.id}
    assert await store.delete(C, scope=HOME, ids=[]) == 0
    assert await store.delete(C, scope=HOME) == 1
    assert await store.count(C, scope=HOME) == 0


ROWS: list[dict[str, Any]] = [
    {"name": "a", "kind": "fact", "rank": 1, "score": 0.1, "flag": True, "maybe": "x"},
    {"name": "b", "kind": "fact", "rank": 5, "score": 0.5, "flag": False, "maybe": None},
    {"name": "c", "kind": "rule", "rank": 9, "score": 0.9, "flag": True},
]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ([Condition("kind", equals="fact")], "ab"),
        ([Condition("rank", equals=5)], "b"),
        ([Condition("flag", equals=True)], "ac"),
        ([Condition("flag", equals=False)], "b"),
        ([Condition("kind", any_of=["rule", "other"])], "c"),
        ([Condition("rank", any_of=[1, 9])], "ac"),
        ([Condition("rank", gt=1)], "bc"),
        ([Condition("rank", gte=1, lt=9)], "ab"),
        ([Condition("score", lte=0.5)], "ab"),
        ([Condition("score", gt=0.2, lt=0.95)], "bc"),
        ([Condition("maybe", missing=True)], "bc"),  # null and absent
        ([Condition("maybe", missing=False)], "a"),
        ([Condition("kind", equals="fact"), Condition("flag", equals=True)], "a"),
        ([Condition("kind", equals="nothing")], ""),
    ],
)
async def test_conditions(store: VectorStore, where: list[Condition], expected: str) -> None:
    await store.upsert(C, [record(HOME, [1, n, 1, 0], **row) for n, row in enumerate(ROWS)])
    await store.upsert(C, [record(Scope("ws-b", "default"), [1, 0, 0, 0], **ROWS[0])])
    page, _ = await store.scroll(C, scope=HOME, where=where)
    assert "".join(sorted(r.payload["name"] for r in page)) == expected
    hits = await store.search(C, [1, 0, 0, 0], scope=HOME, limit=10, where=where)
    assert "".join(sorted(h.payload["name"] for h in hits)) == expected
    assert await store.count(C, scope=HOME, where=where) == len(expected)


SCOPES = {
    "home": HOME,
    "other-workspace": Scope("ws-b", "default"),
    "other-collection": Scope("ws-a", "other"),
    "user-1": Scope("ws-a", "default", user="u1"),
    "user-2": Scope("ws-a", "default", user="u2"),
    "conversation": Scope("ws-a", "default", user="u1", conversation="c1"),
    "shared-conversation": Scope("ws-a", "default", conversation="c1"),
}


async def test_scopes_never_see_each_others_records(store: VectorStore) -> None:
    written = {name: record(scope, [1, 0, 0, 0], owner=name) for name, scope in SCOPES.items()}
    await store.upsert(C, list(written.values()))
    # A scope sees its owner's records (all its conversations when it names none); a scope
    # without a user sees only the records written without one, never a user's; never a
    # sibling workspace, collection, user or conversation.
    visible = {
        "home": {"home", "shared-conversation"},
        "other-workspace": {"other-workspace"},
        "other-collection": {"other-collection"},
        "user-1": {"user-1", "conversation"},
        "user-2": {"user-2"},
        "conversation": {"conversation"},
        "shared-conversation": {"shared-conversation"},
    }
    every_id = [r.id for r in written.values()]
    for name, scope in SCOPES.items():
        hits = await store.search(C, [1, 0, 0, 0], scope=scope, limit=100)
        assert {h.payload["owner"] for h in hits} == visible[name], name
        page, _ = await store.scroll(C, scope=scope)
        assert {r.payload["owner"] for r in page} == visible[name], name
        got = await store.get(C, every_id, scope=scope)
        assert {r.payload["owner"] for r in got} == visible[name], name
        assert await store.count(C, scope=scope) == len(visible[name]), name
    # Maintenance spans the owners of one collection, nothing more.
    everyone = AllOwners("ws-a", "default")
    page, _ = await store.scroll(C, scope=everyone)
    assert {r.payload["owner"] for r in page} == set(SCOPES) - {
        "other-workspace",
        "other-collection",
    }
    assert await store.count(C, scope=everyone) == len(page)


def test_no_user_is_one_value() -> None:
    # "" and None are the same owner (no user); any other id is compared exactly.
    assert Scope("ws-a", "default", user="") == Scope("ws-a", "default", user=None) == HOME
    assert Scope("ws-a", "default", user="", conversation="").payload() == HOME.payload()
    assert Scope("ws-a", "default", user=" ") != HOME
    assert Scope("ws-a", "default", user="Alice") != Scope("ws-a", "default", user="alice")


async def test_a_user_less_write_and_delete_leave_users_records_alone(store: VectorStore) -> None:
    alice = record(SCOPES["user-1"], [1, 0, 0, 0], kind="alice")
    await store.upsert(C, [alice])
    assert await store.get(C, [alice.id], scope=HOME) == []  # looks exactly like "not found"
    await store.set_payload(C, [alice.id], {"kind": "stolen"}, scope=HOME)
    assert await store.delete(C, scope=HOME, ids=[alice.id]) == 0
    assert await store.delete(C, scope=HOME) == 0
    (got,) = await store.get(C, [alice.id], scope=SCOPES["user-1"])
    assert got.payload["kind"] == "alice"


async def test_writes_through_another_scope_touch_nothing(store: VectorStore) -> None:
    mine = record(HOME, [1, 0, 0, 0], kind="mine")
    await store.upsert(C, [mine])
    for scope in [SCOPES["other-workspace"], SCOPES["other-collection"], SCOPES["user-1"]]:
        assert await store.delete(C, scope=scope, ids=[mine.id]) == 0
        assert await store.delete(C, scope=scope) == 0
        await store.set_payload(C, [mine.id], {"kind": "stolen"}, scope=scope)
    (got,) = await store.get(C, [mine.id], scope=HOME)
    assert got.payload["kind"] == "mine"


async def test_calls_without_a_scope_fail_loudly(store: VectorStore) -> None:
    unscoped: Any = None
    a = record(HOME, [1, 0, 0, 0])
    await store.upsert(C, [a])
    with pytest.raises(ScopeRequired):
        await store.search(C, [1, 0, 0, 0], scope=unscoped, limit=1)
    with pytest.raises(ScopeRequired):
        await store.search_many(C, [], scope=unscoped, limit=1)
    with pytest.raises(ScopeRequired):
        await store.get(C, [a.id], scope=unscoped)
    with pytest.raises(ScopeRequired):
        await store.get(C, [], scope=unscoped)
    with pytest.raises(ScopeRequired):
        await store.scroll(C, scope=unscoped)
    with pytest.raises(ScopeRequired):
        await store.count(C, scope=unscoped)
    with pytest.raises(ScopeRequired):
        await store.set_payload(C, [a.id], {"k": 1}, scope=unscoped)
    with pytest.raises(ScopeRequired):
        await store.delete(C, scope=unscoped)
    with pytest.raises(ScopeRequired):
        await store.delete(C, scope={"workspace": "ws-a", "collection": "default"}, ids=[a.id])  # type: ignore[arg-type]
    with pytest.raises(ScopeRequired):
        Scope("", "default")
    with pytest.raises(ScopeRequired):  # a record must carry its scope keys
        await store.upsert(
            C, [Record(str(uuid.uuid4()), {"scope_workspace": "ws-a"}, [1, 0, 0, 0])]
        )
    with pytest.raises(ScopeRequired):  # "no user" is an absent key, never ""
        await store.upsert(
            C, [Record(str(uuid.uuid4()), {**HOME.payload(), "scope_user": ""}, [1, 0, 0, 0])]
        )
    with pytest.raises(ScopeRequired):  # and cannot be moved to another scope
        await store.set_payload(C, [a.id], {"scope_workspace": "ws-b"}, scope=HOME)
    assert await store.count(C, scope=HOME) == 1


async def test_bad_input_is_a_bad_request(store: VectorStore) -> None:
    with pytest.raises(BadRequest, match="4-dimensional"):
        await store.upsert(C, [record(HOME, [1, 0, 0])])
    with pytest.raises(BadRequest, match="4-dimensional"):
        await store.search(C, [1, 0, 0, 0, 0], scope=HOME, limit=1)
    with pytest.raises(BadRequest, match="non-zero"):
        await store.upsert(C, [record(HOME, [0, 0, 0, 0])])
    with pytest.raises(BadRequest, match="finite"):
        await store.search(C, [1, float("nan"), 0, 0], scope=HOME, limit=1)
    with pytest.raises(BadRequest, match="numbers only"):
        await store.search(C, [1, "x", 0, 0], scope=HOME, limit=1)  # type: ignore[list-item]
    with pytest.raises(BadRequest, match="finite"):  # nested lists are not a vector
        await store.search(C, [[1], [0], [0], [0]], scope=HOME, limit=1)  # type: ignore[list-item]
    with pytest.raises(BadRequest, match="not a UUID"):
        await store.get(C, ["fact-1"], scope=HOME)
    with pytest.raises(BadRequest, match="not a UUID"):
        await store.upsert(C, [Record("fact-1", HOME.payload(), [1, 0, 0, 0])])
    with pytest.raises(BadRequest, match="exactly one matcher"):
        await store.count(C, scope=HOME, where=[Condition("kind", equals="a", missing=True)])
    with pytest.raises(BadRequest, match="limit"):
        await store.search(C, [1, 0, 0, 0], scope=HOME, limit=0)
    with pytest.raises(ConfigurationError, match="never ensured"):
        await store.count("elsewhere-4", scope=HOME)
    assert await store.count(C, scope=HOME) == 0


async def test_ensure_is_idempotent_and_refuses_another_vector_size(store: VectorStore) -> None:
    a = record(HOME, [1, 0, 0, 0])
    await store.upsert(C, [a])
    await store.ensure(SPEC)
    assert await store.count(C, scope=HOME) == 1
    with pytest.raises(ConfigurationError):
        await store.ensure(CollectionSpec(C, 8))
    with pytest.raises(ConfigurationError):
        await store.ensure(CollectionSpec("../escape", 4))


@pytest.mark.parametrize("kind", ["edge", "hosted"])
async def test_edge_data_survives_close_and_reopen(kind: str, tmp_path: Path) -> None:
    first = backend_named(kind, tmp_path / "edge")
    await first.open()
    await first.ensure(SPEC)
    a = record(HOME, [1, 2, 3, 4], kind="kept")
    await first.upsert(C, [a, record(HOME, [1, 0, 0, 0], kind="gone")])
    await first.delete(C, scope=HOME, where=[Condition("kind", equals="gone")])
    await first.close()
    with pytest.raises(TransientError, match="closed"):
        await first.count(C, scope=HOME)

    again = backend_named(kind, tmp_path / "edge")
    await again.open()
    await again.ensure(SPEC)
    try:
        (got,) = await again.get(C, [a.id], scope=HOME)
        assert got.payload["kind"] == "kept" and got.vector == pytest.approx(unit([1, 2, 3, 4]))
        assert await again.count(C, scope=HOME) == 1
        hits = await again.search(C, [1, 2, 3, 4], scope=HOME, limit=5)
        assert [h.id for h in hits] == [a.id]
    finally:
        await again.close()
    resized = backend_named(kind, tmp_path / "edge")  # the shard on disk is 4-d
    await resized.open()
    try:
        with pytest.raises(ConfigurationError, match="vector size 8"):
            await resized.ensure(CollectionSpec(C, 8))
    finally:
        await resized.close()


CRASHING_WRITER = """
import asyncio, os, pathlib, signal, sys
from memory_services.store import EdgeStore, CollectionSpec, Record
async def main():
    store = EdgeStore(pathlib.Path(sys.argv[1]), flush_interval=0)
    await store.open()
    await store.ensure(CollectionSpec("tests-4", 4))
    await store.upsert("tests-4", [Record(sys.argv[2], {"scope_workspace": "ws-a",
                       "scope_collection": "default"}, [1, 0, 0, 0])])
    os.kill(os.getpid(), signal.SIGKILL)  # no flush, no close
asyncio.run(main())
"""


async def test_edge_write_survives_a_killed_process(tmp_path: Path) -> None:
    written = str(uuid.uuid4())
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CRASHING_WRITER,
        str(tmp_path / "edge"),
        written,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == -signal.SIGKILL, stderr.decode()
    store = EdgeStore(tmp_path / "edge")
    await store.open()
    await store.ensure(SPEC)
    try:
        assert ids(await store.get(C, [written], scope=HOME)) == {written}
    finally:
        await store.close()


async def test_edge_indexes_a_large_collection_once_idle(
    tmp_path: Path,
) -> None:
    big = CollectionSpec("big-384", 384)
    runs: list[tuple[str, float]] = []
    store = EdgeStore(
        tmp_path / "edge",
        flush_interval=0.05,
        index_after=5_000,
        index_when_idle=0.3,
        on_indexed=lambda collection, seconds: runs.append((collection, seconds)),
    )
    await store.open()
    await store.ensure(big)
    await store.ensure(SPEC)
    rng = random.Random(7)
    points = [record(HOME, unit([rng.gauss(0, 1) for _ in range(384)])) for _ in range(7_000)]
    try:
        await store.upsert(C, [record(HOME, [1, 0, 0, 0]) for _ in range(50)])
        for first in range(0, len(points), 1_000):
            await store.upsert(big.name, points[first : first + 1_000])
        probes = points[::700]
        # Busy: the store is searched every 50 ms, so it waits. The pauses are the load under
        # test, not a wait for something (index_when_idle is longer than they are).
        for _ in range(20):
            await store.search(big.name, probes[0].vector or [], scope=HOME, limit=1)
            await asyncio.sleep(0.05)
        assert store.indexed == 0
        await eventually(lambda: store.indexed == 1, timeout=120)  # then idle: indexed
        assert runs == [(big.name, store.last_index_seconds)] and runs[0][1] > 0
        info = store._shards[big.name].info()
        assert info.indexed_vectors_count == info.points_count == 7_000
        after = await store.search_many(
            big.name, [p.vector or [] for p in probes], scope=HOME, limit=3
        )
        assert [hits[0].id for hits in after] == [p.id for p in probes]  # each finds itself
        # Nothing new written: nothing to index (C is small), by the tick's own decision.
        assert await store.index_due(idle=True) == []
        assert store.indexed == 1
    finally:
        await store.close()


async def test_edge_periodic_flush_runs(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "edge", flush_interval=0.05)
    await store.open()
    await store.ensure(SPEC)
    await store.upsert(C, [record(HOME, [1, 0, 0, 0])])
    try:
        assert store.unflushed == {C}
        await eventually(lambda: not store.unflushed, timeout=5)
    finally:
        await store.close()


async def test_engine_failures_become_transient_errors(tmp_path: Path) -> None:
    # A bare shard holds its write-ahead log (a second EdgeStore would be refused at open).
    (tmp_path / "edge").mkdir()
    holder = qe.EdgeShard.create(str(tmp_path / "edge" / C), edge_build.config(SPEC.vector_size))
    second = EdgeStore(tmp_path / "edge")
    await second.open()
    try:
        with pytest.raises(TransientError) as caught:
            await second.ensure(SPEC)
        assert caught.value.__cause__ is not None
    finally:
        await second.close()
        holder.close()

    # Nothing listens on port 1.
    server = QdrantServerStore("http://127.0.0.1:1", timeout=2, check_compatibility=False)
    await server.open()
    try:
        with pytest.raises(TransientError) as caught:
            await server.ensure(SPEC)
        assert caught.value.__cause__ is not None
    finally:
        await server.close()
    with pytest.raises(TransientError, match="not open"):
        await server.count(C, scope=HOME)


# qdrant-client's local mode, standing in for a server here, warns that payload indexes do
# nothing in it; the test asks only that they are requested without error.
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
async def test_server_payload_indexes_are_requested_without_error() -> None:
    store = QdrantServerStore(":memory:", payload_indexes=True)
    await store.open()
    try:
        await store.ensure(SPEC)
        await store.ensure(SPEC)  # idempotent
        a = record(HOME, [1, 0, 0, 0], kind="k", rank=1)
        await store.upsert(C, [a])
        assert ids(await store.get(C, [a.id], scope=HOME)) == {a.id}
    finally:
        await store.close()


def test_settings_choose_the_backend_and_its_directory(tmp_path: Path) -> None:
    edge = MemorySettings.load({"id": "fact-memory", "state_dir": tmp_path})
    assert edge.store_dir == tmp_path / "memory" / "fact-memory"
    store = make_store(edge)
    assert isinstance(store, EdgeStore) and store.path == edge.store_dir
    assert store.index_after == 20_000
    heard = make_store(edge, on_indexed=print)
    assert isinstance(heard, EdgeStore) and heard.on_indexed is print
    never = make_store(MemorySettings.load({"id": "f", "edge_index_after": 0}))
    assert isinstance(never, EdgeStore) and never.index_after == 0
    with pytest.raises(ConfigurationError, match="edge_index_after"):
        MemorySettings.load({"id": "f", "edge_index_after": -1})
    placed = MemorySettings.load({"id": "fact-memory", "data_dir": tmp_path / "facts"})
    assert placed.store_dir == tmp_path / "facts"
    server = make_store(
        MemorySettings.load(
            {
                "id": "x",
                "vector_store": "qdrant",
                "qdrant_url": "http://q:6333",
                "qdrant_api_key": "k",
            }
        )
    )
    assert isinstance(server, QdrantServerStore) and server.url == "http://q:6333"
    with pytest.raises(ConfigurationError, match="qdrant_url"):
        MemorySettings.load({"id": "x", "vector_store": "qdrant"})
    with pytest.raises(ConfigurationError, match="vector_store"):
        MemorySettings.load({"id": "x", "vector_store": "chroma"})


def test_settings_read_qdrant_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QDRANT_URL", "http://env-qdrant:6333")
    monkeypatch.setenv("QDRANT_API_KEY", "secret")
    settings = MemorySettings.load({"id": "x", "vector_store": "qdrant"})
    assert settings.qdrant_url == "http://env-qdrant:6333"
    assert settings.qdrant_api_key is not None
    assert settings.qdrant_api_key.get_secret_value() == "secret"
    assert "secret" not in repr(settings)
    assert os.environ["QDRANT_URL"]  # untouched by loading

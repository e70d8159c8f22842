"""Lexical and hybrid search in the VectorStore contract, on both backends (Qdrant Edge in a
temporary directory, the Qdrant server code path on qdrant-client's in-memory mode)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe
from qdrant_client import models

from memory_services.store import (
    CollectionSpec,
    EdgeStore,
    QdrantServerStore,
    Record,
    Retrieval,
    Scope,
    VectorStore,
    edge_build,
    lexical,
)
from tests.support.backends import backend_named

SPEC = CollectionSpec("notes-4", 4, text_fields=("text",))
C = SPEC.name
HOME, OTHER = Scope("ws-a", "default", "ann"), Scope("ws-b", "default", "ann")
QUERY = [1.0, 0.0, 0.0, 0.0]
HYBRID = [Retrieval(), Retrieval(fusion="dbsf"), Retrieval(weights=(1.0, 2.0))]
#: Filler notes whose vectors lie nearest the query and whose words it does not use.
FILLER = [
    "the weather was lovely on the beach today",
    "we painted the kitchen a pale shade of green",
    "my sister adopted a tabby kitten last spring",
    "the football match went into extra time",
]


def note(scope: Scope, text: str, vector: list[float], **payload: Any) -> Record:
    return Record(str(uuid.uuid4()), {**scope.payload(), "text": text, **payload}, vector)


async def open_store(kind: str, path: Path) -> VectorStore:
    store = backend_named(kind, path)
    await store.open()
    return store


@pytest.fixture(params=["edge", "hosted", "qdrant"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    backend = await open_store(request.param, tmp_path / "edge")
    await backend.ensure(SPEC)
    yield backend
    await backend.close()


async def filled(store: VectorStore) -> Record:
    """The filler near the query, and one note far from it holding a rare id and name."""
    near = [note(HOME, t, [1.0, 0.1 * i, 0.2, 0.0]) for i, t in enumerate(FILLER, 1)]
    rare = note(HOME, "Order ZX-4471 goes to Quillon on Tuesday", [0.0, 0.0, 0.0, 1.0])
    await store.upsert(C, [*near, rare])
    return rare


@pytest.mark.parametrize("retrieval", HYBRID, ids=["rrf", "dbsf", "rrf-weighted"])
async def test_a_record_found_only_by_its_rare_token_comes_first(
    store: VectorStore, retrieval: Retrieval
) -> None:
    rare = await filled(store)
    for text in ["where is ZX-4471?", "what did Quillon get", "order 4471"]:
        dense = await store.search(
            C, QUERY, scope=HOME, limit=3, text=text, retrieval=Retrieval("dense")
        )
        assert rare.id not in [h.id for h in dense]  # the dense vector alone misses it
        hits = await store.search(C, QUERY, scope=HOME, limit=3, text=text, retrieval=retrieval)
        assert hits[0].id == rare.id, text
        assert hits[0].payload["text"] == rare.payload["text"]
        assert hits[0].score == pytest.approx(0.0, abs=1e-6)  # its cosine, not a fused score
        cosines = {h.id: h.score for h in dense}
        assert hits[1].score == pytest.approx(cosines[hits[1].id], abs=1e-5)


async def test_lexical_mode_ranks_by_terms_alone(store: VectorStore) -> None:
    rare = await filled(store)
    hits = await store.search(
        C, QUERY, scope=HOME, limit=5, text="Quillon", retrieval=Retrieval("lexical")
    )
    assert [h.id for h in hits] == [rare.id]  # no shared term: no other record
    many = await store.search_many(
        C, [QUERY, QUERY], scope=HOME, limit=5, texts=["Quillon", "kitten"],
        retrieval=Retrieval("lexical"),
    )  # fmt: skip
    assert many[0][0].id == rare.id and "kitten" in many[1][0].payload["text"]


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_scopes_hold_in_lexical_and_hybrid_modes(store: VectorStore, mode: str) -> None:
    mine = note(HOME, "invoice 99812 for Quillon", [0.0, 1.0, 0.0, 0.0])
    theirs = note(OTHER, "invoice 99812 for Quillon", QUERY)
    shared = note(Scope("ws-a", "default"), "invoice 99812 for Quillon", QUERY)
    other_user = note(Scope("ws-a", "default", "bob"), "invoice 99812 for Quillon", QUERY)
    await store.upsert(C, [mine, theirs, shared, other_user])
    retrieval = Retrieval(mode)  # type: ignore[arg-type]
    for scope, want in [(HOME, mine), (OTHER, theirs), (Scope("ws-a", "default"), shared)]:
        hits = await store.search(
            C, QUERY, scope=scope, limit=10, text="invoice 99812 Quillon", retrieval=retrieval
        )
        assert [h.id for h in hits] == [want.id]


async def test_min_score_bounds_the_dense_side_only(store: VectorStore) -> None:
    rare = await filled(store)
    hits = await store.search(C, QUERY, scope=HOME, limit=10, min_score=0.99, text="Quillon")
    assert rare.id in [h.id for h in hits]  # lexical found it though its cosine is 0
    dense = await store.search(C, QUERY, scope=HOME, limit=10, min_score=0.99)
    assert rare.id not in [h.id for h in dense]


async def test_a_collection_without_a_text_field_searches_dense(store: VectorStore) -> None:
    plain = CollectionSpec("plain-4", 4)
    await store.ensure(plain)
    a = note(HOME, "Quillon", [0.0, 0.0, 0.0, 1.0])
    b = note(HOME, "other", QUERY)
    await store.upsert(plain.name, [a, b])
    hits = await store.search(plain.name, QUERY, scope=HOME, limit=1, text="Quillon")
    assert [h.id for h in hits] == [b.id]


def test_bad_retrieval_settings_are_refused() -> None:
    bads: list[dict[str, Any]] = [
        {"mode": "fuzzy"},
        {"fusion": "max"},
        {"weights": (1.0,)},
        {"weights": (0.0, 0.0)},
        {"weights": (-1.0, 1.0)},
        {"rrf_k": 0},
        {"depth": 5000},
    ]
    for bad in bads:
        with pytest.raises(ValueError, match=r"mode|fusion|weight|rrf_k"):
            Retrieval(**bad)
    assert Retrieval().candidates(5) == 20 and Retrieval(depth=7).candidates(5) == 7


def test_term_weights_are_local_and_stemmed() -> None:
    idx, values = lexical.document("running runs Quillon")
    assert len(idx) == 2 and sorted(values)[-1] > sorted(values)[0]  # "run" counted twice
    assert set(lexical.query("RUN quillon")[0]) == set(idx)
    assert lexical.document("") == ([], [])


async def test_an_edge_shard_from_before_lexical_search_is_reindexed_on_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "edge"
    path.mkdir()
    old = qe.EdgeShard.create(
        str(edge_build.live_path(path, C)),
        qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=4, distance=qe.Distance.Cosine)),
    )
    rare = note(HOME, "Quillon ships ZX-4471", [0.0, 0.0, 0.0, 1.0])
    filler = [note(HOME, t, QUERY) for t in FILLER]
    old.update(qe.UpdateOperation.upsert_points([
        qe.Point(r.id, list(r.vector or []), dict(r.payload)) for r in [rare, *filler]
    ]))  # fmt: skip
    old.close()
    store = EdgeStore(path)
    await store.open()
    with caplog.at_level(logging.INFO):
        await store.ensure(SPEC)
    assert any("re-indexing" in m and "5/5" in m for m in caplog.messages)
    hits = await store.search(C, QUERY, scope=HOME, limit=1, text="ZX-4471")
    assert [h.id for h in hits] == [rare.id]
    await store.close()
    store = EdgeStore(path)  # once: the next start finds nothing to do
    await store.open()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        await store.ensure(SPEC)
    assert not any("re-indexing" in m for m in caplog.messages)
    await store.close()


async def test_a_server_collection_from_before_lexical_search_is_reindexed_on_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = QdrantServerStore(":memory:")
    await store.open()
    params = models.VectorParams(size=4, distance=models.Distance.COSINE)
    await store.client.create_collection(C, vectors_config=params)
    rare = note(HOME, "Quillon ships ZX-4471", [0.0, 0.0, 0.0, 1.0])
    filler = [note(HOME, t, QUERY) for t in FILLER]
    await store.client.upsert(C, [
        models.PointStruct(id=r.id, vector=list(r.vector or []), payload=dict(r.payload))
        for r in [rare, *filler]
    ])  # fmt: skip
    with caplog.at_level(logging.INFO):
        await store.ensure(SPEC)
    assert any("re-indexing" in m and "5/5" in m for m in caplog.messages)
    hits = await store.search(C, QUERY, scope=HOME, limit=1, text="ZX-4471")
    assert [h.id for h in hits] == [rare.id]
    got = await store.get(C, [rare.id], scope=HOME)
    assert got[0].vector is not None and len(got[0].vector) == 4
    await store.close()


async def test_a_boost_lifts_the_records_that_meet_it_in_hybrid_mode(store: VectorStore) -> None:
    from memory_services.store import Condition

    early = note(HOME, "we went camping by the lake", [1.0, 0.0, 0.0, 0.0], when=100.0)
    late = note(HOME, "we went camping by the river", [0.9, 0.1, 0.0, 0.0], when=500.0)
    await store.upsert(C, [early, late])
    plain = await store.search(C, QUERY, scope=HOME, limit=2, text="camping trip to the lake")
    assert [h.id for h in plain] == [early.id, late.id]
    in_range = [Condition("when", gte=400.0, lte=600.0)]
    boosted = await store.search(
        C, QUERY, scope=HOME, limit=2, text="camping trip to the lake", boost=in_range
    )
    assert [h.id for h in boosted] == [late.id, early.id]  # lifted, the other still there
    elsewhere = note(OTHER, "camping", QUERY, when=500.0)
    await store.upsert(C, [elsewhere])  # the boost's prefetches keep the scope too
    again = await store.search(C, QUERY, scope=HOME, limit=5, text="camping", boost=in_range)
    assert elsewhere.id not in [h.id for h in again]


async def test_edge_counts_a_text_collections_unindexed_points(tmp_path: Path) -> None:
    """The engine counts lexical vectors as indexed: written points must still count as
    waiting for an HNSW index, or the store would never index a text collection."""
    from memory_services.store import edge_query

    store = EdgeStore(tmp_path / "edge", index_after=50, flush_interval=0)
    await store.open()
    await store.ensure(SPEC)
    await store.upsert(C, [note(HOME, f"note number {n} about Quillon", QUERY) for n in range(80)])
    info = store._shards[C].info()
    assert info.indexed_vectors_count == info.points_count == 80  # the lexical vectors
    assert edge_query.unindexed(info) == 80
    await store.close()
    store = EdgeStore(tmp_path / "edge", index_after=50, flush_interval=0)
    await store.open()
    await store.ensure(SPEC)
    assert store._indexer.written[C] == 80  # known again after a restart
    await store.close()

"""Sentence vectors: a record of several sentences, one of which answers the query, ranks above
one whose whole text matches it a little better than the first one's whole text, once the
dense side scores candidates by their best sentence (``sentence_max``); on both store
backends (Qdrant Edge, the Qdrant server code path in qdrant-client's in-memory mode), with
the real all-MiniLM-L6-v2 embedder, and through fact memory, which stores the vectors of a
fact of two sentences or more. A record without them keeps its own score.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_services.facts import records as rec
from memory_services.facts.fact_memory import FactMemory
from memory_services.retrieval import resolve
from memory_services.retry import retrying_embedder
from memory_services.runtime import MemorySettings
from memory_services.store import (
    CollectionSpec,
    EdgeStore,
    Record,
    Retrieval,
    Scope,
    VectorStore,
    sentences,
)
from react_mem.embedding.base import Embedder, SpanEmbedder
from react_mem.embedding.sentence import SentenceTransformerEmbedder
from react_mem.embedding.shared import shared_embedder
from react_mem.errors import BadRequest, ConfigurationError
from react_mem.schema.facts import FactInput
from react_mem.schema.retrieval import RetrievalOptions
from tests.support.backends import backend_named
from tests.support.memory_services import START, MovableClock

SPEC = CollectionSpec("sentences-384", 384, text_fields=("content",))
ANN, BOB = Scope("ws", "default", "ann"), Scope("ws", "default", "bob")
#: No word of the query is in either text: the lexical list is empty, dense alone ranks.
QUERY = "Which sports does she enjoy?"
#: Its whole text is further from the query than WEAK's; its last sentence is nearer.
ONE = (
    "Melanie (8 May, 2023): The weather was grey all week. Our landlord raised the rent "
    "again. I love playing tennis and swimming on weekends."
)
WEAK = "Melanie (9 May, 2023): I like watching a game on television with friends now and then."
ON, OFF = Retrieval(sentence_max=True), Retrieval(sentence_max=False)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The process-wide real embedder, loaded once (each test has its own loop)."""
    shared = shared_embedder(MemorySettings.load({"id": "sentence-tests"}))
    asyncio.run(shared.start())
    return shared


@pytest.fixture(params=["edge", "qdrant"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    backend = backend_named(request.param, tmp_path / "edge")
    await backend.open()
    await backend.ensure(SPEC)
    yield backend
    await backend.close()


async def record(embedder: Embedder, owner: Scope, content: str, parts: bool = True) -> Record:
    """``content`` as a record of ``owner``, with its sentences' vectors (``parts``)."""
    split = sentences.split(content) if parts else []
    [vector, *each] = await embedder.embed([content, *split])
    payload = {**owner.payload(), "content": content}
    if each:
        payload[sentences.KEY] = sentences.encode(each)
    return Record(str(uuid.uuid4()), payload, vector)


async def ranked(
    store: VectorStore, embedder: Embedder, retrieval: Retrieval, owner: Scope = ANN
) -> list[str]:
    [probe] = await embedder.embed([QUERY])
    hits = await store.search(
        SPEC.name, probe, scope=owner, limit=5, text=QUERY, retrieval=retrieval
    )
    return [str(h.payload["content"]) for h in hits]


async def test_a_record_whose_one_sentence_matches_ranks_above_a_weak_whole_match(
    store: VectorStore, embedder: Embedder
) -> None:
    await store.upsert(
        SPEC.name, [await record(embedder, ANN, ONE), await record(embedder, ANN, WEAK)]
    )
    assert await ranked(store, embedder, OFF) == [WEAK, ONE]
    assert await ranked(store, embedder, ON) == [ONE, WEAK]
    # The reported score stays the record's own cosine.
    [probe] = await embedder.embed([QUERY])
    hits = await store.search(SPEC.name, probe, scope=ANN, limit=2, text=QUERY, retrieval=ON)
    [own] = await embedder.embed([ONE])
    assert hits[0].score == pytest.approx(float(np.dot(probe, own)), abs=1e-4)


async def test_a_record_without_sentence_vectors_keeps_its_own_score(
    store: VectorStore, embedder: Embedder
) -> None:
    """Stored before sentence vectors (or by a writer without them): nothing changes."""
    old = [await record(embedder, ANN, text, parts=False) for text in (ONE, WEAK)]
    await store.upsert(SPEC.name, old)
    assert await ranked(store, embedder, ON) == await ranked(store, embedder, OFF) == [WEAK, ONE]


async def test_another_owners_sentences_are_never_candidates(
    store: VectorStore, embedder: Embedder
) -> None:
    """The vectors are the record's payload: under its owner's scope, gone when it is."""
    theirs = await record(embedder, BOB, ONE)
    await store.upsert(SPEC.name, [theirs, await record(embedder, ANN, WEAK)])
    assert await ranked(store, embedder, ON) == [WEAK]
    assert await ranked(store, embedder, ON, BOB) == [ONE]
    [kept] = await store.get(SPEC.name, [theirs.id], scope=BOB)
    assert kept.payload[sentences.KEY] == theirs.payload[sentences.KEY]
    assert await store.get(SPEC.name, [theirs.id], scope=ANN) == []
    assert await store.delete(SPEC.name, scope=BOB) == 1
    assert await ranked(store, embedder, ON, BOB) == []


# -- the payload value and the split ----------------------------------------------------------


def test_each_sentence_keeps_the_leading_label() -> None:
    assert sentences.split(ONE) == [
        "Melanie (8 May, 2023): The weather was grey all week.",
        "Melanie (8 May, 2023): Our landlord raised the rent again.",
        "Melanie (8 May, 2023): I love playing tennis and swimming on weekends.",
    ]
    assert sentences.split(WEAK) == []  # one sentence: its own vector says it
    assert sentences.split("Well. Said: this is it.") == ["Well.", "Said: this is it."]
    joined = "Wow! So good to hear that. I went swimming with the kids today."
    assert sentences.split(joined, shortest=6) == [
        "Wow! So good to hear that.",  # a short sentence joins the next
        "I went swimming with the kids today.",
    ]
    assert sentences.split("Wow, thanks! That is lovely.", shortest=6) == []
    assert len(sentences.split("A b c d e f. " * 40)) == sentences.MOST


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(st.sampled_from("ab .!?\n"), max_size=30), max_size=12),
    st.sampled_from([1, 4]),
)
def test_the_split_keeps_every_word_in_order_and_no_part_short(
    pieces: list[str], shortest: int
) -> None:
    text = " ".join(pieces)  # no ":", so no label
    parts = sentences.split(text, most=100, shortest=shortest)
    assert parts == [] or len(parts) >= 2
    if parts:
        assert " ".join(parts).split() == text.split()
        assert all(len(part.split()) >= shortest for part in parts)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_the_vectors_come_back_within_a_cosine_of_1e3(count: int, seed: int) -> None:
    rows = np.random.default_rng(seed).normal(size=(count, 384))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    back = sentences.decode(sentences.encode(rows.tolist()), 384)
    assert back is not None and back.shape == rows.shape
    cosines = (back * rows).sum(axis=1) / np.linalg.norm(back, axis=1)
    assert (cosines > 1 - 1e-3).all()


def test_a_value_that_is_not_sentence_vectors_reads_as_none() -> None:
    value = sentences.encode([[0.5] * 384])
    for bad in (None, "", 3, "not base64!", value, value[:-8]):
        size = 383 if bad == value else 384
        assert sentences.decode(bad, size) is None, bad


def test_a_request_turns_sentences_on_or_off() -> None:
    assert resolve(RetrievalOptions(sentences=True)).sentence_max
    assert not resolve(RetrievalOptions(sentences=False)).sentence_max
    assert resolve(RetrievalOptions()).sentence_max == resolve(None).sentence_max


# -- fact memory stores them ------------------------------------------------------------------


@contextlib.asynccontextmanager
async def fact_memory(
    root: Path, embedder: Embedder, **policy: object
) -> AsyncIterator[FactMemory]:
    store = EdgeStore(root, flush_interval=0)
    await store.open()
    memory = FactMemory(
        store,
        embedder,
        policy=rec.FactPolicy(**policy),
        clock=MovableClock(START),  # type: ignore[arg-type]
    )
    await memory.ensure()
    try:
        yield memory
    finally:
        await memory.close()
        await store.close()


async def payloads(memory: FactMemory, ids: list[str]) -> list[dict[str, object]]:
    found = await memory.ctx.store.get(memory.ctx.collection, ids, scope=ANN)
    return [dict(r.payload) for r in found]


async def test_fact_memory_stores_sentence_vectors_and_ranks_by_them(
    tmp_path: Path, embedder: Embedder
) -> None:
    async with fact_memory(tmp_path, embedder) as memory:
        stored, _ = await memory.store(ANN, [FactInput(content=ONE), FactInput(content=WEAK)])
        one, weak = await payloads(memory, [s.id for s in stored])
        assert len(sentences.decode(one[sentences.KEY], 384)) == 3  # type: ignore[arg-type]
        assert sentences.KEY not in weak
        found = await memory.retrieve(ANN, query=QUERY, top_k=2, retrieval=ON)
        assert [f.content for f in found] == [ONE, WEAK]
        found = await memory.retrieve(ANN, query=QUERY, top_k=2, retrieval=OFF)
        assert [f.content for f in found] == [WEAK, ONE]
        # An update's new version is stored with its own sentences' vectors.
        new = ONE.replace("tennis", "squash")
        updated = await memory.update(ANN, stored[0].id, FactInput(content=new))
        [after] = await payloads(memory, [updated.id])
        assert after[sentences.KEY] != one[sentences.KEY]


async def test_fact_memory_can_store_one_vector_per_fact(
    tmp_path: Path, embedder: Embedder
) -> None:
    async with fact_memory(tmp_path, embedder, sentence_vectors=False) as memory:
        stored, _ = await memory.store(ANN, [FactInput(content=ONE), FactInput(content=WEAK)])
        assert all(sentences.KEY not in p for p in await payloads(memory, [s.id for s in stored]))
        found = await memory.retrieve(ANN, query=QUERY, top_k=2, retrieval=ON)
        assert [f.content for f in found] == [WEAK, ONE]  # ranked by their own vectors


# -- late chunking: sentence vectors pooled from the fact's own model run ----------------------


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.text(alphabet="ab .!?\n", min_size=1, max_size=12).filter(str.strip),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["", "Ann (8 May): ", "user: "]),
    st.booleans(),
)
def test_spans_mark_where_the_split_sentences_lie(
    pieces: list[str], head: str, label: bool
) -> None:
    text = "  " + head + " ".join(pieces) + " "
    parts, found = sentences.split(text), sentences.spans(text, label=label)
    assert len(found) == len(parts)
    for part, ranges in zip(parts, found, strict=True):
        [*named, (start, end)] = ranges
        assert part.endswith(text[start:end]) and text[start:end].strip() == text[start:end]
        prefix = part[: len(part) - (end - start)]  # split()'s label, if any
        if label and prefix:
            [(first, last)] = named
            assert prefix.rstrip() == text[first:last] + ":"
        else:
            assert named == [] and (label or not prefix or head)


async def test_late_vectors_come_from_the_texts_own_run(embedder: Embedder) -> None:
    assert isinstance(embedder, SpanEmbedder)
    late = embedder.embed_spans
    texts = [ONE, WEAK]
    own, pooled = await late(texts, [sentences.spans(t) for t in texts])
    # The same run gives the text's vector.
    assert np.allclose(own, await embedder.embed(texts), atol=1e-6)
    assert pooled[1] == [] and len(pooled[0]) == 3
    separate = np.asarray(await embedder.embed(sentences.split(ONE)))
    cosines = np.asarray(pooled[0]) @ separate.T
    assert np.allclose(np.linalg.norm(pooled[0], axis=1), 1.0, atol=1e-5)
    # Each pooled sentence is nearer its own sentence embedded alone than the others are.
    assert (cosines.argmax(axis=1) == np.arange(3)).all()
    assert (np.diag(cosines) > 0.6).all() and (np.diag(cosines) < 0.99).all()
    # A span of every word pools what the model's own mean pooling gives, bar [CLS]/[SEP].
    [_], [[whole]] = await late([ONE], [[[(0, len(ONE))]]])
    assert 0.95 < float(np.dot(whole, own[0])) < 0.9999
    with pytest.raises(BadRequest):
        await late([ONE], [])


async def test_fact_memory_pools_late_sentence_vectors(tmp_path: Path, embedder: Embedder) -> None:
    stored_by: dict[str, object] = {}
    for pooling in ("separate", "late", "late-label"):
        async with fact_memory(tmp_path / pooling, embedder, sentence_pooling=pooling) as memory:
            stored, _ = await memory.store(ANN, [FactInput(content=ONE), FactInput(content=WEAK)])
            one, weak = await payloads(memory, [s.id for s in stored])
            assert sentences.KEY not in weak
            stored_by[pooling] = one[sentences.KEY]
            assert len(sentences.decode(one[sentences.KEY], 384)) == 3  # type: ignore[arg-type]
            found = await memory.retrieve(ANN, query=QUERY, top_k=2, retrieval=ON)
            # The label's tokens pooled into each sentence pull it back toward the whole
            # (its tennis sentence: cosine .40, against .50 without them, .52 alone).
            expected = [WEAK, ONE] if pooling == "late-label" else [ONE, WEAK]
            assert [f.content for f in found] == expected
    assert len(set(stored_by.values())) == 3  # three ways, three sets of vectors


async def test_every_backend_pools_the_same_late_vectors() -> None:
    """torch (sentence-transformers' own token embeddings and offsets) and the ONNX graphs'
    second output pool the same sentence vectors; int8 weights stay close."""
    found = {}
    for backend in ("torch", "onnx", "onnx-int8"):
        embedder = SentenceTransformerEmbedder(backend=backend)  # type: ignore[arg-type]
        await embedder.start()
        [own], [pooled] = await embedder.embed_spans([ONE], [sentences.spans(ONE, label=True)])
        found[backend] = np.asarray([own, *pooled])
    cosines = {b: (v * found["torch"]).sum(axis=1) for b, v in found.items()}
    assert len(found["torch"]) == 4 and (cosines["onnx"] > 0.99999).all()
    assert (cosines["onnx-int8"] > 0.98).all() and (cosines["onnx-int8"] < 0.99999).all()


class _OneVector:
    """An embedder that cannot pool spans (only ``embed``)."""

    dimension, model_name = 384, "one-vector"

    async def start(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * 383 for _ in texts]


async def test_the_services_retrying_embedder_passes_late_chunking_through(
    embedder: Embedder,
) -> None:
    wrapped = retrying_embedder(embedder)
    assert isinstance(wrapped, SpanEmbedder) and isinstance(embedder, SpanEmbedder)
    spans = [sentences.spans(ONE)]
    assert await wrapped.embed_spans([ONE], spans) == await embedder.embed_spans([ONE], spans)
    plain = retrying_embedder(_OneVector())
    assert isinstance(plain, SpanEmbedder)
    with pytest.raises(ConfigurationError, match="cannot pool spans"):
        await plain.embed_spans([ONE], spans)

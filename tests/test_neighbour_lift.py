"""Neighbours: records stored next to each other in one write lift each other in a hybrid
search, on both store backends (Qdrant Edge, the Qdrant server code path in qdrant-client's
in-memory mode), and the fact service gives the facts of a ``sequence`` store request their
places (facts merely stored together get none).

The corpus is a conversation in miniature: a turn that matches the question's words (the
topic: a picnic), the turn after it that holds the answer (the games played) but shares no
word with the question and lies far from it by meaning, and filler that lies nearer the
question by meaning. A first pass ranks the answer below the filler; the lift brings it in.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from memory_services.store import (
    CollectionSpec,
    EdgeStore,
    QdrantServerStore,
    Record,
    Retrieval,
    Scope,
    VectorStore,
    ties,
)
from memory_services.store.base import Hit
from react_mem.bus.pulsar import PulsarTransport
from react_mem.schema.facts import FactInput
from react_mem.schema.retrieval import RetrievalOptions
from tests.support.embedder import HashingEmbedder
from tests.support.fact_memory import FactService
from tests.support.fact_memory import fact_service as shared_fact_service

SPEC = CollectionSpec("turns-4", 4, text_fields=("text",))
C = SPEC.name
ANN, BOB = Scope("ws", "default", "ann"), Scope("ws", "default", "bob")
QUESTION = "what games did they play at the church picnic"
QUERY = [1.0, 0.0, 0.0, 0.0]
TOPIC = "last weekend I had a picnic with friends from church"
ANSWER = "fun ones like charades and a scavenger hunt"
#: Nearer the question than the answer by meaning, sharing none of its words.
FILLER = [
    "the weather was lovely on the beach today",
    "we painted the kitchen a pale shade of green",
    "my sister adopted a tabby kitten last spring",
]
LIFT, NO_LIFT = Retrieval(), Retrieval(neighbour_lift=0.0)


def turn(text: str, vector: list[float], scope: Scope = ANN, **payload: Any) -> Record:
    return Record(str(uuid.uuid4()), {**scope.payload(), "text": text, **payload}, vector)


@pytest.fixture(params=["edge", "qdrant"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    backend: VectorStore = (
        EdgeStore(tmp_path / "edge") if request.param == "edge" else QdrantServerStore(":memory:")
    )
    await backend.open()
    await backend.ensure(SPEC)
    yield backend
    await backend.close()


async def conversation(store: VectorStore, answer_seq: int, thread: str = "t1") -> Record:
    """The topic (seq 4 of thread t1), the answer at ``answer_seq`` of ``thread``, and the
    filler (a thread of its own); return the answer."""
    topic = turn(TOPIC, [0.9, 0.0, 0.0, 0.44], thread="t1", seq=4)
    answer = turn(ANSWER, [0.0, 0.0, 0.0, 1.0], thread=thread, seq=answer_seq)
    filler = [
        turn(t, [1.0, 0.1 * n, 0.2, 0.0], thread="t2", seq=10 * n) for n, t in enumerate(FILLER)
    ]
    await store.upsert(C, [topic, answer, *filler])
    return answer


async def ranked(store: VectorStore, retrieval: Retrieval = LIFT, scope: Scope = ANN) -> list[Hit]:
    return await store.search(C, QUERY, scope=scope, limit=2, text=QUESTION, retrieval=retrieval)


async def test_the_turn_after_a_hit_comes_in_with_it(store: VectorStore) -> None:
    answer = await conversation(store, answer_seq=5)
    first_pass = [h.payload["text"] for h in await ranked(store, NO_LIFT)]
    assert first_pass[0] == TOPIC and ANSWER not in first_pass  # the filler outranks it
    hits = await ranked(store)
    assert [h.payload["text"] for h in hits] == [TOPIC, ANSWER]
    assert hits[1].id == answer.id


async def test_the_turn_before_a_hit_comes_in_too(store: VectorStore) -> None:
    await conversation(store, answer_seq=3)
    assert [h.payload["text"] for h in await ranked(store)] == [TOPIC, ANSWER]


@pytest.mark.parametrize(
    ("seq", "thread"), [(6, "t1"), (5, "t9")], ids=["not-adjacent", "other-write"]
)
async def test_only_adjacent_records_of_one_write_are_neighbours(
    store: VectorStore, seq: int, thread: str
) -> None:
    await conversation(store, answer_seq=seq, thread=thread)
    assert ANSWER not in [h.payload["text"] for h in await ranked(store)]


async def test_a_neighbour_in_another_scope_lifts_nothing(store: VectorStore) -> None:
    await conversation(store, answer_seq=5)
    await store.upsert(C, [turn(TOPIC, [0.9, 0.0, 0.0, 0.44], BOB, thread="t1", seq=4)])
    bob = await ranked(store, scope=BOB)
    assert [h.payload["text"] for h in bob] == [TOPIC]  # Bob's search sees Bob's record only


class Point:
    def __init__(self, id: str, payload: dict[str, Any]) -> None:
        self.id, self.score, self.payload = id, 0.0, payload


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 6), st.floats(0.01, 1.0)),
        min_size=1,
        max_size=12,
        unique_by=lambda t: t[:2],
    ),
    st.floats(0.0, 1.0),
)
def test_a_lift_never_lowers_a_score_and_adds_at_most_its_share_of_the_best_neighbour(
    rows: list[tuple[str, int, float]], share: float
) -> None:
    keys = [f"{thread}{seq}" for thread, seq, _ in rows]
    points = {k: Point(k, {"thread": t, "seq": s}) for k, (t, s, _) in zip(keys, rows, strict=True)}
    fused = {k: score for k, (_, _, score) in zip(keys, rows, strict=True)}
    lifted = ties.lift(fused, points, share)
    for key, (thread, seq, score) in zip(keys, rows, strict=True):
        near = [fused[f"{thread}{seq + d}"] for d in (-1, 1) if f"{thread}{seq + d}" in fused]
        assert lifted[key] == pytest.approx(score + share * max(near, default=0.0))


# -- the fact service: a sequence is one write ---------------------------------------------

fact_service = functools.partial(
    shared_fact_service, client=FactService, embedder=HashingEmbedder()
)
#: Turns of a chat about a picnic; the question's words are in the topic alone.
CHAT = [
    "Maria said the shelter needs volunteers on Sunday",
    "last weekend I had a picnic with friends from church",
    "fun ones like charades and a scavenger hunt",
    "John fixed his bike and rode to the lake",
    "the bakery downtown sells sourdough now",
]
ASKED = "What games did they play at the church picnic?"


@pytest.fixture
async def facts(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> AsyncIterator[FactService]:
    async with fact_service(transport, registry, tmp_path, unique) as service:
        yield service


async def top_two(facts: FactService, user: str, **options: Any) -> list[str]:
    retrieval = RetrievalOptions(**options) if options else None
    found = await facts.ok("retrieve", query=ASKED, top_k=2, user=user, retrieval=retrieval)
    return [f.content for f in found.facts]


@pytest.mark.broker
async def test_the_turns_of_a_sequence_are_neighbours(facts: FactService) -> None:
    turns = [FactInput(content=c) for c in CHAT]
    await facts.ok("store", facts=turns, user="ann", sequence=True)
    await facts.ok("store", facts=turns, user="bob")  # stored together, not as a sequence
    assert await top_two(facts, "ann") == CHAT[1:3]
    assert CHAT[2] not in await top_two(facts, "ann", neighbour_lift=0.0)
    assert CHAT[2] not in await top_two(facts, "bob")
